import { setup, createMachine, assign, sendTo } from 'xstate';

// Actor refs kept in the context stay refs while other children run
// their own code (which happens between the parent's calls), whether a
// guard of the parent (evaluated for can()) or an action reads them;
// a ref from the context is the very object the snapshot's children hold.
const kid = createMachine({
  context: { pings: 0 },
  on: { PING: { actions: assign({ pings: ({ context }) => context.pings + 1 }) } },
});

export default setup({ actors: { kid } }).createMachine({
  id: 'parent',
  context: ({ spawn }) => ({ status: null, same: null, pings: null, ref: spawn('kid', { id: 'r' }) }),
  invoke: { id: 'k', src: 'kid' },
  on: {
    PING_OTHER: { actions: [sendTo('k', { type: 'PING' }), assign({ status: 'pinged' })] },
    PING_REF: { actions: sendTo(({ context }) => context.ref, { type: 'PING' }) },
    READ: {
      actions: assign({
        status: ({ context }) => context.ref.getSnapshot().status,
        pings: ({ context }) => context.ref.getSnapshot().context.pings,
        same: ({ context, self }) => self.getSnapshot().children.r === context.ref,
      }),
    },
    ONLY_IF_ACTIVE: { guard: ({ context }) => context.ref.getSnapshot().status === 'active', actions: assign({ status: 'checked' }) },
  },
});
