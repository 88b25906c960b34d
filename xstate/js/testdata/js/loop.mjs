import { assign, createMachine } from 'xstate';

// A guard and an assign that never return: they must be interrupted.
export default createMachine({
  id: 'spinner',
  initial: 'idle',
  states: {
    idle: {
      on: {
        SPIN: { guard: function forever() { for (;;) {} }, target: 'done' },
        RECURSE: { actions: function deep() { const f = (n) => f(n + 1) + 1; f(0); } },
        SPIN_ASSIGN: { actions: assign({ total: () => { for (;;) {} } }) },
      },
    },
    done: {},
  },
});
