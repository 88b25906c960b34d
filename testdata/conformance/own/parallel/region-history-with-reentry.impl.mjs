import { assign } from 'xstate';
export default { actions: { rec: assign({ log: ({ context }, params) => [...context.log, params.msg] }) } };
