import { assign } from 'xstate';
export default {
  guards: { notMuted: ({ context }) => !context.muted },
  actions: {
    note: assign({ log: ({ context }, params) => [...context.log, params.msg] }),
    unmute: assign({ muted: false }),
  },
};
