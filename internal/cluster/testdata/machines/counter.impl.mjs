import { assign } from 'xstate';
export default { actions: { inc: assign({ n: ({ context }) => context.n + 1 }) } };
