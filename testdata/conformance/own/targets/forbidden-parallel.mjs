// A forbidden transition in one region of a parallel state forbids the
// event for that region only.
import { createMachine, assign } from 'xstate';

const note = (what) => assign({ log: ({ context, event }) => [...context.log, `${what}:${event.type}`] });

export default createMachine({
  id: 'job',
  initial: 'running',
  context: { log: [] },
  states: {
    running: {
      type: 'parallel',
      on: {
        PAUSE: { target: 'paused', actions: note('running') },
        STOP: { target: 'stopped', actions: note('running') },
      },
      states: {
        upload: {
          initial: 'sending',
          states: {
            sending: {
              on: {
                PAUSE: undefined,
                STOP: undefined,
                SENT: 'sent',
              },
            },
            sent: {},
          },
        },
        watchdog: {
          initial: 'watching',
          states: {
            watching: {
              on: {
                PAUSE: { target: 'asleep', actions: note('watchdog') },
              },
            },
            asleep: {
              on: { WAKE: 'watching' },
            },
          },
        },
      },
    },
    paused: {
      on: { RESUME: 'running' },
    },
    stopped: { type: 'final' },
  },
});
