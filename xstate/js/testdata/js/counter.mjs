import { createMachine, assign } from 'xstate';

export default createMachine({
  id: 'counter',
  context: { n: 0 },
  on: {
    INC: { actions: assign({ n: ({ context, event }) => context.n + (event.by ?? 1) }) },
    FAIL: { actions: () => { throw new Error('counter broke'); } },
  },
});
