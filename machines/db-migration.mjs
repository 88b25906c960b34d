// A database migration that may only run inside a maintenance window: the
// window opens on request and closes by itself after windowMs (an `after`
// timer); a migration is started only while it is open, and one still
// running when it closes is paused until the next window. Once the
// migration is verified the window is retired (a final state of its own,
// reached when the other region is done), so the workflow is done.
import { setup, assign, not, stateIn } from 'xstate';

// A parallel state is done when every region is: the window retires as
// soon as the migration is done.
const retireOnceMigrated = { guard: stateIn({ migration: 'done' }), target: 'retired' };

export default setup({
  delays: { window: ({ context }) => context.windowMs },
  guards: {
    windowOpen: ({ context }) => context.windowOpen,
    allStepsDone: ({ context }) => context.stepsDone >= context.steps,
  },
  actions: {
    openWindow: assign({ windowOpen: true }),
    closeWindow: assign({ windowOpen: false }),
    nextStep: assign({ stepsDone: ({ context }) => context.stepsDone + 1 }),
    resetSteps: assign({ stepsDone: 0 }),
  },
}).createMachine({
  id: 'migration',
  type: 'parallel',
  context: { windowMs: 30 * 60 * 1000, windowOpen: false, steps: 3, stepsDone: 0 },
  states: {
    window: {
      initial: 'closed',
      states: {
        closed: {
          always: retireOnceMigrated,
          on: { OPEN_WINDOW: { target: 'open', description: 'Open the maintenance window (it closes by itself after 30 minutes).' } },
        },
        open: {
          entry: 'openWindow',
          exit: 'closeWindow',
          always: retireOnceMigrated,
          after: { window: 'closed' },
          on: { CLOSE_WINDOW: { target: 'closed', description: 'Close the maintenance window now.' } },
        },
        retired: { type: 'final' },
      },
    },
    migration: {
      initial: 'ready',
      states: {
        ready: {
          on: { START: { guard: 'windowOpen', target: 'running', description: 'Start the migration (only inside the maintenance window).' } },
        },
        running: {
          // Eventless: taken as soon as the last step is done, or as soon
          // as the window closes.
          always: [
            { guard: 'allStepsDone', target: 'verifying' },
            { guard: not('windowOpen'), target: 'paused' },
          ],
          on: {
            STEP_DONE: { actions: 'nextStep', description: 'Report that the next migration step finished.' },
          },
        },
        paused: {
          on: { RESUME: { guard: 'windowOpen', target: 'running', description: 'Resume the paused migration (only inside the window).' } },
        },
        verifying: {
          on: {
            VERIFIED: { target: 'done', description: 'Confirm that the migrated database checks out.' },
            VERIFY_FAILED: { target: 'ready', actions: 'resetSteps', description: 'Report a failed verification: the migration is rolled back.' },
          },
        },
        done: { type: 'final' },
      },
    },
  },
  output: ({ context }) => ({ stepsDone: context.stepsDone }),
});
