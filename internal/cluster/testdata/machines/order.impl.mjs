import { assign } from 'xstate';
export default { actions: { addItem: assign({ items: ({ context }) => context.items + 1 }) } };
