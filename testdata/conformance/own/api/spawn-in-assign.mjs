import { setup, createMachine, assign, sendTo, sendParent, fromPromise } from 'xstate';

// spawn in an assign's function, XState v5's way to start actors at run
// time: by name with an id and input (refs kept in the context, then used
// as sendTo targets), with a systemId found with system.get, and from
// logic given inline (a promise, whose outcome reaches the parent).
const counter = createMachine({
  id: 'counter',
  initial: 'on',
  context: ({ input }) => ({ n: input?.start ?? 0 }),
  states: {
    on: {
      on: {
        INC: {
          actions: [
            assign({ n: ({ context }) => context.n + 1 }),
            sendParent(({ context, self }) => ({ type: 'COUNTED', id: self.id, n: context.n + 1 })),
          ],
        },
      },
    },
  },
});

export default setup({ actors: { counter } }).createMachine({
  id: 'list',
  initial: 'on',
  context: { refs: [], counts: {}, loaded: null },
  states: {
    on: {
      on: {
        ADD: {
          actions: assign({
            refs: ({ context, spawn }) => [...context.refs, spawn('counter', { id: `c${context.refs.length}`, input: { start: 10 } })],
          }),
        },
        ADD_NAMED: {
          actions: assign({ named: ({ spawn }) => spawn('counter', { id: 'solo', systemId: 'solo-counter' }) }),
        },
        INC_FIRST: { actions: sendTo(({ context }) => context.refs[0], { type: 'INC' }) },
        INC_SOLO: { actions: sendTo(({ system }) => system.get('solo-counter'), { type: 'INC' }) },
        LOAD: {
          actions: assign({ loader: ({ spawn }) => spawn(fromPromise(async () => 42), { id: 'loader' }) }),
        },
        COUNTED: { actions: assign({ counts: ({ context, event }) => ({ ...context.counts, [event.id]: event.n }) }) },
        'xstate.done.actor.loader': { actions: assign({ loaded: ({ event }) => event.output }) },
      },
    },
  },
});
