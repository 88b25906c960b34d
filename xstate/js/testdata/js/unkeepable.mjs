import { assign, createMachine } from 'xstate';

// Assigns of values a context cannot hold: each must fail its step, not
// the process.
const cyclic = () => { const o = { n: 1 }; o.self = o; return o; };

export default createMachine({
  id: 'unkeepable',
  initial: 'idle',
  context: { v: null },
  states: {
    idle: {
      on: {
        CYCLE: { target: 'done', actions: assign({ v: cyclic }) },
        NESTED: { target: 'done', actions: assign({ v: () => ({ list: [1, { inner: cyclic() }] }) }) },
        DEEP: { target: 'done', actions: assign({ v: () => { let o = {}; for (let i = 0; i < 5000; i++) o = { a: o }; return o; } }) },
        SPARSE: { target: 'done', actions: assign({ v: () => { const a = []; a.length = 2 ** 32 - 1; return { a }; } }) },
        WIDE: { target: 'done', actions: assign(() => { const o = {}; for (let i = 0; i < 20000; i++) o['k' + i] = i; return { v: o }; }) },
        FINE: { target: 'done', actions: assign({ v: () => ({ list: [1, 2, { d: new Date(0) }] }) }) },
      },
    },
    done: {},
  },
});
