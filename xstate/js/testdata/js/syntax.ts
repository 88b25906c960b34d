import { createMachine } from 'xstate';

export default createMachine({
  id: 'broken',
  initial: 'a',
  states: {
    a: { on: { GO: 'b' } },
    b: { on: { BACK: 'a' } ,
  },
});
