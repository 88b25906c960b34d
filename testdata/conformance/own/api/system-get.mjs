// The actor system: a child invoked with a systemId is found with
// system.get from the parent's actions (as sendTo's target, and read for
// its id).
import { setup, createMachine, assign, sendTo, sendParent } from 'xstate';
const notifier = createMachine({
  id: 'notifier', initial: 'idle', context: { count: 0 },
  states: { idle: { on: { NOTIFY: { actions: [assign({ count: ({ context }) => context.count + 1 }), sendParent(({ context }) => ({ type: 'ACK', n: context.count + 1 }))] } } } },
});
export default setup({ actors: { notifier } }).createMachine({
  id: 'app', initial: 'on', context: { acks: 0, found: null },
  invoke: { src: 'notifier', id: 'n1', systemId: 'notify' },
  states: { on: { on: {
    PING: { actions: sendTo(({ system }) => system.get('notify'), { type: 'NOTIFY' }) },
    FIND: { actions: assign({ found: ({ system }) => { const a = system.get('notify'); return a ? a.id : null; } }) },
    ACK: { actions: assign({ acks: ({ event }) => event.n }) },
  } } },
});
