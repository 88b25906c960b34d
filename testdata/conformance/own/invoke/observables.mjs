import { setup, assign, fromObservable, fromEventObservable } from 'xstate';

// Subscribables written by hand (no library can be imported).
const counter = fromObservable(({ input }) => ({
  subscribe(observer) {
    for (let i = 1; i <= input.n; i++) observer.next({ count: i * input.step });
    if (input.fail) observer.error(new Error(`counter failed after ${input.n}`));
    else observer.complete();
    return { unsubscribe() {} };
  },
}));

const pings = fromEventObservable(({ input }) => ({
  subscribe(observer) {
    for (const n of input.ns) observer.next({ type: 'PING', n });
    return { unsubscribe() {} };
  },
}));

export default setup({ actors: { counter, pings } }).createMachine({
  id: 'observables',
  initial: 'idle',
  context: { seen: [], pings: 0, outcome: null },
  states: {
    idle: { on: { COUNT: 'counting', FAIL: 'failing', LISTEN: 'listening' } },
    counting: {
      invoke: {
        src: 'counter', input: { n: 3, step: 5 },
        onSnapshot: { actions: assign({ seen: ({ context, event }) => [...context.seen, event.snapshot.context ?? 'none'] }) },
        onDone: { target: 'idle', actions: assign({ outcome: ({ event }) => ({ done: true, output: event.output ?? 'none' }) }) },
      },
    },
    failing: {
      invoke: {
        src: 'counter', input: { n: 1, step: 1, fail: true },
        onError: { target: 'idle', actions: assign({ outcome: ({ event }) => ({ error: event.error.message }) }) },
      },
    },
    listening: {
      invoke: { src: 'pings', input: { ns: [1, 2, 3] } },
      on: { PING: { actions: assign({ pings: ({ context, event }) => context.pings + event.n }) }, STOP: 'idle' },
    },
  },
});
