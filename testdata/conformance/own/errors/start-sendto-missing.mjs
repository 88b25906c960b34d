import { createMachine, assign, sendTo } from 'xstate';

export default createMachine({
  id: 'relay',
  context: { sent: 0 },
  initial: 'idle',
  states: {
    idle: {
      tags: ['waiting'],
      entry: [assign({ sent: 1 }), sendTo('printer', { type: 'PRINT' })],
      on: { GO: 'done' },
    },
    done: { type: 'final' },
  },
});
