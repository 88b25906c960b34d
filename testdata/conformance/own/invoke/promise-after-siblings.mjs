import { setup, assign, fromPromise, fromCallback, fromTransition } from 'xstate';

// A promise's outcome is a microtask: it reaches the machine after
// everything its step does synchronously, including siblings invoked
// after it that answer at once.
export default setup({
  actors: {
    lookup: fromPromise(async ({ input }) => 'found ' + input),
    failing: fromPromise(async () => { throw new Error('no route'); }),
    greeter: fromCallback(({ sendBack }) => { sendBack({ type: 'HELLO' }); }),
    counter: fromTransition((s, e) => (e.type === 'INC' ? { c: s.c + 1 } : s), { c: 4 }),
  },
}).createMachine({
  id: 'desk',
  context: { log: [], snap: null },
  initial: 'idle',
  states: {
    idle: { on: { GO: 'busy', FAIL: 'failing' } },
    busy: {
      invoke: [
        { src: 'lookup', input: 'a', onDone: { actions: assign({ log: ({ context, event }) => [...context.log, event.output] }) } },
        { src: 'greeter' },
        { src: 'lookup', input: 'b', onDone: { actions: assign({ log: ({ context, event }) => [...context.log, event.output] }) } },
      ],
      on: { HELLO: { actions: assign({ log: ({ context }) => [...context.log, 'hello'] }) } },
    },
    failing: {
      // no onError: the rejection fails the machine, after the sibling's
      // first snapshot has been recorded
      invoke: [
        { src: 'failing' },
        { src: 'counter', onSnapshot: { actions: assign({ snap: ({ event }) => event.snapshot.context }) } },
      ],
    },
  },
});
