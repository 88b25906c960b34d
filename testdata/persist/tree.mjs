import { setup, createMachine, assign, sendTo, sendParent, forwardTo } from 'xstate';

const leaf = createMachine({
  id: 'leaf',
  context: ({ input }) => ({ name: input.name, hits: 0 }),
  initial: 'on',
  states: {
    on: { on: { HIT: [
      { guard: ({ context }) => context.hits >= 2, target: 'off', actions: assign({ hits: ({ context }) => context.hits + 1 }) },
      { actions: [assign({ hits: ({ context }) => context.hits + 1 }), sendParent(({ context }) => ({ type: 'LEAF_HIT', name: context.name, hits: context.hits }))] },
    ] } },
    off: { type: 'final' },
  },
  output: ({ context }) => ({ name: context.name, hits: context.hits }),
});

const branch = setup({ actors: { leaf } }).createMachine({
  id: 'branch',
  context: { log: [] },
  initial: 'growing',
  states: {
    growing: {
      invoke: [
        { id: 'left', src: 'leaf', input: { name: 'L' }, onDone: { actions: assign({ log: ({ context, event }) => [...context.log, `done ${event.output.name}`] }) } },
        { id: 'right', src: 'leaf', input: { name: 'R' } },
      ],
      on: {
        HIT_LEFT: { actions: sendTo('left', { type: 'HIT' }) },
        HIT_RIGHT: { actions: sendTo('right', { type: 'HIT' }) },
        LEAF_HIT: { actions: [assign({ log: ({ context, event }) => [...context.log, `${event.name}${event.hits}`] }), sendParent(({ event }) => ({ type: 'REPORT', from: event.name }))] },
      },
    },
  },
});

export default setup({ actors: { branch } }).createMachine({
  id: 'tree',
  context: { reports: [] },
  invoke: { id: 'b', src: 'branch' },
  on: {
    HIT_LEFT: { actions: forwardTo('b') },
    HIT_RIGHT: { actions: forwardTo('b') },
    REPORT: { actions: assign({ reports: ({ context, event }) => [...context.reports, event.from] }) },
  },
});
