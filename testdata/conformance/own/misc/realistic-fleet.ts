import { setup, assign, sendTo, stopChild, assertEvent, fromTransition, type ActorRefFrom } from 'xstate';

const counter = fromTransition((s: { n: number }, e: { type: string; by?: number }) => (e.type === 'BUMP' ? { n: s.n + (e.by ?? 1) } : s), { n: 0 });
const worker = setup({}).createMachine({
  id: 'worker', initial: 'idle', context: ({ input }: { input: { name: string } }) => ({ name: input.name, jobs: 0 }),
  states: {
    idle: { on: { WORK: { target: 'busy', actions: assign({ jobs: ({ context }) => context.jobs + 1 }) } } },
    busy: { on: { DONE: { target: 'idle', actions: ({ context, self }) => { self._parent?.send({ type: 'REPORT', name: context.name, jobs: context.jobs }); } } } },
  },
});

export default setup({
  types: {} as {
    context: { workers: Record<string, ActorRefFrom<typeof worker>>; tally: ActorRefFrom<typeof counter> | null; reports: string[] };
    events: { type: 'HIRE'; name: string } | { type: 'ASSIGN'; name: string } | { type: 'FINISH'; name: string } | { type: 'FIRE'; name: string } | { type: 'REPORT'; name: string; jobs: number } | { type: 'COUNT'; by: number };
  },
  actors: { worker, counter },
}).createMachine({
  id: 'fleet',
  context: ({ spawn }) => ({ workers: {}, tally: spawn('counter', { id: 'tally' }), reports: [] }),
  on: {
    HIRE: { actions: assign({ workers: ({ context, event, spawn }) => ({ ...context.workers, [event.name]: spawn('worker', { id: `w-${event.name}`, input: { name: event.name } }) }) }) },
    ASSIGN: { actions: sendTo(({ context, event }) => { assertEvent(event, 'ASSIGN'); return context.workers[event.name]; }, { type: 'WORK' }) },
    FINISH: { actions: sendTo(({ context, event }) => context.workers[(event as any).name], { type: 'DONE' }) },
    FIRE: { actions: [stopChild(({ context, event }) => context.workers[(event as any).name]), assign({ workers: ({ context, event }) => { const { [(event as any).name]: _, ...rest } = context.workers; return rest; } })] },
    REPORT: { actions: [assign({ reports: ({ context, event }) => [...context.reports, `${event.name}:${event.jobs}`] }), sendTo(({ context }) => context.tally!, ({ event }) => ({ type: 'BUMP', by: event.jobs }))] },
    COUNT: { actions: assign({ reports: ({ context }) => [...context.reports, `tally:${(context.tally!.getSnapshot() as any).context.n}`] }) },
  },
});
