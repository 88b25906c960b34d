import { setup, assign, fromTransition, fromCallback, fromPromise, raise, sendTo } from 'xstate';

export default setup({
  actors: {
    counter: fromTransition((s, e) => (e.type === 'INC' ? { n: s.n + 1 } : s), { n: 0 }),
    flaky: fromCallback(({ input }) => { if (input.fail) throw new Error('callback broke'); }),
    charge: fromPromise(async ({ input }) => { if (input.amount > 100) throw 'too much'; if (input.amount < 0) throw { code: 42 }; return input.amount * 2; }),
  },
}).createMachine({
  id: 'fulfil',
  type: 'parallel',
  context: { snaps: [], log: [], charged: null, errors: [], canShip: null },
  after: { 500: { actions: assign({ log: ({ context }) => [...context.log, 'half-second'] }) } },
  states: {
    counting: {
      invoke: { id: 'cnt', src: 'counter', onSnapshot: { actions: assign({ snaps: ({ context, event }) => [...context.snaps, event.snapshot.context.n] }) } },
      on: { COUNT: { actions: sendTo('cnt', { type: 'INC' }) } },
    },
    packing: {
      initial: 'items',
      states: {
        items: {
          initial: 'picking',
          states: {
            picking: { on: { PICKED: 'picked' } },
            picked: { type: 'final', output: ({ context }) => ({ boxes: context.snaps.length }) },
          },
          onDone: { target: 'boxed', actions: assign({ log: ({ context, event }) => [...context.log, `boxes:${event.output.boxes}`] }) },
          exit: raise({ type: 'NOTE', msg: 'left items' }),
        },
        boxed: {
          entry: [({ self }) => self.send({ type: 'NOTE', msg: 'self-sent' }), assign({ canShip: ({ self }) => self.getSnapshot().can({ type: 'SHIP' }) })],
          on: { SHIP: 'shipped' },
        },
        shipped: { type: 'final' },
      },
    },
    paying: {
      initial: 'idle',
      states: {
        idle: { on: { PAY: 'charging', BREAK: 'broken' } },
        charging: {
          invoke: { src: 'charge', input: ({ event }) => ({ amount: event.amount }),
            onDone: { target: 'paid', actions: assign({ charged: ({ event }) => event.output }) },
            onError: { target: 'idle', actions: assign({ errors: ({ context, event }) => [...context.errors, JSON.stringify(event.error)] }) } },
        },
        broken: {
          invoke: { src: 'flaky', input: { fail: true }, onError: { target: 'idle', actions: assign({ errors: ({ context, event }) => [...context.errors, event.error.message] }) } },
        },
        paid: { type: 'final' },
      },
    },
  },
  on: { NOTE: { actions: assign({ log: ({ context, event }) => [...context.log, event.msg] }) } },
});
