import { createMachine, setup, assign, sendParent, forwardTo, fromTransition, raise, cancel, or, stateIn, sendTo } from 'xstate';

const loader = setup({}).createMachine({
  id: 'loader',
  context: ({ input }) => ({ track: input.track, progress: 0 }),
  initial: 'loading',
  states: {
    loading: {
      on: {
        CHUNK: [
          { guard: ({ context }) => context.progress >= 2, target: 'ready', actions: assign(({ context }) => ({ progress: context.progress + 1 })) },
          { actions: [assign(({ context }) => ({ progress: context.progress + 1 })), sendParent(({ context }) => ({ type: 'PROGRESS', pct: (context.progress + 1) * 25 }))] },
        ],
      },
    },
    ready: { type: 'final' },
  },
  output: ({ context }) => ({ track: context.track, chunks: context.progress }),
});

const volume = fromTransition((state, event) => {
  if (event.type === 'UP') return { level: Math.min(10, state.level + 1) };
  if (event.type === 'DOWN') return { level: Math.max(0, state.level - 1) };
  return state;
}, ({ input }) => ({ level: input ?? 5 }));

export default createMachine({
  id: 'player',
  type: 'parallel',
  context: { log: [], pct: 0, loaded: null },
  states: {
    transport: {
      initial: 'stopped',
      states: {
        stopped: { on: { PLAY: 'loading' } },
        loading: {
          invoke: {
            id: 'loader', src: loader, input: ({ event }) => ({ track: event.track ?? 'default' }),
            onDone: { target: 'playing', actions: assign({ loaded: ({ event }) => event.output }) },
          },
          on: {
            PROGRESS: { actions: assign({ pct: ({ event }) => event.pct }) },
            CHUNK: { actions: forwardTo('loader') },
          },
        },
        playing: {
          initial: 'normal',
          states: {
            normal: { on: { FF: 'fast' } },
            fast: { after: { 300: 'normal' } },
            hist: { type: 'history', history: 'shallow' },
          },
          on: {
            PAUSE: 'paused',
            STOP: { target: 'stopped', actions: [raise({ type: 'BEEP' }, { id: 'beep', delay: 100 })] },
          },
        },
        paused: {
          on: { PLAY: 'playing.hist' },
          always: { guard: stateIn({ audio: 'muted' }), target: 'stopped' },
        },
      },
    },
    audio: {
      initial: 'on',
      invoke: { id: 'vol', src: volume, input: 3 },
      states: {
        on: { on: { MUTE: 'muted', UP: { actions: sendTo('vol', { type: 'UP' }) }, DOWN: { actions: sendTo('vol', ({ event }) => ({ type: 'DOWN', n: event.n })) } } },
        muted: { on: { MUTE: 'on' } },
      },
    },
  },
  on: {
    BEEP: { actions: assign({ log: ({ context }) => [...context.log, 'beep'] }) },
    QUIET: { actions: cancel('beep') },
    '*': { guard: or([({ event }) => event.type.startsWith('X'), stateIn({ transport: 'stopped' })]), actions: assign({ log: ({ context, event }) => [...context.log, `unknown ${event.type}`] }) },
  },
});
