import { setup, assign, raise, stateIn } from 'xstate';
const push = (tag) => assign({ log: ({ context }) => [...context.log, tag] });
export default setup({}).createMachine({
  id: 'm',
  context: { log: [], n: 0 },
  initial: 'a',
  on: { '*': { actions: push('any') }, RESETN: { actions: assign({ n: 0 }) } },
  states: {
    a: {
      entry: [push('enter a'), raise({ type: 'BUMP' })],
      exit: push('exit a'),
      on: {
        BUMP: { actions: [assign({ n: ({ context }) => context.n + 1 }), push('bump')] },
        GO: { target: ['#m.p.left.l2', '#m.p.right.r2'], actions: push('go') },
      },
      always: { guard: ({ context }) => context.n >= 3, target: 'p' },
    },
    p: {
      type: 'parallel',
      entry: push('enter p'),
      exit: push('exit p'),
      onDone: { target: 'z', actions: push('p done') },
      states: {
        left: { initial: 'l1', states: { l1: { on: { L: 'l2' } }, l2: { on: { L: 'lf' } }, lf: { type: 'final' } } },
        right: {
          initial: 'r1',
          states: {
            r1: { after: { 100: { target: 'r1', reenter: true, actions: push('tick') } }, on: { R: 'r2' } },
            r2: { on: { R: { target: 'rf', guard: stateIn('#m.p.left.lf') } } },
            rf: { type: 'final' },
          },
        },
      },
    },
    z: { entry: push('enter z') },
  },
});
