import { createMachine, assign } from 'xstate';

const waiter = createMachine({
  id: 'waiter',
  initial: 'waiting',
  states: {
    waiting: { after: { 100: 'done' }, on: { HURRY: 'done' } },
    done: { type: 'final' },
  },
  output: { waited: true },
});

export default createMachine({
  id: 'parent',
  initial: 'idle',
  context: { result: null },
  states: {
    idle: { on: { START: 'running' } },
    running: {
      invoke: { id: 'w', src: waiter, onDone: { target: 'finished', actions: assign({ result: ({ event }) => event.output }) } },
    },
    finished: {},
  },
});
