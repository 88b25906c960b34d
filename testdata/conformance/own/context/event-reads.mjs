import { createMachine, assign, raise } from 'xstate';

// Code reads the event as users write it: its type and payload, `in`,
// Object.keys, spread, JSON.stringify, a missing field; an event kept in
// the context whole, and one re-raised with a field added.
export default createMachine({
  id: 'events',
  initial: 'idle',
  context: { log: [] },
  states: {
    idle: {
      on: {
        PAY: {
          guard: ({ event }) => 'amount' in event && !('zz' in event) && event.type === 'PAY',
          actions: [
            assign({
              keys: ({ event }) => Object.keys(event).join(','),
              spread: ({ event }) => ({ ...event, seen: true }),
              json: ({ event }) => JSON.stringify(event),
              missing: ({ event }) => event.zz === undefined,
              whole: ({ event }) => event,
            }),
            raise(({ event }) => ({ ...event, type: 'PAID', twice: event.amount * 2 })),
          ],
        },
        PAID: {
          actions: assign({ log: ({ context, event }) => [...context.log, `${event.type}:${event.twice}:${Object.keys(event).join('+')}`] }),
        },
      },
    },
  },
});
