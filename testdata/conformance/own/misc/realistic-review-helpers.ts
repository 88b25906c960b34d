export const enum Severity { Low = 1, High = 3 }
export class Scorer {
  static score(words: string[]): number { return words.reduce((s, w) => s + (w.length > 4 ? 2 : 1), 0); }
}
export const delayFor = (attempt: number) => 100 * 2 ** attempt;
export * from './realistic-review-more';
