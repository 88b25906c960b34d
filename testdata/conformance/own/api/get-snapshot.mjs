import { setup, createMachine, assign } from 'xstate';

// self.getSnapshot() in actions: the actor's snapshot as it was before the
// event (XState updates it once the step is over), with its value,
// context, status, children, matches() and hasTag().
const helper = createMachine({ id: 'helper', initial: 'idle', states: { idle: {} } });

export default setup({ actors: { helper } }).createMachine({
  id: 'snap',
  initial: 'a',
  context: { n: 1, log: [] },
  invoke: { id: 'h', src: 'helper' },
  states: {
    a: {
      tags: ['first'],
      on: {
        LOOK: {
          actions: [
            assign({ n: ({ context }) => context.n + 1 }),
            assign({
              log: ({ context, self }) => {
                const s = self.getSnapshot();
                return [...context.log, {
                  value: s.value,
                  n: s.context.n,
                  status: s.status,
                  matchesA: s.matches('a'),
                  matchesB: s.matches({ b: 'inner' }),
                  tagged: s.hasTag('first'),
                  children: Object.keys(s.children),
                }];
              },
            }),
          ],
        },
        GO: 'b',
      },
    },
    b: {
      initial: 'inner',
      entry: assign({ log: ({ context, self }) => [...context.log, { entryValue: self.getSnapshot().value }] }),
      states: { inner: {} },
      on: { LOOK_B: { actions: assign({ log: ({ context, self }) => [...context.log, { matchesB: self.getSnapshot().matches('b.inner'), tagged: self.getSnapshot().hasTag('first') }] }) } },
    },
  },
});
