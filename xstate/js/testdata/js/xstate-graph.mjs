import { createMachine } from 'xstate';
import { toDirectedGraph } from 'xstate/graph';
export default createMachine({ id: 'g', initial: 'a', states: { a: {} } });
