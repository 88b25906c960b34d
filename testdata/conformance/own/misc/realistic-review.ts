import { setup, assign, fromPromise, fromCallback, raise, emit, sendTo, stateIn, and, log } from 'xstate';
import { Scorer, delayFor, tag, Severity } from './realistic-review-helpers';

const lint = fromPromise(async ({ input }: { input: { text: string } }) => {
  const words = input.text.split(/\s+/).filter(Boolean);
  const [score, flagged] = await Promise.all([
    Promise.resolve(Scorer.score(words)),
    (async () => words.filter((w) => w.toUpperCase() === w && w.length > 1))(),
  ]);
  try {
    if (flagged.length > 1) throw new Error(`shouting: ${flagged.join(',')}`);
  } catch (e) {
    return { score, flagged, note: (e as Error).message };
  }
  return { score, flagged, note: null };
});

export const machine = setup({
  types: {} as {
    context: { text: string; score: number; notes: string[]; attempt: number; severity: Severity };
    events: { type: 'EDIT'; text: string } | { type: 'SUBMIT' } | { type: 'APPROVE' } | { type: 'REJECT'; reason: string } | { type: 'TOGGLE' } | { type: 'BACK' } | { type: 'RETRY' };
    emitted: { type: 'reviewed'; score: number };
  },
  actors: {
    lint,
    audit: fromCallback(({ receive, sendBack }) => {
      let n = 0;
      receive((e: any) => { n += 1; if (e.type === 'LOG') sendBack({ type: 'AUDITED', n, what: e.what }); });
    }),
  },
  guards: {
    longEnough: ({ context }) => context.text.length >= 10,
    severe: ({ context }) => context.severity >= Severity.High,
  },
}).createMachine({
  id: 'review',
  context: { text: '', score: 0, notes: [], attempt: 0, severity: Severity.Low },
  invoke: { src: 'audit', systemId: 'audit', id: 'audit' },
  initial: 'drafting',
  on: {
    AUDITED: { actions: assign({ notes: ({ context, event }) => [...context.notes, tag(`${(event as any).n}:${(event as any).what}`)] }) },
  },
  states: {
    drafting: {
      on: {
        EDIT: { actions: assign({ text: ({ event }) => event.text }) },
        SUBMIT: [
          { guard: 'longEnough', target: 'checking' },
          { actions: raise({ type: 'RETRY' }, { delay: ({ context }) => delayFor(context.attempt) }) },
        ],
        RETRY: { actions: assign({ attempt: ({ context }) => context.attempt + 1, notes: ({ context }) => [...context.notes, 'retry'] }) },
      },
    },
    checking: {
      invoke: {
        src: 'lint',
        input: ({ context }) => ({ text: context.text }),
        onDone: {
          target: 'reviewing',
          actions: [
            assign({ score: ({ event }) => event.output.score, severity: ({ event }) => (event.output.note ? Severity.High : Severity.Low), notes: ({ context, event }) => (event.output.note ? [...context.notes, event.output.note] : context.notes) }),
            emit(({ event }) => ({ type: 'reviewed', score: event.output.score })),
            sendTo(({ system }) => system.get('audit'), { type: 'LOG', what: 'linted' }),
          ],
        },
      },
    },
    reviewing: {
      type: 'parallel',
      states: {
        content: {
          initial: 'reading',
          states: {
            reading: { on: { TOGGLE: 'commenting' } },
            commenting: {
              initial: 'draft',
              states: { draft: { on: { TOGGLE: 'posted' } }, posted: { type: 'final' } },
              onDone: 'reading',
            },
            hist: { type: 'history', history: 'deep' },
          },
        },
        decision: {
          initial: 'pending',
          states: {
            pending: {
              on: {
                APPROVE: [
                  { guard: and([stateIn('#review.reviewing.content.reading'), ({ context }) => context.score > 2]), target: '#review.done' },
                  { actions: log('cannot approve yet') },
                ],
                REJECT: { target: '#review.drafting', actions: [assign({ notes: ({ context, event }) => [...context.notes, `rejected: ${event.reason}`] }), sendTo('audit', { type: 'LOG', what: 'rejected' })] },
              },
            },
          },
        },
      },
      on: { BACK: '.content.hist' },
    },
    done: {
      type: 'final',
      entry: sendTo('audit', { type: 'LOG', what: 'done' }),
    },
  },
  output: ({ context }) => ({ score: context.score, notes: context.notes, severe: context.severity >= Severity.High }),
});
