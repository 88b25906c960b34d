import { createMachine, assign, fromCallback } from 'xstate';

const idle = fromCallback(() => () => {});

// Invokes without an id get XState's: INDEX.STATE_NODE_ID.
export default createMachine({
  id: 'ids',
  initial: 'a',
  context: { children: [] },
  states: {
    a: {
      invoke: [{ src: idle }, { src: idle, id: 'named' }],
      initial: 'x',
      states: { x: { invoke: { src: idle } } },
      on: { LOOK: { actions: assign({ children: ({ self }) => Object.keys(self.getSnapshot().children).sort() }) } },
    },
  },
});
