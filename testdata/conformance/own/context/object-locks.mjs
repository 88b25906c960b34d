import { createMachine, assign } from 'xstate';

// Code that freezes the context or the event it is given, or defines a
// property on it with attributes of its own: XState allows it (the
// objects are plain), and so must we.
export default createMachine({
  id: 'locks',
  initial: 'a',
  context: { n: 1, inner: { k: 1 } },
  states: {
    a: {
      on: {
        FREEZE_COPY: { actions: assign({ frozenCopy: ({ context }) => Object.isFrozen(Object.freeze({ ...context })) }) },
        FREEZE: { actions: assign({ frozen: ({ context }) => Object.isFrozen(Object.freeze(context)) }) },
        DEFINE: {
          actions: assign({
            defined: ({ context }) => {
              Object.defineProperty(context, 'hidden', { value: 5, enumerable: false });
              return [context.hidden, Object.keys(context).includes('hidden')];
            },
          }),
        },
        DESCRIBE: { actions: assign({ descriptor: ({ context }) => JSON.stringify(Object.getOwnPropertyDescriptor(context, 'n')) }) },
        FREEZE_EVENT: { actions: assign({ frozenEvent: ({ event }) => Object.isFrozen(Object.freeze(event)) && event.amount }) },
      },
    },
  },
});
