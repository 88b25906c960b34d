import { setup, assign, raise, fromCallback } from 'xstate';

// The initial state invokes a callback and raises an event that leaves
// it, all in the actor's initial step: the callback never starts, so its
// start-up sendBack never arrives; the state entered next invokes one
// that does start.
export default setup({
  actors: {
    greeter: fromCallback(({ sendBack, input }) => { sendBack({ type: 'HELLO', from: input }); }),
  },
}).createMachine({
  id: 'boot',
  context: { hellos: [] },
  initial: 'splash',
  on: { HELLO: { actions: assign({ hellos: ({ context, event }) => [...context.hellos, event.from] }) } },
  states: {
    splash: {
      entry: raise({ type: 'SKIP' }),
      invoke: { id: 'g', src: 'greeter', input: 'splash' },
      on: { SKIP: 'home' },
    },
    home: {
      invoke: { id: 'g2', src: 'greeter', input: 'home' },
      on: { BACK: 'splash' },
    },
  },
});
