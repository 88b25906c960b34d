import { setup, assign } from 'xstate';

// Amounts formatted for people in actions and guards, the way machines
// write summaries: toLocaleString with and without en-US and options, and
// Intl.NumberFormat (its format passed around as a function).
const usd = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD' });

export default setup({
  guards: {
    bigOrder: ({ context }) => Number(context.total.toLocaleString('en-US', { useGrouping: false })) >= 1000,
  },
  actions: {
    summarize: assign({
      summary: ({ context }) => `${context.lines.length} lines, total ${usd.format(context.total)}`,
      lines: ({ context }) => context.lines.map((l) => ({ ...l, shown: l.amount.toLocaleString() })),
    }),
  },
}).createMachine({
  id: 'order',
  initial: 'open',
  context: { lines: [], total: 0, summary: '', shares: [], big: false },
  states: {
    open: {
      on: {
        ADD: {
          actions: [
            assign({
              lines: ({ context, event }) => [...context.lines, { amount: event.amount }],
              total: ({ context, event }) => context.total + event.amount,
            }),
            'summarize',
          ],
        },
        SPLIT: {
          actions: assign({
            shares: ({ context, event }) => {
              const nf = new Intl.NumberFormat('en-US', { style: 'percent', maximumFractionDigits: 1 });
              return context.lines.map((l) => l.amount / context.total).map(nf.format).concat(
                (context.total / event.ways).toLocaleString('en-US', { style: 'currency', currency: event.currency }),
                (context.total * 1000).toLocaleString('en', { maximumSignificantDigits: 3 }),
                (-context.total).toLocaleString(undefined, { style: 'currency', currency: 'EUR', currencySign: 'accounting' }),
                usd.resolvedOptions().maximumFractionDigits,
              );
            },
          }),
        },
        CHECK: { guard: 'bigOrder', actions: assign({ big: true }) },
      },
    },
  },
});
