import { assign } from 'xstate';
export default {
  guards: { nLt: ({ context }, params) => context.n < params.k },
  actions: {
    inc: assign({ n: ({ context }) => context.n + 1 }),
    note: assign({ log: ({ context }, params) => [...context.log, params.msg] }),
  },
};
