import {
  setup, assign, sendTo, assertEvent, matchesState, pathToStateValue, SpecialTargets,
  createActor, waitFor, toPromise, getNextSnapshot,
} from 'xstate';

// XState v5's helpers that machine code uses: assertEvent (one type, a
// list, a wildcard, and one that fails), matchesState and pathToStateValue
// on state values, and SpecialTargets.Parent for a child's sendTo. The
// module also imports what runs actors (a file that holds code to run its
// machine) without calling it: it must still load.
export const run = () => waitFor(createActor(machine), () => true).then(toPromise).then(getNextSnapshot);

type Ev =
  | { type: 'ADD'; n: number }
  | { type: 'item.added'; n: number }
  | { type: 'CHECK'; value: string }
  | { type: 'WRONG' }
  | { type: 'CHILD_SAID'; word: string };

const child = setup({}).createMachine({
  id: 'child',
  initial: 'idle',
  entry: sendTo(SpecialTargets.Parent, { type: 'CHILD_SAID', word: 'hello' }),
  states: { idle: {} },
});

const machine = setup({
  types: { context: {} as { total: number; checks: boolean[]; heard: string; path: unknown }, events: {} as Ev },
  actors: { child },
  actions: {
    add: assign(({ context, event }) => {
      assertEvent(event, ['ADD', 'item.*']);
      return { total: context.total + event.n };
    }),
  },
}).createMachine({
  id: 'helpers',
  initial: 'on',
  context: { total: 0, checks: [], heard: '', path: null },
  invoke: { id: 'kid', src: 'child' },
  states: {
    on: {
      on: {
        ADD: { actions: 'add' },
        'item.added': { actions: 'add' },
        CHECK: {
          actions: assign(({ context, event }) => {
            assertEvent(event, 'CHECK');
            return {
              checks: [
                ...context.checks,
                matchesState(event.value, { a: { b: 'c' } }),
                matchesState('a', 'a'),
                matchesState({ a: 'b' }, 'a.b'),
              ],
              path: pathToStateValue(['x', 'y', 'z']),
            };
          }),
        },
        CHILD_SAID: { actions: assign({ heard: ({ event }) => (assertEvent(event, 'CHILD_SAID'), event.word) }) },
        WRONG: { actions: 'add' },
      },
    },
  },
});

export default machine;
