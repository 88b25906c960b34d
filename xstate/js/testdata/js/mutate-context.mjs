import { createMachine, assign } from 'xstate';

// A guard that changes the context object it is given (which XState's
// docs forbid): the change does not reach the snapshot.
export default createMachine({
  id: 'mutator',
  initial: 'idle',
  context: { a: 1, b: 'x' },
  states: {
    idle: {
      on: {
        GO: {
          guard: ({ context }) => { context.a = 99; delete context.b; context.added = true; return true; },
          actions: assign({ seen: ({ context }) => [context.a, 'b' in context, context.added] }),
        },
      },
    },
  },
});
