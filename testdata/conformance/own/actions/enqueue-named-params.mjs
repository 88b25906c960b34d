import { setup, assign, enqueueActions } from 'xstate';

// A named action made with enqueueActions gets its params, as any named
// action does: static ones, and ones computed from the event.
export default setup({
  actions: {
    bump: enqueueActions(({ enqueue, check }, params) => {
      enqueue.assign({ n: ({ context }) => context.n + params.by });
      if (check({ type: 'big', params: { over: params.by } })) {
        enqueue.assign({ big: ({ context }) => context.big + 1 });
      }
    }),
  },
  guards: {
    big: (_, params) => params.over >= 10,
  },
}).createMachine({
  id: 'counter',
  context: { n: 0, big: 0 },
  on: {
    STATIC: { actions: { type: 'bump', params: { by: 1 } } },
    DYN: { actions: { type: 'bump', params: ({ event }) => ({ by: event.by }) } },
    // A list inside the list of actions: XState does nothing with it.
    NESTED: { actions: [{ type: 'bump', params: { by: 100 } }, [{ type: 'bump', params: { by: 1000 } }]] },
  },
});
