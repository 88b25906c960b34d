import { setup, createMachine, assign, raise, sendParent, spawnChild, stopChild, fromCallback } from 'xstate';

// A child stopped in the step that made it never starts: neither a
// callback's start-up sendBack nor a child machine's entry sendParent
// happens. One that survives the step starts as usual.
const child = createMachine({ id: 'child', entry: sendParent({ type: 'HELLO', from: 'machine' }) });

export default setup({
  actors: {
    child,
    greeter: fromCallback(({ sendBack }) => { sendBack({ type: 'HELLO', from: 'callback' }); }),
  },
}).createMachine({
  id: 'host',
  context: { hellos: [] },
  initial: 'idle',
  on: {
    HELLO: { actions: assign({ hellos: ({ context, event }) => [...context.hellos, event.from] }) },
    SPAWN_AND_STOP: { actions: [spawnChild('greeter', { id: 'g' }), stopChild('g')] },
    SPAWN: { actions: spawnChild('greeter', { id: 'g2' }) },
  },
  states: {
    idle: { on: { PASS: 'transient', STAY: 'busy' } },
    transient: {
      invoke: { id: 'kid', src: 'child' },
      entry: raise({ type: 'LEAVE' }),
      on: { LEAVE: 'idle' },
    },
    busy: {
      invoke: { id: 'kid', src: 'child' },
      on: { LEAVE: 'idle' },
    },
  },
});
