import { setup, createMachine, assign, emit, fromPromise } from 'xstate';

// undefined in what machines make: a context key set to undefined leaves
// the JSON of the context (the usual way to clear an error), an array
// keeps it as null, and an actor that finishes with nothing gives an
// event.output that is undefined, not null.
const quiet = createMachine({ id: 'quiet', initial: 'done', states: { done: { type: 'final' } } });

export default setup({
  actors: {
    save: fromPromise(async () => { /* resolves with nothing */ }),
    quiet,
  },
}).createMachine({
  id: 'form',
  context: { error: 'bad email', draft: 'x', tries: 1, meta: { a: 1, b: 2 }, saved: 'not yet', quiet: 'not yet' },
  initial: 'editing',
  states: {
    editing: {
      on: {
        CLEAR_STATIC: { actions: assign({ error: undefined }) },
        CLEAR_FN: { actions: assign({ draft: () => undefined }) },
        CLEAR_SPREAD: { actions: assign(({ context }) => ({ ...context, tries: undefined, meta: { ...context.meta, b: undefined } })) },
        EMIT: { actions: emit(({ context }) => ({ type: 'snapshot', list: [undefined, context.meta.a, undefined], extra: undefined })) },
        SAVE: 'saving',
      },
    },
    saving: {
      type: 'parallel',
      states: {
        promise: {
          invoke: {
            src: 'save',
            onDone: { actions: assign({ saved: ({ event }) => (event.output === undefined ? 'undefined' : String(event.output)) }) },
          },
        },
        child: {
          invoke: {
            src: 'quiet',
            onDone: { actions: assign({ quiet: ({ event }) => typeof event.output }) },
          },
        },
      },
    },
  },
});
