import { createMachine } from 'xstate';

export default createMachine({
  id: 'chatty',
  entry: () => {
    console.log('hello', { a: 1 }, [2], 3, undefined);
    console.info('info');
    console.warn('warn');
    console.error('error');
    console.debug('debug');
    console.table([1]);
    console.group('g');
    console.groupEnd();
    console.time('t');
    console.timeEnd('t');
    console.assert(false, 'nothing');
  },
});
