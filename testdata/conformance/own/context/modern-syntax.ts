import { setup, assign } from 'xstate';

class Tally {
  #count = 0;
  static created = 0;
  static { Tally.created = 1; }
  add(n: number) { this.#count += n; return this; }
  get value() { return this.#count; }
}

function* evens(limit: number) { for (let i = 0; i <= limit; i += 2) yield i; }

export default setup({}).createMachine({
  id: 'modern',
  context: { out: {} as Record<string, unknown> },
  on: {
    RUN: {
      actions: assign({
        out: ({ event }) => {
          const { a = 1, ...rest } = (event as any).obj ?? {};
          let flag: string | undefined;
          flag ||= 'set';
          let n = 0;
          n ??= 5;
          const big = 1_000_000;
          const t = new Tally().add(2).add(3);
          let caught = 'none';
          try { JSON.parse('{bad'); } catch { caught = 'yes'; }
          return {
            a, rest, flag, n, big, pow: 2 ** 10,
            tally: t.value, created: Tally.created,
            flat: [[1, [2]], [3]].flat(2),
            flatMap: [1, 2].flatMap((x) => [x, x * 10]),
            entries: Object.fromEntries([['k', 'v']]),
            replaced: 'a-b-c'.replaceAll('-', '+'),
            at: [1, 2, 3].at(-1),
            evens: [...evens(6)],
            spreadObj: { ...rest, z: 26 },
            trimmed: '  x '.trimStart().trimEnd(),
            padded: '7'.padStart(3, '0'),
            includes: [NaN].includes(NaN),
            sorted: [3, 1, 2].toSorted ? 'toSorted' : [3, 1, 2].sort(),
            groups: 'x=1'.match(/(?<key>\w)=(?<val>\d)/)?.groups?.key,
            caught,
            str: String(Symbol('s').description),
            date: typeof Date.now(),
            json: JSON.stringify({ b: [1, { c: 'd' }] }),
            mathy: Math.trunc(-4.7) + Math.sign(-3) + Math.hypot(3, 4),
          };
        },
      }),
    },
  },
});
