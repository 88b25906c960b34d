import { assign, fromPromise } from 'xstate';
type Ctx = { assignee: string | null; replies: number; notified: string[]; escalations: number; priority: string };
export default {
  actions: {
    notify: assign({ notified: ({ context }: { context: Ctx }, params: { channel: string }) => [...context.notified, params.channel] }),
    setAssignee: assign({ assignee: ({ event }: any) => event.who }),
    setPriority: assign({ priority: (_: unknown, params: { level: string }) => params.level }),
    countReply: assign({ replies: ({ context }: { context: Ctx }) => context.replies + 1 }),
    countEscalation: assign({ escalations: ({ context }: { context: Ctx }) => context.escalations + 1 }),
    logExit: () => {},
  },
  guards: {
    validAssignee: ({ event }: any, params: { domain: string }) => typeof event.who === 'string' && event.who.endsWith('@' + params.domain),
    tooManyReplies: ({ context }: { context: Ctx }, params: { max: number }) => context.replies >= params.max,
  },
  actors: { lookupCustomer: fromPromise(async ({ input }: { input: { source: string } }) => ({ source: input.source, vip: true })) },
  delays: { slaDelay: ({ context }: { context: Ctx }) => (context.priority === 'high' ? 1000 : 5000) },
};
