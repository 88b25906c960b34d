import { setup, assign } from 'xstate';

// esbuild lowers ?. and ?? (ES2020) to parenthesized conditionals; inside
// an array literal with a spread they must still parse.
export default setup({}).createMachine({
  id: 'nullish',
  context: { names: [], sizes: [] },
  on: {
    ADD: {
      actions: assign({
        names: ({ context, event }) => [...context.names, event.user?.name ?? 'anonymous'],
        sizes: ({ context, event }) => [...context.sizes, (event.user?.tags?.length) ?? 0, ...(event.extra ?? [])],
      }),
    },
  },
});
