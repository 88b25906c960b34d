import { createMachine, assign, raise, sendTo, fromCallback } from 'xstate';

export const machine = createMachine(
  {
    id: 'legacy',
    types: {},
    schemas: { context: { type: 'object' } },
    initial: 'idle',
    context: { count: 0, items: [], lastError: null },
    states: {
      idle: {
        entry: ['logEntry'],
        exit: 'logExit',
        on: {
          ADD: [
            { guard: 'isFull', actions: 'reject' },
            { guard: { type: 'itemValid', params: { min: 2 } }, actions: ['addItem', raise({ type: 'CHECK' })] },
            { actions: assign({ lastError: ({ event }) => `invalid: ${String(event.item)}` }) },
          ],
          CHECK: [{ guard: ({ context }) => context.items.length >= 2, target: 'ready' }, { target: 'idle' }],
          NOTHING: undefined,
        },
      },
      ready: {
        on: {
          GO: 'working',
          BACK: { target: 'idle', reenter: true },
        },
      },
      working: {
        invoke: { id: 'ticker', src: 'tickerLogic', input: ({ context }) => ({ n: context.items.length }) },
        on: {
          TICK: { actions: assign({ count: ({ context, event }) => context.count + event.by }) },
          POKE: { actions: sendTo('ticker', ({ context }) => ({ type: 'POKE', at: context.count })) },
          STOP: 'idle',
        },
      },
    },
  },
  {
    actions: {
      logEntry: assign({ count: ({ context }) => context.count + 100 }),
      logExit: assign({ count: ({ context }) => context.count - 1 }),
      addItem: assign({ items: ({ context, event }) => [...context.items, event.item] }),
      reject: assign({ lastError: 'full' }),
    },
    guards: {
      isFull: ({ context }) => context.items.length >= 3,
      itemValid: ({ event }, params) => typeof event.item === 'string' && event.item.length >= params.min,
    },
    actors: {
      tickerLogic: fromCallback(({ sendBack, receive, input }) => {
        sendBack({ type: 'TICK', by: input.n });
        receive((e) => sendBack({ type: 'TICK', by: e.at % 7 }));
        return () => {};
      }),
    },
  },
);
