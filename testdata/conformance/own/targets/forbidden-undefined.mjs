// XState v5's forbidden transition: an event mapped to undefined in a child
// state is taken there (targetless, no actions), so can() says no and the
// ancestors' handlers (and wildcards) never see it.
import { createMachine, assign } from 'xstate';

const note = (what) => assign({ log: ({ context, event }) => [...context.log, `${what}:${event.type}`] });

export default createMachine({
  id: 'editor',
  initial: 'doc',
  context: { log: [] },
  on: {
    BLOCKED: { target: '.escaped', actions: note('root') },
    NESTED: { target: '.escaped', actions: note('root') },
    LISTED: { target: '.escaped', actions: note('root') },
    EMPTY: { target: '.escaped', actions: note('root') },
    GUARDED: { target: '.escaped', actions: note('root') },
  },
  states: {
    doc: {
      initial: 'locked',
      on: {
        'audit.*': { actions: note('doc') },
      },
      states: {
        locked: {
          on: {
            BLOCKED: undefined,
            NESTED: { target: undefined },
            LISTED: [undefined, 'open'],
            EMPTY: [],
            GUARDED: [{ guard: ({ event }) => event.ok === true, target: 'open', actions: note('locked') }, undefined],
            'audit.*': undefined,
            'misc.empty': [],
            'misc.*': { actions: note('locked') },
            UNLOCK: 'open',
          },
        },
        open: {
          on: { LOCK: 'locked' },
        },
      },
    },
    escaped: {
      on: { BACK: 'doc' },
    },
  },
});
