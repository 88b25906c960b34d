import { setup, assign, fromCallback, fromPromise, spawnChild, stopChild, sendTo } from 'xstate';

// A system id is free again as soon as its actor is stopped, within the
// same step: re-entering a state whose invoke has a systemId, and
// stopping then spawning again under one systemId, work as in XState.
export default setup({
  actors: {
    worker: fromCallback(({ sendBack, receive, input }) => {
      receive((e) => sendBack({ type: 'DONE_JOB', by: input.name, job: e.job }));
    }),
    fetcher: fromPromise(async ({ input }) => input.page * 10),
  },
}).createMachine({
  id: 'pool',
  context: { restarts: 0, results: [], fetched: [] },
  initial: 'idle',
  on: {
    FLIP: {
      actions: [
        spawnChild('worker', { id: 'w', systemId: 'worker', input: { name: 'first' } }),
        stopChild('w'),
        spawnChild('worker', { id: 'w', systemId: 'worker', input: { name: 'second' } }),
        assign({ restarts: ({ context }) => context.restarts + 1 }),
      ],
    },
    RESTART: {
      actions: [
        stopChild('w'),
        spawnChild('worker', { id: 'w', systemId: 'worker', input: { name: 'third' } }),
        assign({ restarts: ({ context }) => context.restarts + 1 }),
      ],
    },
    JOB: { actions: sendTo(({ system }) => system.get('worker'), ({ event }) => ({ type: 'WORK', job: event.job })) },
    DONE_JOB: { actions: assign({ results: ({ context, event }) => [...context.results, event.by + ':' + event.job] }) },
    REFETCH: { target: '.idle', reenter: true },
  },
  states: {
    idle: {
      invoke: {
        id: 'f', src: 'fetcher', systemId: 'fetcher', input: ({ context }) => ({ page: context.fetched.length + 1 }),
        onDone: { actions: assign({ fetched: ({ context, event }) => [...context.fetched, event.output] }) },
      },
    },
  },
});
