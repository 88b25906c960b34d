// enqueueActions' other creators: spawnChild, sendTo (at once and with a
// delay and an id), cancel, stopChild, and raise with a delay.
import { setup, createMachine, assign, enqueueActions, sendParent } from 'xstate';
const child = createMachine({ id: 'child', initial: 'c', context: { got: 0 },
  states: { c: { on: { HI: { actions: [assign({ got: ({ context }) => context.got + 1 }), sendParent({ type: 'BACK' })] } } } } });
export default setup({ actors: { child } }).createMachine({
  id: 'enqueuer', initial: 'a', context: { backs: 0, logs: 0 },
  states: { a: { on: {
    SPAWN: { actions: enqueueActions(({ enqueue }) => { enqueue.spawnChild('child', { id: 'k' }); }) },
    SEND: { actions: enqueueActions(({ enqueue }) => { enqueue.sendTo('k', { type: 'HI' }); enqueue.sendTo('k', { type: 'HI' }, { delay: 50, id: 'd1' }); }) },
    CANCEL: { actions: enqueueActions(({ enqueue }) => { enqueue.cancel('d1'); }) },
    BACK: { actions: assign({ backs: ({ context }) => context.backs + 1 }) },
    KILL: { actions: enqueueActions(({ enqueue }) => { enqueue.stopChild('k'); enqueue.raise({ type: 'AFTER_KILL' }, { delay: 10 }); }) },
    AFTER_KILL: { actions: assign({ logs: 1 }) },
  } } },
});
