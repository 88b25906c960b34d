import { setup, assign, fromPromise, fromCallback, fromObservable } from 'xstate';

const kinds = (args) => Object.fromEntries(['input', 'system', 'self', 'signal', 'emit', 'sendBack', 'receive']
  .filter((k) => k in args).map((k) => [k, typeof args[k]]));

export default setup({
  actors: {
    load: fromPromise(async (args) => {
      const { signal } = args;
      signal.addEventListener('abort', () => {});
      return { kinds: kinds(args), aborted: signal.aborted };
    }),
    listen: fromCallback((args) => { args.sendBack({ type: 'KINDS', kinds: kinds(args) }); }),
    watch: fromObservable((args) => ({
      subscribe(o) { o.next(kinds(args)); o.complete(); return { unsubscribe() {} }; },
    })),
  },
}).createMachine({
  id: 'args',
  initial: 'idle',
  context: { promise: null, callback: null, observable: null },
  states: {
    idle: { on: { GO: 'promise' } },
    promise: { invoke: { src: 'load', input: 1, onDone: { target: 'callback', actions: assign({ promise: ({ event }) => event.output }) } } },
    callback: { invoke: { src: 'listen', input: 2 }, on: { KINDS: { target: 'observable', actions: assign({ callback: ({ event }) => event.kinds }) } } },
    observable: { invoke: { src: 'watch', input: 3, onSnapshot: { actions: assign({ observable: ({ event }) => event.snapshot.context ?? null }) }, onDone: 'done' } },
    done: {},
  },
});
