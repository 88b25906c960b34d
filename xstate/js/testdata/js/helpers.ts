export const limit = 100;
export function over(amount: number): boolean {
  return amount > limit;
}
