import { setup, assign, fromPromise, fromCallback, sendTo, raise, emit, and, not, or, stateIn, enqueueActions, spawnChild, stopChild, log } from 'xstate';

type Item = { sku: string; qty: number; price: number };
interface Ctx { items: Item[]; coupon: string | null; attempts: number; total: number; history: string[]; paymentId?: string }
type Ev =
  | { type: 'ADD'; item: Item }
  | { type: 'REMOVE'; sku: string }
  | { type: 'COUPON'; code: string }
  | { type: 'CHECKOUT' }
  | { type: 'PAY'; card: string }
  | { type: 'RETRY' }
  | { type: 'TICK' }
  | { type: 'CANCEL' };

enum Limits { MaxAttempts = 3, MaxItems = 5 }

const sum = (items: Item[]) => items.reduce((t, i) => t + i.qty * i.price, 0);

export const machine = setup({
  types: {} as { context: Ctx; events: Ev; input: { coupon?: string } },
  guards: {
    hasItems: ({ context }) => context.items.length > 0,
    belowLimit: ({ context }) => context.items.length < Limits.MaxItems,
    validCoupon: (_, params: { code: string }) => /^SAVE\d+$/.test(params.code),
    canRetry: ({ context }) => context.attempts < Limits.MaxAttempts,
    bigOrder: ({ context }, params: { over: number }) => context.total > params.over,
  },
  actions: {
    recompute: assign({ total: ({ context }) => {
      const base = sum(context.items);
      const pct = context.coupon ? Number(context.coupon.slice(4)) : 0;
      return Math.round(base * (100 - pct)) / 100;
    } }),
    note: assign({ history: ({ context }, params: { what: string }) => [...context.history, params.what] }),
  },
  actors: {
    charge: fromPromise(async ({ input }: { input: { card: string; amount: number } }) => {
      if (input.card.startsWith('4000')) throw new Error(`declined: ${input.amount}`);
      return { id: `pay_${input.card.slice(-4)}`, amount: input.amount };
    }),
    ticker: fromCallback(({ sendBack, receive }) => {
      receive((e) => { if (e.type === 'PING') sendBack({ type: 'TICK' }); });
      return () => {};
    }),
  },
  delays: {
    timeout: ({ context }) => 1000 * (context.attempts + 1),
  },
}).createMachine({
  id: 'checkout',
  context: ({ input }) => ({ items: [], coupon: input?.coupon ?? null, attempts: 0, total: 0, history: [] }),
  initial: 'cart',
  states: {
    cart: {
      entry: { type: 'note', params: { what: 'cart' } },
      on: {
        ADD: { guard: 'belowLimit', actions: [assign({ items: ({ context, event }) => {
          const found = context.items.find((i) => i.sku === event.item.sku);
          return found
            ? context.items.map((i) => (i.sku === event.item.sku ? { ...i, qty: i.qty + event.item.qty } : i))
            : [...context.items, event.item];
        } }), 'recompute'] },
        REMOVE: { actions: [assign({ items: ({ context, event }) => context.items.filter((i) => i.sku !== event.sku) }), 'recompute'] },
        COUPON: [
          { guard: { type: 'validCoupon', params: ({ event }) => ({ code: event.code }) }, actions: [assign({ coupon: ({ event }) => event.code }), 'recompute', emit(({ event }) => ({ type: 'coupon.applied', code: event.code }))] },
          { actions: { type: 'note', params: ({ event }) => ({ what: `bad coupon ${event.code}` }) } },
        ],
        CHECKOUT: { guard: and(['hasItems', not({ type: 'bigOrder', params: { over: 10000 } })]), target: 'payment' },
      },
    },
    payment: {
      initial: 'idle',
      entry: spawnChild('ticker', { id: 'tick' }),
      exit: stopChild('tick'),
      on: { CANCEL: { target: 'cart', actions: log('cancelled') } },
      states: {
        idle: {
          on: { PAY: { target: 'charging', actions: assign({ attempts: ({ context }) => context.attempts + 1 }) } },
          after: { timeout: { target: '#checkout.cart', actions: { type: 'note', params: { what: 'timed out' } } } },
        },
        charging: {
          invoke: {
            src: 'charge',
            input: ({ context, event }) => ({ card: (event as any).card, amount: context.total }),
            onDone: { target: '#checkout.done', actions: assign({ paymentId: ({ event }) => event.output.id }) },
            onError: [
              { guard: 'canRetry', target: 'idle', actions: enqueueActions(({ enqueue, event }) => {
                enqueue({ type: 'note', params: { what: String((event.error as Error).message) } });
                enqueue.sendTo('tick', { type: 'PING' });
              }) },
              { target: '#checkout.failed' },
            ],
          },
        },
      },
    },
    done: { type: 'final', entry: { type: 'note', params: { what: 'paid' } } },
    failed: { type: 'final' },
  },
  on: {
    TICK: { actions: { type: 'note', params: { what: 'tick' } } },
  },
  output: ({ context }) => ({ total: context.total, paymentId: context.paymentId ?? null, history: context.history }),
});
