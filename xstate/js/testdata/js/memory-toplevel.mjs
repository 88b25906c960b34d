import { createMachine } from 'xstate';

// Top-level code that takes memory without end: the module must fail to
// load, not take the process down.
let s = 'x';
for (;;) s = s + s;

export default createMachine({ id: 'never', initial: 'a', states: { a: {} } });
