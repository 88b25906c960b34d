import { setup, and, not } from 'xstate';

// How XState words a guard that throws: it names a guard given by name,
// not one given as a function (inline, and(), not()), and it reads the
// thrown value's message (a thrown string has none).
export default setup({
  guards: {
    boom: () => { throw new Error('quota service down'); },
    stringy: () => { throw 'plain string'; },
    yes: () => true,
  },
}).createMachine({
  id: 'gate',
  initial: 'closed',
  states: {
    closed: {
      on: {
        AND: { target: 'open', guard: and(['yes', 'boom']) },
        NOT: { target: 'open', guard: not('boom') },
        INLINE: { target: 'open', guard: () => { throw new Error('inline failed'); } },
        STRING: { target: 'open', guard: 'stringy' },
        NAMED: { target: 'open', guard: { type: 'boom' } },
      },
    },
    open: {},
  },
});
