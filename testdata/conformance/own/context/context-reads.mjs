import { createMachine, assign } from 'xstate';

// Code reads the context in the ways users write: properties, nested
// objects, `in`, hasOwnProperty, Object.keys/entries, spread,
// JSON.stringify, String(), identity of nested values, and an assign that
// returns the context object itself or puts it inside another object.
export default createMachine({
  id: 'reader',
  initial: 'idle',
  context: { a: 1, b: 'x', list: [1, 2], nested: { k: 'v', n: 2 } },
  states: {
    idle: {
      on: {
        INSPECT: {
          guard: ({ context }) => 'a' in context && !('zz' in context) && context.hasOwnProperty('b'),
          actions: assign({
            keys: ({ context }) => Object.keys(context).sort().join(','),
            entries: ({ context }) => Object.entries(context).filter(([, v]) => typeof v === 'number').length,
            spreadCount: ({ context }) => Object.keys({ ...context }).length,
            json: ({ context }) => JSON.stringify(context.nested),
            str: ({ context }) => String(context),
            same: ({ context }) => context.list === context.list && context.nested === context.nested,
            missing: ({ context }) => context.zz === undefined,
          }),
        },
        COPY: {
          actions: assign(({ context }) => ({ copy: { ...context.nested, extra: context.list.length } })),
        },
        WHOLE: {
          actions: assign(({ context }) => context),
        },
        WRAP: {
          actions: assign(({ context }) => ({ wrapped: { inner: context.nested, a: context.a } })),
        },
        BUMP: {
          guard: ({ context }) => context.a < 3,
          actions: assign({ a: ({ context }) => context.a + 1, list: ({ context }) => [...context.list, context.a] }),
        },
      },
    },
  },
});
