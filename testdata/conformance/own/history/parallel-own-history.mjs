import { setup, assign } from 'xstate';

const rec = (msg) => assign({ log: ({ context }) => [...context.log, msg] });

// A region of the parallel state p takes p's own deep history as its
// target. XState's transition domain is then p itself (its least common
// ancestor of the source and the targets may be a parallel state): p's
// regions are left and entered again, and p drops out of the snapshot's
// nodes while its regions stay. The state value completes the nodes as
// XState's getAllStateNodes does: the root, which holds no child of its own
// any more, gets its initial child a (at a.idle) and p comes back as the
// regions' ancestor, so the value has two keys under the compound root.
// XState's transitionNode goes by the value and takes a node whose value
// has several keys for a parallel one: B is taken by r2's wildcard (as
// the transition of a region), not by the root's own B.
export default setup({}).createMachine({
  id: 'm',
  initial: 'a',
  context: { log: [] },
  on: {
    B: { target: '.a.done', actions: rec('root B') },
  },
  states: {
    a: {
      initial: 'idle',
      states: { idle: {}, done: {} },
      on: { GO: 'p' },
    },
    p: {
      type: 'parallel',
      entry: rec('en:p'),
      exit: rec('ex:p'),
      states: {
        r1: {
          entry: rec('en:r1'),
          exit: rec('ex:r1'),
          on: { JUMP: 'hist' },
        },
        r2: {
          initial: 'x',
          entry: rec('en:r2'),
          exit: rec('ex:r2'),
          states: { x: { entry: rec('en:x'), exit: rec('ex:x') } },
          on: { '*': { target: '.x', actions: rec('r2 caught') } },
        },
        hist: { type: 'history', history: 'deep' },
      },
    },
  },
});
