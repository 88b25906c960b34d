import { setup, assign } from 'xstate';
import { over } from './helpers';

export default setup({
  guards: { isLarge: ({ event }) => over((event as any).amount) },
  actions: { record: assign({ last: ({ event }) => (event as any).amount }) },
}).createMachine({
  id: 'payments',
  initial: 'open',
  context: { last: 0 },
  states: {
    open: {
      on: {
        PAY: [
          { guard: 'isLarge', target: 'review', actions: 'record' },
          { actions: 'record' },
        ],
      },
    },
    review: {},
  },
});
