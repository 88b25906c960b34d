import { createMachine, sendTo, sendParent } from 'xstate';

const echo = createMachine({
  id: 'echo',
  on: { PING: { actions: sendParent({ type: 'PONG' }, { delay: 50 }) } },
});

export default createMachine({
  id: 'relay',
  initial: 'idle',
  states: {
    idle: { on: { START: 'running' } },
    running: {
      entry: sendTo('w', { type: 'PING' }, { delay: 100 }),
      invoke: { id: 'w', src: echo },
      on: { PONG: 'ponged' },
    },
    ponged: {},
  },
});
