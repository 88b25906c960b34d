// An expense claim, gated by who calls as much as by its state: anyone
// may submit one; only an approver may approve or reject it, and never the
// one who submitted it (four eyes: the guard compares event.principal,
// set by the server, with the submitter); paying it asks the payer's human
// first ("Pay 120 to ACME?"), and is taken only on a yes.
import { setup, assign } from 'xstate';

type Principal = { sub: string; roles: string[] };
type Ctx = { amount: number; payee: string; submittedBy: string | null; approvedBy: string | null; note: string };
type Ev =
  | { type: 'SUBMIT'; amount: number; payee: string; principal: Principal }
  | { type: 'APPROVE'; principal: Principal }
  | { type: 'REJECT'; reason: string; principal: Principal }
  | { type: 'PAY'; principal: Principal };

export default setup({
  types: { context: {} as Ctx, events: {} as Ev },
  guards: {
    // Reads the event: the tool stays listed to approvers, and the call
    // decides (REJECTED for the submitter).
    notTheSubmitter: ({ context, event }) => event.principal.sub !== context.submittedBy,
  },
  actions: {
    record: assign({
      amount: ({ event }) => (event.type === 'SUBMIT' ? event.amount : 0),
      payee: ({ event }) => (event.type === 'SUBMIT' ? event.payee : ''),
      submittedBy: ({ event }) => event.principal.sub,
    }),
    approve: assign({ approvedBy: ({ event }) => event.principal.sub }),
    reject: assign({ note: ({ event }) => (event.type === 'REJECT' ? event.reason : '') }),
  },
}).createMachine({
  id: 'expense',
  meta: { handleKey: 'expense_id' },
  initial: 'draft',
  context: { amount: 0, payee: '', submittedBy: null, approvedBy: null, note: '' },
  states: {
    draft: {
      on: {
        SUBMIT: {
          target: 'review',
          actions: 'record',
          description: 'Submit the expense claim for review.',
          meta: {
            tool: {
              inputSchema: {
                type: 'object',
                properties: {
                  amount: { type: 'number', exclusiveMinimum: 0 },
                  payee: { type: 'string', minLength: 1 },
                },
                required: ['amount', 'payee'],
              },
            },
          },
        },
      },
    },
    review: {
      on: {
        APPROVE: {
          guard: 'notTheSubmitter',
          target: 'approved',
          actions: 'approve',
          description: 'Approve the claim (an approver who did not submit it).',
          meta: { tool: { roles: ['approver'] } },
        },
        REJECT: {
          target: 'rejected',
          actions: 'reject',
          description: 'Reject the claim, saying why.',
          meta: {
            tool: {
              roles: ['approver'],
              inputSchema: { type: 'object', properties: { reason: { type: 'string', minLength: 1 } }, required: ['reason'] },
            },
          },
        },
      },
    },
    approved: {
      on: {
        PAY: {
          target: 'paid',
          description: 'Pay the approved claim (the payer\'s human confirms first).',
          meta: { tool: { roles: ['payer'], confirm: 'Pay {amount} to {payee}?', annotations: { destructiveHint: true } } },
        },
      },
    },
    paid: { type: 'final' },
    rejected: { type: 'final' },
  },
});
