import { createMachine } from 'xstate';
import _ from 'lodash';

export const machine = createMachine({ id: 'p', initial: 'a', states: { a: {} } });
