import { setup, assign, sendTo, spawnChild, enqueueActions, fromPromise, createMachine, emit } from 'xstate';

const worker = createMachine({
  id: 'worker',
  context: ({ input }) => ({ name: input.name, done: 0 }),
  on: {
    JOB: { actions: [assign({ done: ({ context }) => context.done + 1 }),
      sendTo(({ system }) => system.get('hub'), ({ context, event }) => ({ type: 'FINISHED', by: context.name, job: event.job }))] },
  },
});
const hub = createMachine({
  id: 'hub',
  context: { finished: [] },
  on: { FINISHED: { actions: [assign({ finished: ({ context, event }) => [...context.finished, `${event.by}:${event.job}`] }), emit(({ event }) => ({ type: 'hub.finished', job: event.job }))] } },
});

export default setup({
  actors: { worker, hub, lookup: fromPromise(async ({ input }) => input.jobs.map((j) => j * 2)) },
}).createMachine({
  id: 'sys',
  initial: 'boot',
  context: { jobs: [], snaps: 0 },
  states: {
    boot: {
      entry: [
        spawnChild('hub', { id: 'hub', systemId: 'hub' }),
        spawnChild('worker', { id: 'w1', systemId: 'w1', input: { name: 'one' }, syncSnapshot: true }),
      ],
      invoke: {
        src: 'lookup', input: { jobs: [1, 2] },
        onDone: { target: 'run', actions: enqueueActions(({ enqueue, event }) => {
          enqueue.assign({ jobs: event.output });
          for (const j of event.output) enqueue.sendTo(({ system }) => system.get('w1'), { type: 'JOB', job: j });
        }) },
      },
    },
    run: {
      on: {
        MORE: { actions: sendTo('w1', ({ event }) => ({ type: 'JOB', job: event.job })) },
        'xstate.snapshot.w1': { actions: assign({ snaps: ({ context }) => context.snaps + 1 }) },
      },
    },
  },
  on: { 'xstate.snapshot.w1': { actions: assign({ snaps: ({ context }) => context.snaps + 100 }) } },
});
