import { createMachine } from 'xstate';
export const a = createMachine({ id: 'a', initial: 'x', states: { x: {} } });
export const b = createMachine({ id: 'b', initial: 'x', states: { x: {} } });
