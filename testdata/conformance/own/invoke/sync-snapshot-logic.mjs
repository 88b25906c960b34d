import { setup, assign, spawnChild, fromCallback, fromPromise } from 'xstate';

// Children that are not machines, with their snapshots synced: a spawned
// callback and promise (syncSnapshot: true) and an invoked callback (with
// onSnapshot) each send their parent an xstate.snapshot event as they
// start (status active, with their input), after what a callback sends
// back in its body (getSnapshot() shows the same). An invoke's own syncSnapshot: true does nothing
// without onSnapshot, and a promise's done snapshot is not sent.
export default setup({
  actors: {
    cb: fromCallback(({ sendBack, input }) => {
      sendBack({ type: 'HELLO', from: input.name });
      return () => {};
    }),
    later: fromPromise(async ({ input }) => input.n * 2),
  },
}).createMachine({
  id: 'parent',
  context: { seen: [] },
  initial: 'idle',
  on: {
    HELLO: { actions: assign({ seen: ({ context, event }) => [...context.seen, 'hello ' + event.from] }) },
    'xstate.snapshot.*': {
      actions: assign({ seen: ({ context, event }) => [...context.seen, { [event.type]: event.snapshot }] }),
    },
    'xstate.done.actor.p': {
      actions: assign({ seen: ({ context, event }) => [...context.seen, 'done ' + event.output] }),
    },
  },
  states: {
    idle: {
      on: {
        SPAWN: {
          actions: [
            spawnChild('cb', { id: 'c', input: { name: 'spawned' }, syncSnapshot: true }),
            spawnChild('later', { id: 'p', input: { n: 21 }, syncSnapshot: true }),
          ],
        },
        PEEK: {
          actions: assign({
            peek: ({ self }) => {
              const { c, p } = self.getSnapshot().children;
              return { c: c.getSnapshot(), p: p.getSnapshot() };
            },
          }),
        },
        GO: 'running',
      },
    },
    running: {
      invoke: [
        {
          id: 'i',
          src: 'cb',
          input: { name: 'invoked' },
          onSnapshot: { actions: assign({ seen: ({ context, event }) => [...context.seen, { onSnapshot: event.snapshot }] }) },
        },
        { id: 'j', src: 'cb', input: { name: 'unsynced' }, syncSnapshot: true },
      ],
    },
  },
});
