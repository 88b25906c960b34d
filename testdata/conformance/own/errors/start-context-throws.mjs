import { createMachine } from 'xstate';

// A context function that reads its input when no input is given: the
// actor fails as it starts, and its snapshot is the one from before the
// initial transition (empty context, the root's tags) with the initial
// state's value; events are ignored, can() still answers.
export default createMachine({
  id: 'quota',
  context: ({ input }) => ({ limit: input.limit, used: 0 }),
  initial: 'open',
  tags: ['quota'],
  states: {
    open: { tags: ['accepting'], on: { USE: 'closed' } },
    closed: {},
  },
});
