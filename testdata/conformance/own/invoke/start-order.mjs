import { setup, createMachine, assign, sendParent, fromCallback, fromPromise, emit } from 'xstate';

// What happens, in order, as an actor starts: its invoked children start
// first (XState's machine logic starts the initial snapshot's children),
// then its deferred entry actions run; events the children send back wait
// until the parent has started.
const ticker = createMachine({
  id: 'ticker',
  initial: 'waiting',
  states: {
    waiting: { after: { 1000: 'ticked' } },
    ticked: { entry: sendParent({ type: 'TICK', from: 'child' }) },
  },
});

export default setup({
  actors: {
    ticker,
    greeter: fromCallback(({ sendBack }) => { sendBack({ type: 'HELLO' }); }),
    echo: fromPromise(async ({ input }) => input),
  },
}).createMachine({
  id: 'starter',
  context: { log: [] },
  initial: 'running',
  on: {
    TICK: { actions: assign({ log: ({ context, event }) => [...context.log, 'tick from ' + event.from] }) },
    HELLO: { actions: [assign({ log: ({ context }) => [...context.log, 'hello'] }), emit({ type: 'greeted' })] },
  },
  states: {
    running: {
      entry: [emit({ type: 'entered' }), assign({ log: ({ context }) => [...context.log, 'entry'] })],
      invoke: [
        { id: 'ticker', src: 'ticker' },
        { id: 'greeter', src: 'greeter' },
      ],
      after: { 1000: { actions: assign({ log: ({ context }) => [...context.log, 'tick from parent'] }) } },
      initial: 'outer',
      states: {
        outer: {
          invoke: { id: 'same', src: 'echo', input: 'inner',
            onDone: { actions: assign({ log: ({ context, event }) => [...context.log, 'done ' + event.output] }) } },
        },
      },
    },
  },
  // an invoke of the root with the same id as the inner one: the inner
  // one, spawned last, is the child 'same' the snapshot holds
  invoke: { id: 'same', src: 'echo', input: 'outer' },
});
