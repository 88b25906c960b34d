import { createMachine, assign } from 'xstate';

// self in calls: its id, its send (also destructured), and how it shows
// in JSON and in the context.
export default createMachine({
  id: 'me',
  initial: 'a',
  context: {},
  states: {
    a: {
      on: {
        GO: {
          target: 'b',
          actions: [
            assign(({ self }) => ({
              id: self.id,
              json: JSON.stringify(self),
              keys: Object.keys(self).join(','),
              ref: self,
            })),
            ({ self }) => {
              const { send } = self;
              send({ type: 'NEXT' });
            },
          ],
        },
      },
    },
    b: { on: { NEXT: 'c' } },
    c: {},
  },
});
