import { assign, createMachine } from 'xstate';

// What KEEP keeps, a little more at every call: but every event sees the
// module as it was after load, so kept is empty again at the next.
let kept = [];

// Guards and actions that take memory without end, and ones that are
// slow: the watchdog must stop them.
export default createMachine({
  id: 'hog',
  initial: 'idle',
  context: { n: 0, kept: 0 },
  states: {
    idle: {
      on: {
        STRINGS: { guard: function doubling() { let s = 'x'; for (;;) s = s + s; }, target: 'done' },
        OBJECTS: { actions: function hoard() { const a = []; for (;;) a.push({ n: a.length, s: 'item ' + a.length }); } },
        ASSIGN: { actions: assign({ n: () => { const a = []; for (;;) a.push([a.length]); } }) },
        KEEP: { actions: assign({ kept: () => { kept = kept.concat(['x'.repeat(4 << 20) + kept.length]); return kept.length; } }) },
        // Garbage: eight times the tests' budget of 48 MiB, 2 MiB at a time,
        // never more than one kept.
        CHURN: {
          guard: () => {
            let n = 0;
            for (let i = 0; i < 192; i++) n += ('y'.repeat(1 << 20) + i).length;
            return n > 0;
          },
          target: 'done',
        },
        SMALL: { guard: () => 'x'.repeat(1000).length === 1000, target: 'done' },
        // Takes nothing, for a few of the watchdog's ticks.
        WAIT: { guard: () => { const end = Date.now() + 30; while (Date.now() < end) {} return true; }, target: 'done' },
        SLOW: 'slow',
        FOREVER: { guard: function forever() { for (;;) {} }, target: 'done' },
      },
    },
    // An eventless loop whose guard takes a few milliseconds each time.
    slow: { always: { guard: 'busy', target: 'slow2' } },
    slow2: { always: { guard: 'busy', target: 'slow' } },
    done: {},
  },
}, {
  guards: {
    busy: () => { const end = Date.now() + 3; while (Date.now() < end) {} return true; },
  },
});
