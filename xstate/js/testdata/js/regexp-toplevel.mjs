import { createMachine } from 'xstate';

// A module whose top-level code backtracks for minutes.
const found = /^(?=a)(a+)+$/.test('a'.repeat(30) + 'b');

export default createMachine({ id: 'slow', initial: found ? 'a' : 'b', states: { a: {}, b: {} } });
