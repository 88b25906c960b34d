// Implementations of invoice.json: a JSON machine takes its guards and
// actions from NAME.impl.ts beside it, as machine.provide() would.
import { assign } from 'xstate';

type Line = { description: string; amount: number };
type Ctx = { lines: Line[]; total: number; paid: number; approvalLimit: number; revisions: number; lastReason: string | null };
type Ev = { type: string; description?: string; amount?: number; reason?: string };

const sum = (lines: Line[]) => lines.reduce((t, l) => t + l.amount, 0);

export default {
  guards: {
    hasLines: ({ context }: { context: Ctx }) => context.lines.length > 0,
    withinLimit: ({ context }: { context: Ctx }) => context.total <= context.approvalLimit,
    withinBalance: ({ context, event }: { context: Ctx; event: Ev }) =>
      typeof event.amount === 'number' && event.amount > 0 && event.amount <= context.total - context.paid,
    fullyPaid: ({ context }: { context: Ctx }) => context.paid >= context.total,
  },
  actions: {
    addLine: assign(({ context, event }: { context: Ctx; event: Ev }) => {
      const lines = [...context.lines, { description: event.description!, amount: event.amount! }];
      return { lines, total: sum(lines) };
    }),
    removeLastLine: assign(({ context }: { context: Ctx }) => {
      const lines = context.lines.slice(0, -1);
      return { lines, total: sum(lines) };
    }),
    recordReason: assign(({ context, event }: { context: Ctx; event: Ev }) => ({
      revisions: context.revisions + 1,
      lastReason: event.reason!,
    })),
    recordPayment: assign({ paid: ({ context, event }: { context: Ctx; event: Ev }) => context.paid + event.amount! }),
  },
};
