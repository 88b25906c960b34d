import { setup, assign, enqueueActions, raise, cancel, sendParent, sendTo, forwardTo, emit, log, and, or, not, stateIn, spawnChild, stopChild } from 'xstate';

const stage = setup({
  types: {} as { input: { name: string; ms: number }; context: { name: string; ms: number; runs: number } },
}).createMachine({
  id: 'stage',
  context: ({ input }) => ({ name: input.name, ms: input.ms, runs: 0 }),
  initial: 'waiting',
  states: {
    waiting: { on: { RUN: { target: 'running', actions: assign(({ context }) => ({ ...context, runs: context.runs + 1 })) } } },
    running: {
      after: { 0: { actions: sendParent(({ context }) => ({ type: 'STAGE.STARTED', name: context.name })) } },
      on: { TICK: [
        { guard: ({ context, event }) => (event as any).at >= context.ms, target: 'finished' },
        { actions: sendParent(({ context, event }) => ({ type: 'STAGE.PROGRESS', name: context.name, at: (event as any).at })) },
      ] },
    },
    finished: { type: 'final', entry: sendParent(({ context }) => ({ type: 'STAGE.DONE', name: context.name, runs: context.runs })) },
  },
});

export default setup({
  types: {} as { context: { done: string[]; progress: Record<string, number>; started: string[]; failures: number; clock: number } },
  actors: { stage },
  guards: {
    allDone: ({ context }) => context.done.length >= 2,
    tooManyFailures: ({ context }, p: { max: number }) => context.failures >= p.max,
  },
}).createMachine({
  id: 'pipeline',
  context: { done: [], progress: {}, started: [], failures: 0, clock: 0 },
  initial: 'setup',
  states: {
    setup: {
      entry: [
        spawnChild('stage', { id: 'build', input: { name: 'build', ms: 20 } }),
        spawnChild('stage', { id: 'test', input: { name: 'test', ms: 40 } }),
      ],
      always: 'running',
    },
    running: {
      type: 'parallel',
      entry: enqueueActions(({ enqueue }) => {
        enqueue.sendTo('build', { type: 'RUN' });
        enqueue.sendTo('test', { type: 'RUN' });
        enqueue.raise({ type: 'WATCHDOG' }, { id: 'wd', delay: 1000 });
      }),
      states: {
        monitor: {
          initial: 'ok',
          states: {
            ok: { on: { FAIL: { target: 'degraded', actions: assign({ failures: ({ context }) => context.failures + 1 }) } } },
            degraded: {
              always: { guard: { type: 'tooManyFailures', params: { max: 2 } }, target: '#pipeline.aborted' },
              on: { FAIL: { actions: assign({ failures: ({ context }) => context.failures + 1 }), target: 'degraded', reenter: true }, RECOVER: 'ok' },
            },
          },
        },
        ticker: {
          on: {
            TICK: { actions: [assign({ clock: ({ context }) => context.clock + 10 }), enqueueActions(({ context, enqueue, check }) => {
              const at = context.clock;
              if (check(not(stateIn({ running: { monitor: 'degraded' } })))) {
                enqueue.sendTo('build', { type: 'TICK', at });
              }
              if (check(or([stateIn({ running: { monitor: 'ok' } }), ({ context }) => context.clock > 30]))) {
                enqueue.sendTo('test', { type: 'TICK', at });
              }
              enqueue(log(({ context }) => `tick ${context.clock}`));
            })] },
          },
        },
      },
      on: {
        'STAGE.STARTED': { actions: assign({ started: ({ context, event }) => [...context.started, (event as any).name] }) },
        'STAGE.PROGRESS': { actions: assign({ progress: ({ context, event }) => ({ ...context.progress, [(event as any).name]: (event as any).at }) }) },
        'STAGE.DONE': { actions: [
          assign({ done: ({ context, event }) => [...context.done, `${(event as any).name}x${(event as any).runs}`] }),
          emit(({ event }) => ({ type: 'stage', name: (event as any).name })),
          raise({ type: 'CHECK' }),
        ] },
        CHECK: { guard: and(['allDone', not({ type: 'tooManyFailures', params: { max: 1 } })]), target: 'complete' },
        WATCHDOG: 'aborted',
        POKE: { actions: forwardTo('test') },
      },
    },
    complete: { type: 'final', entry: [cancel('wd'), stopChild('build'), stopChild('test')] },
    aborted: { type: 'final', entry: log('aborted') },
  },
  output: ({ context }) => ({ done: context.done, failures: context.failures, started: context.started }),
});
