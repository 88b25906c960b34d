import { createMachine, assign } from 'xstate';

// console in actions and guards, as XState's own examples use it. (Only
// warn and error here: Node writes them to stderr, so the oracle's trace
// on stdout stays clean. xstate/js/js_test.go checks log and the rest.)
export default createMachine({
  id: 'console',
  initial: 'idle',
  context: { n: 0 },
  states: {
    idle: {
      entry: () => console.warn('entered idle'),
      on: {
        GO: {
          guard: ({ event }) => { console.error('checking', event); return true; },
          target: 'busy',
          actions: [assign({ n: ({ context }) => context.n + 1 }), ({ context }) => console.warn('n is', context.n)],
        },
      },
    },
    busy: { entry: () => console.error('busy') },
  },
});
