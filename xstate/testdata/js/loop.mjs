import { createMachine } from 'xstate';

// A guard that never returns: it must be interrupted.
export default createMachine({
  id: 'spinner',
  initial: 'idle',
  states: {
    idle: {
      on: {
        SPIN: { guard: function forever() { for (;;) {} }, target: 'done' },
        RECURSE: { actions: function deep() { const f = (n) => f(n + 1) + 1; f(0); } },
      },
    },
    done: {},
  },
});
