import { createMachine, sendTo, stateIn } from 'xstate';

// A start that fails as its actions are resolved: the snapshot left has
// only the root active, which stateIn('#id') sees, though its value is
// the initial state's.
export default createMachine({
  id: 'm',
  initial: 'ready',
  entry: sendTo('logger', { type: 'BOOT' }),
  on: {
    BY_ID: { guard: stateIn('#m.ready'), target: '.other' },
    BY_VALUE: { guard: stateIn('ready'), target: '.other' },
    ANY: '.other',
  },
  states: { ready: {}, other: {} },
});
