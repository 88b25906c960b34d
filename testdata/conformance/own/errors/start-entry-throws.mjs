import { createMachine, assign } from 'xstate';

// An assign that throws in an initial entry, below a context made from
// input: the failed start keeps the context function's context, not the
// entry's assigns.
export default createMachine({
  id: 'loader',
  context: ({ input }) => ({ n: input.n, items: [] }),
  initial: 'boot',
  tags: ['root'],
  states: {
    boot: {
      tags: ['booting'],
      initial: 'parse',
      states: {
        parse: {
          entry: [
            assign({ n: 5 }),
            assign({ items: ({ context }) => context.config.items.slice() }),
          ],
        },
      },
      on: { GO: 'ready' },
    },
    ready: {},
  },
});
