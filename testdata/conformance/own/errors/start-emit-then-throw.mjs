import { setup, emit, sendTo, fromCallback, assign } from 'xstate';

// As an actor starts, XState runs its custom entry actions first and the
// built-in actions' effects (emitted events, sends) after them: a custom
// action that throws fails the start before any of those happen.
export default setup({
  actors: { sink: fromCallback(({ receive }) => { receive(() => {}); }) },
  actions: {
    loadConfig: ({ context }) => {
      if (!context.config) throw new Error('no config');
    },
  },
}).createMachine({
  id: 'service',
  context: ({ input }) => ({ config: input?.config ?? null, n: 0 }),
  invoke: { id: 'sink', src: 'sink' },
  entry: [
    emit({ type: 'starting' }),
    sendTo('sink', { type: 'HELLO' }),
    assign({ n: 1 }),
    'loadConfig',
    emit({ type: 'started' }),
  ],
  on: { PING: { actions: emit({ type: 'pong' }) } },
});
