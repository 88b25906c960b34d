import { assign, createMachine } from 'xstate';

// Regular expressions that backtrack for minutes on event.s (30 a's and a
// b): each needs goja's backtracking engine (a lookahead, a backreference).
const catastrophic = /^(?=a)(a+)+$/;

export default createMachine({
  id: 'patterns',
  initial: 'idle',
  context: { out: null },
  states: {
    idle: {
      on: {
        TEST: { guard: function backtracks({ event }) { return catastrophic.test(event.s); }, target: 'matched' },
        EXEC: { guard: ({ event }) => /^(a+)+\1$/.exec(event.s) !== null, target: 'matched' },
        MATCH: { guard: ({ event }) => event.s.match(/^(?=a)(a+)+$/g) !== null, target: 'matched' },
        REPLACE: { actions: assign({ out: ({ event }) => event.s.replace(/^(?=a)(a+)+$/, 'x') }) },
        SPLIT: { actions: assign({ out: ({ event }) => event.s.split(/^(?=a)(a+)+$/).length }) },
        SEARCH: { actions: assign({ out: ({ event }) => event.s.search(/^(?=a)(a+)+$/) }) },
        MATCH_ALL: { actions: assign({ out: ({ event }) => [...event.s.matchAll(/(?=a)(a+)+$/g)].length }) },
        // The interrupt cannot be caught.
        CAUGHT: {
          guard: ({ event }) => { try { return catastrophic.test(event.s); } catch (e) { return true; } },
          target: 'matched',
        },
        // A pattern Go's regexp package matches, in linear time, however it
        // is written.
        LINEAR: { guard: ({ event }) => /^(a+)+$/.test(event.s), target: 'matched' },
      },
    },
    matched: {},
  },
});
