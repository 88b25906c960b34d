import { createMachine, assign, spawnChild } from 'xstate';
const child = createMachine({ id: 'child', context: { hits: 0 }, on: { HIT: { actions: assign({ hits: ({ context }) => context.hits + 1 }) } } });
export default createMachine({
  id: 'ss', context: { hits: null },
  entry: spawnChild(child, { id: 'c', systemId: 'counter' }),
  on: {
    HIT: { actions: ({ self }) => self.system.get('counter').send({ type: 'HIT' }) },
    READ: { actions: assign({ hits: ({ self }) => self.system.get('counter').getSnapshot().context.hits }) },
  },
});
