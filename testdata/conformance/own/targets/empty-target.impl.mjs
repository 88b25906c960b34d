import { assign } from 'xstate';
export default { actions: { count: assign({ saves: ({ context }) => context.saves + 1 }) } };
