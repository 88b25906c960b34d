import { setup, createMachine, assign, sendTo, cancel, raise, spawnChild, log, emit, fromPromise } from 'xstate';

const classifier = createMachine({
  id: 'classifier',
  initial: 'reading',
  context: ({ input }) => ({ title: input.title, label: null }),
  states: {
    reading: {
      always: [
        { guard: ({ context }) => context.title.includes('crash'), target: 'labelled', actions: assign({ label: 'bug' }) },
        { guard: ({ context }) => context.title.includes('?'), target: 'labelled', actions: assign({ label: 'question' }) },
      ],
      on: { LABEL: { target: 'labelled', actions: assign({ label: ({ event }) => event.label }) },
            BOOM: { actions: () => { throw new Error('classifier exploded'); } } },
    },
    labelled: { type: 'final' },
  },
  output: ({ context }) => ({ label: context.label }),
});

const base = setup({
  actors: { classifier, notify: fromPromise(async ({ input }) => `sent:${input.to}`) },
  actions: {
    record: assign({ log: ({ context }, params) => [...context.log, params.msg] }),
    shout: () => {},
  },
  guards: { isUrgent: ({ context }) => context.priority >= 3 },
  delays: { sla: ({ context }) => (context.priority >= 3 ? 100 : 1000) },
}).createMachine({
  id: 'triage',
  context: ({ input }) => ({ priority: input?.priority ?? 1, label: null, log: [], snaps: 0 }),
  initial: 'new',
  on: { 'feedback.*': { actions: { type: 'record', params: ({ event }) => ({ msg: event.type }) } } },
  states: {
    new: {
      description: 'Waiting for a classification',
      invoke: [
        { id: 'cls', src: 'classifier', input: ({ context }) => ({ title: context.priority > 2 ? 'app crash' : 'hello' }),
          onDone: { target: 'classified', actions: assign({ label: ({ event }) => event.output.label }) },
          onError: { target: 'manual', actions: { type: 'record', params: ({ event }) => ({ msg: `error: ${event.error.message}` }) } },
          onSnapshot: { actions: assign({ snaps: ({ context }) => context.snaps + 1 }) } },
        { id: 'note', src: 'notify', input: { to: 'team' }, onDone: { actions: { type: 'record', params: ({ event }) => ({ msg: event.output }) } } },
      ],
      on: { BOOM: { actions: sendTo('cls', { type: 'BOOM' }) }, CHILDLABEL: { actions: sendTo('cls', ({ event }) => ({ type: 'LABEL', label: event.label })) } },
    },
    manual: {
      tags: ['needs-human'],
      after: { sla: { target: 'escalated', guard: 'isUrgent' } },
      entry: [sendTo('self-timer', { type: 'PING' }, { delay: 50, id: 'ping' }), log(({ context }) => `manual ${context.priority}`)],
      on: {
        LABEL: { target: 'classified', actions: [cancel('ping'), assign({ label: ({ event }) => event.label })] },
        BUMP: { actions: assign({ priority: ({ context }) => context.priority + 1 }), reenter: true, target: 'manual' },
      },
      invoke: { id: 'self-timer', src: createMachine({ initial: 'w', states: { w: { on: { PING: { actions: ({ self }) => self._parent?.send({ type: 'feedback.ping' }) } } } } }) },
    },
    escalated: { entry: [emit({ type: 'escalated' }), { type: 'record', params: { msg: 'escalated' } }] },
    classified: {
      type: 'parallel',
      states: {
        owner: { initial: 'none', states: { none: { on: { ASSIGN: 'set' } }, set: {} } },
        state: { initial: 'open', states: { open: { on: { CLOSE: 'closed' } }, closed: { type: 'final' } } },
      },
      on: { RESET: { target: ['.owner.none', '.state.open'] } },
    },
  },
});

export default base.provide({ actions: { record: assign({ log: ({ context }, params) => [...context.log, `*${params.msg}`] }) } });
