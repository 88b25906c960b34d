import { createMachine, assign } from 'xstate';

// JavaScript orders integer-like keys first, in numeric order, whatever
// the order they were written in; code that lists a context's keys sees
// that order, at the top level and in nested objects.
export default createMachine({
  id: 'keys',
  initial: 'idle',
  context: { '10': 'ten', '2': 'two', alpha: 1, byId: { '10': 'x', '2': 'y', b: 1, c: 2 } },
  states: {
    idle: {
      on: {
        LIST: {
          actions: assign({
            top: ({ context }) => Object.keys(context).join(','),
            inner: ({ context }) => Object.keys(context.byId).join(','),
            values: ({ context }) => Object.values(context.byId).join(','),
            spread: ({ context }) => Object.keys({ ...context.byId }).join(','),
            entries: ({ context }) => Object.entries(context).map(([k]) => k).join(','),
          }),
        },
      },
    },
  },
});
