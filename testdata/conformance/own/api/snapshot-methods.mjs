import { createMachine, assign } from 'xstate';

// What self.getSnapshot() offers beside value and context: status, output,
// tags (a Set, in the order of the active nodes), getMeta(), can(), and
// self's id and JSON form.
export default createMachine({
  id: 'snap',
  type: 'parallel',
  context: { out: null },
  states: {
    left: {
      meta: { side: 'left' },
      tags: ['busy', 'left'],
      initial: 'one',
      states: { one: { tags: ['busy', 'first'], meta: { n: 1 }, on: { NEXT: 'two' } }, two: { tags: ['second'] } },
    },
    right: { tags: ['right', 'busy'], meta: { side: 'right' } },
  },
  on: {
    LOOK: {
      actions: assign({
        out: ({ self, system }) => {
          const s = self.getSnapshot();
          return {
            id: self.id, json: JSON.stringify(self), status: s.status, value: s.value, output: s.output ?? 'none',
            tags: [...s.tags], hasBusy: s.hasTag('busy'), meta: s.getMeta(),
            canNext: s.can({ type: 'NEXT' }), canNope: s.can({ type: 'NOPE' }),
            matches: s.matches({ left: 'one' }), sysGet: typeof system.get,
          };
        },
      }),
    },
  },
});
