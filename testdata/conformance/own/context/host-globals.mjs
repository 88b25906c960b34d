import { createMachine, assign } from 'xstate';
export default createMachine({
  id: 'g', context: { ok: null },
  on: { GO: { actions: assign({ ok: ({ context, event }) => {
    const id = crypto.randomUUID();
    const copy = structuredClone({ a: [1, { b: 2 }] });
    copy.a[1].b = 3;
    let queued = 0;
    queueMicrotask(() => { queued = 1; });
    const t = performance.now();
    return { uuid: /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id), copy, queuedNow: queued, time: typeof t };
  } }) } },
});
