export const tag = (s: string) => `[${s}]` as const;
