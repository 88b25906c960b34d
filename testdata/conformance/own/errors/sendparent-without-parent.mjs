import { createMachine, assign, sendParent } from 'xstate';

// A machine written to run as a child, run on its own: its sendParent has
// nowhere to go.
export default createMachine({
  id: 'worker',
  context: { reported: 0 },
  initial: 'working',
  states: {
    working: {
      on: {
        FINISH: { actions: [assign({ reported: 1 }), sendParent({ type: 'WORK_DONE' })] },
      },
    },
  },
});
