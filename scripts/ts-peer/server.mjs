// A state-gated MCP server written the way a TypeScript developer would
// write one: the official SDK's Streamable HTTP transport, one XState
// actor per session running machines/invoice.json with the
// implementations of invoice.impl.ts, a tool per event enabled only while
// the actor can take it (the SDK sends tools/list_changed), and nothing
// stored. It is a peer to measure `stategate serve` against, in the same
// run and under the same load (scripts/compare-serve.sh), not part of
// stategate.
//
//   npm install && node server.mjs [PORT]
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createActor, createMachine, assign } from 'xstate';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';

const config = JSON.parse(readFileSync(new URL('../../machines/invoice.json', import.meta.url)));
const sum = (lines) => lines.reduce((t, l) => t + l.amount, 0);
const machine = createMachine(config).provide({
  guards: {
    hasLines: ({ context }) => context.lines.length > 0,
    withinLimit: ({ context }) => context.total <= context.approvalLimit,
    withinBalance: ({ context, event }) =>
      typeof event.amount === 'number' && event.amount > 0 && event.amount <= context.total - context.paid,
    fullyPaid: ({ context }) => context.paid >= context.total,
  },
  actions: {
    addLine: assign(({ context, event }) => {
      const lines = [...context.lines, { description: event.description, amount: event.amount }];
      return { lines, total: sum(lines) };
    }),
    removeLastLine: assign(({ context }) => {
      const lines = context.lines.slice(0, -1);
      return { lines, total: sum(lines) };
    }),
    recordReason: assign(({ context, event }) => ({ revisions: context.revisions + 1, lastReason: event.reason })),
    recordPayment: assign({ paid: ({ context, event }) => context.paid + event.amount }),
  },
});

// The event types the machine names in an `on`.
const events = new Set();
(function walk(node) {
  for (const e of Object.keys(node.on ?? {})) events.add(e);
  for (const child of Object.values(node.states ?? {})) walk(child);
})(config);

const stateOf = (snap) => (typeof snap.value === 'string' ? snap.value : JSON.stringify(snap.value));

function newServer() {
  const server = new McpServer(
    { name: 'ts-peer', version: '1.0.0' },
    { capabilities: { tools: { listChanged: true } }, debouncedNotificationMethods: ['notifications/tools/list_changed'] },
  );
  const actor = createActor(machine).start();
  const tools = new Map();
  const gate = () => {
    const snap = actor.getSnapshot();
    for (const [type, tool] of tools) {
      const can = snap.status === 'active' && snap.can({ type });
      if (can && !tool.enabled) tool.enable();
      if (!can && tool.enabled) tool.disable();
    }
  };
  const allowed = () => [...tools].filter(([, t]) => t.enabled).map(([type]) => 'invoice_' + type.toLowerCase());
  for (const type of events) {
    const name = 'invoice_' + type.toLowerCase().replace(/[^a-z0-9_-]/g, '_');
    tools.set(
      type,
      server.registerTool(
        name,
        { description: `Send ${type} to the invoice.`, inputSchema: { reason: z.string().optional(), description: z.string().optional(), amount: z.number().optional() } },
        async (args) => {
          const before = actor.getSnapshot();
          if (!before.can({ type, ...args })) {
            return { isError: true, content: [{ type: 'text', text: `REJECTED: ${type} in state ${stateOf(before)}` }] };
          }
          actor.send({ type, ...args });
          gate();
          const snap = actor.getSnapshot();
          const structuredContent = { machine: 'invoice', state: stateOf(snap), status: snap.status, context: snap.context, tools: allowed() };
          return {
            content: [{ type: 'text', text: `invoice is now in state ${structuredContent.state}. Tools available now: ${structuredContent.tools.join(', ')}.` }],
            structuredContent,
          };
        },
      ),
    );
  }
  server.registerTool('invoice_status', { description: 'The invoice state.' }, async () => {
    const snap = actor.getSnapshot();
    return { content: [{ type: 'text', text: JSON.stringify({ state: stateOf(snap), context: snap.context }) }] };
  });
  gate();
  return server;
}

const transports = new Map();
const port = Number(process.argv[2] ?? 3004);
http
  .createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks)) : undefined;
    const id = req.headers['mcp-session-id'];
    let transport = id && transports.get(id);
    if (!transport) {
      if (req.method !== 'POST' || !isInitializeRequest(body)) {
        res.writeHead(400).end('no session');
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid) => transports.set(sid, transport),
      });
      transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
      await newServer().connect(transport);
    }
    await transport.handleRequest(req, res, body);
  })
  .listen(port, '127.0.0.1', () => console.error(`ts-peer on http://127.0.0.1:${port}/mcp`));
