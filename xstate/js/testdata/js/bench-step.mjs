import { createMachine, assign } from 'xstate';
export default createMachine({
  id: 'm', initial: 'a', context: { n: 0 },
  states: { a: { on: { INC: { guard: ({ context }) => context.n < 1e12, actions: assign({ n: ({ context }) => context.n + 1 }) }, NOOP: { guard: ({ context }) => context.n > -1 } } } },
});
