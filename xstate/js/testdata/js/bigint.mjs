import { createMachine } from 'xstate';

// BigInt arithmetic cannot be bounded: the sandbox has none.
export default createMachine({
  id: 'big',
  initial: 'idle',
  states: {
    idle: { on: { POW: { actions: () => 2n ** 10000000000n } } },
  },
});
