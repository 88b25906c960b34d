// A card payment: authorize (only amounts within the limit), then capture
// or void; captured payments can be refunded, up to what was captured.
import { setup, assign } from 'xstate';

type Ctx = { limit: number; authorized: number; captured: number; refunded: number };
type Ev =
  | { type: 'AUTHORIZE'; amount: number }
  | { type: 'CAPTURE' }
  | { type: 'VOID' }
  | { type: 'REFUND'; amount: number };

export default setup({
  types: { context: {} as Ctx, events: {} as Ev },
  guards: {
    // Reads the event's payload: the tool stays listed and the call decides.
    amountWithinLimit: ({ context, event }) =>
      event.type === 'AUTHORIZE' && event.amount > 0 && event.amount <= context.limit,
    refundable: ({ context, event }) =>
      event.type === 'REFUND' && event.amount > 0 && context.refunded + event.amount <= context.captured,
    fullyRefunded: ({ context }) => context.refunded >= context.captured,
  },
  actions: {
    authorize: assign({ authorized: ({ event }) => (event.type === 'AUTHORIZE' ? event.amount : 0) }),
    capture: assign({ captured: ({ context }) => context.authorized }),
    refund: assign({ refunded: ({ context, event }) => context.refunded + (event.type === 'REFUND' ? event.amount : 0) }),
  },
}).createMachine({
  id: 'payment',
  initial: 'pending',
  context: { limit: 1000, authorized: 0, captured: 0, refunded: 0 },
  states: {
    pending: {
      on: {
        AUTHORIZE: {
          guard: 'amountWithinLimit',
          target: 'authorized',
          actions: 'authorize',
          description: 'Authorize an amount on the card (up to the limit of 1000).',
          meta: {
            tool: {
              inputSchema: {
                type: 'object',
                properties: { amount: { type: 'number', exclusiveMinimum: 0 } },
                required: ['amount'],
              },
            },
          },
        },
      },
    },
    authorized: {
      on: {
        CAPTURE: { target: 'captured', actions: 'capture', description: 'Capture the authorized amount.' },
        VOID: {
          target: 'voided',
          description: 'Release the authorization without charging.',
          meta: { tool: { title: 'Void the authorization', annotations: { destructiveHint: true } } },
        },
      },
    },
    captured: {
      always: { guard: 'fullyRefunded', target: 'refunded' },
      on: {
        REFUND: {
          guard: 'refundable',
          actions: 'refund',
          description: 'Refund part or all of the captured amount.',
          meta: {
            tool: {
              title: 'Refund',
              // Money goes back to the card: clients may ask before calling.
              annotations: { destructiveHint: true },
              inputSchema: {
                type: 'object',
                properties: { amount: { type: 'number', exclusiveMinimum: 0 } },
                required: ['amount'],
              },
            },
          },
        },
      },
    },
    voided: { type: 'final' },
    refunded: { type: 'final' },
  },
  output: ({ context }) => ({ captured: context.captured, refunded: context.refunded }),
});
