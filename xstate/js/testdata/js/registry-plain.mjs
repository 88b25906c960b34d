import { setup, assign } from 'xstate';

// The module's assign leaves JavaScript values in the context; check, an
// action of the Go registry, reads them in the same step.
export default setup({
  actions: {
    put: assign({ items: () => [1, 2], meta: ({ event }) => ({ by: event.by }) }),
  },
}).createMachine({
  id: 'plain',
  initial: 'a',
  context: { items: [] },
  states: {
    a: { on: { GO: { target: 'b', actions: ['put', { type: 'check', params: ({ context }) => ({ n: context.items.length }) }] } } },
    b: {},
  },
});
