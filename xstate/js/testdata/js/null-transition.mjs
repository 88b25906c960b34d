import { createMachine } from 'xstate';

// XState's createMachine throws on an event mapped to null.
export default createMachine({
  id: 'nulls',
  initial: 'a',
  states: {
    a: {
      on: {
        GO: null,
        FINE: undefined,
      },
    },
  },
});
