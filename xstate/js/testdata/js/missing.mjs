import { setup } from 'xstate';

export default setup({ guards: { known: () => true } }).createMachine({
  id: 'gaps',
  initial: 'a',
  states: {
    a: {
      after: { patience: 'b' },
      invoke: { src: 'fetcher' },
      on: { GO: { guard: 'unknownGuard', target: 'b', actions: 'unknownAction' } },
    },
    b: {},
  },
});
