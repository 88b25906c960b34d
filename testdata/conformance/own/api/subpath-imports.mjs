// The API can be imported from XState's subpaths too: 'xstate/actions',
// 'xstate/actors' and 'xstate/guards'.
import { createMachine } from 'xstate';
import { assign, raise } from 'xstate/actions';
import { fromPromise } from 'xstate/actors';
import { and, not } from 'xstate/guards';
export default createMachine({
  id: 'subpaths', initial: 'a', context: { n: 0 },
  states: { a: {
    invoke: { src: fromPromise(async () => 5), onDone: { actions: assign({ n: ({ event }) => event.output }) } },
    on: { GO: { guard: and([({ context }) => context.n === 5, not(() => false)]), actions: raise({ type: 'DONE' }) }, DONE: 'b' } },
    b: {} },
});
