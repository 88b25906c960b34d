import { createMachine, assign, emit, sendTo } from 'xstate';

// The rest of what code does with the objects it is given: property
// names, Reflect.ownKeys, for...in, Object.assign/create, typeof,
// instanceof, identity of nested values, JSON.stringify with a key list; an
// event's names, `in`, hasOwnProperty, copies of it sent to a child (which
// lists its keys) and emitted; the context given whole to a child as input.

const child = createMachine({
  id: 'child', initial: 'c', context: ({ input }) => ({ got: input }),
  states: { c: { on: { PING: { actions: assign({ pinged: ({ event }) => Object.keys(event).sort().join(',') }) } } } },
});

export default createMachine({
  id: 'objects',
  initial: 'a',
  context: { n: 1, list: [1, 2, { deep: true }], obj: { a: 1, b: [1] }, s: 'x', nul: null, t: true },
  invoke: { id: 'kid', src: child, input: ({ context }) => ({ ctx: context, first: context.list[0] }) },
  states: {
    a: {
      on: {
        OPS: {
          actions: assign({
            names: ({ context }) => Object.getOwnPropertyNames(context).sort().join(','),
            own: ({ context }) => Reflect.ownKeys(context).length,
            forIn: ({ context }) => { const k = []; for (const x in context) k.push(x); return k.sort().join(','); },
            assigned: ({ context }) => Object.assign({}, context).s,
            created: ({ context }) => Object.create(context).n,
            ext: ({ context }) => Object.isExtensible(context),
            str: ({ context }) => `${context.s}-${context.n}-${context.nul}-${context.t}`,
            deep: ({ context }) => context.list[2].deep && context.obj.b.length,
            typeofs: ({ context }) => [typeof context, typeof context.n, typeof context.nul, typeof context.list, Array.isArray(context.list)].join(','),
            eq: ({ context }) => context.obj === context.obj && context.list[2] === context.list[2],
            inst: ({ context }) => context instanceof Object,
            entries: ({ context }) => Object.entries(context.obj).map(([k, v]) => k + ':' + JSON.stringify(v)).join(';'),
            selfValue: ({ context }) => context.valueOf() === context,
            json2: ({ context }) => JSON.stringify(context, ['n', 's']),
          }),
        },
        EVOPS: {
          actions: [
            assign({
              evNames: ({ event }) => Object.getOwnPropertyNames(event).sort().join(','),
              evIn: ({ event }) => ['type' in event, 'x' in event, 'y' in event].join(','),
              evAssign: ({ event }) => Object.assign({}, event),
              evDelete: ({ event }) => { const e = { ...event }; delete e.x; return e; },
              evHas: ({ event }) => event.hasOwnProperty('type') && event.hasOwnProperty('x'),
            }),
            sendTo('kid', ({ event }) => ({ ...event, type: 'PING' })),
            emit(({ event }) => ({ type: 'seen', what: event })),
          ],
        },
        NESTED: {
          actions: assign(({ context }) => ({ obj: { ...context.obj, c: context.list.map((x) => (typeof x === 'number' ? x * 10 : x)) } })),
        },
      },
    },
  },
});
