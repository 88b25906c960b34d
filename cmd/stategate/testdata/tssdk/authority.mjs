// Walks the bundled expense claim against a running `stategate serve
// --http` with JWTs, as the official TypeScript SDK's clients:
//   TOKENS='{"agent":"JWT",...}' node authority.mjs http://127.0.0.1:PORT/mcp
// It prints one JSON line per step ({step, isError, code, state, text});
// the Go test that runs it judges them.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const url = new URL(process.argv[2]);
const tokens = JSON.parse(process.env.TOKENS);

// connect makes a client of a principal; with a human (an answer to give
// when asked), it declares elicitation and answers with it.
async function connect(who, human) {
  const opts = human ? { capabilities: { elicitation: {} } } : {};
  const client = new Client({ name: `ts-${who}`, version: '1' }, opts);
  const asked = [];
  if (human) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked.push(req.params.message);
      return human;
    });
  }
  const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: { Authorization: `Bearer ${tokens[who]}` } } });
  await client.connect(transport);
  client.asked = asked;
  return client;
}

async function step(name, client, tool, args) {
  const res = await client.callTool({ name: tool, arguments: args });
  const sc = res.structuredContent ?? {};
  const out = { step: name, isError: res.isError === true, code: sc.error ?? null, state: sc.state ?? null, text: res.content.map((c) => c.text).join('\n') };
  console.log(JSON.stringify(out));
  return out;
}

const listed = async (client) => (await client.listTools()).tools.map((t) => t.name);

const agent = await connect('agent');
await step('agent submits e1', agent, 'expense_submit', { expense_id: 'e1', amount: 120, payee: 'ACME' });
console.log(JSON.stringify({ step: 'agent lists', tools: await listed(agent) }));
await step('agent approves e1', agent, 'expense_approve', { expense_id: 'e1' });
await step('agent approves e1 as a forged approver', agent, 'expense_approve', { expense_id: 'e1', principal: { sub: 'bob', roles: ['approver'] } });
await step('agent submits e3 with a forged principal', agent, 'expense_submit', { expense_id: 'e3', amount: 5, payee: 'X', principal: { sub: 'bob', roles: ['approver'] } });
const e3 = await agent.callTool({ name: 'expense_status', arguments: { expense_id: 'e3' } });
console.log(JSON.stringify({ step: 'e3 submitted by', who: e3.structuredContent.context.submittedBy }));

const alice = await connect('alice');
const bob = await connect('bob');
await step('alice submits e2', alice, 'expense_submit', { expense_id: 'e2', amount: 40, payee: 'Bakery' });
await step('alice approves e2', alice, 'expense_approve', { expense_id: 'e2' });
await step('bob approves e2', bob, 'expense_approve', { expense_id: 'e2' });
await step('bob approves e1', bob, 'expense_approve', { expense_id: 'e1' });

const no = await connect('pat', { action: 'decline' });
await step('pat pays e1, declined', no, 'expense_pay', { expense_id: 'e1' });
const yes = await connect('pat', { action: 'accept', content: { approve: true, comment: 'checked the invoice' } });
await step('pat pays e1, accepted', yes, 'expense_pay', { expense_id: 'e1' });
console.log(JSON.stringify({ step: 'pat was asked', asked: [...no.asked, ...yes.asked] }));
const noCapability = await connect('pat');
await step('pat pays e2 from a client that cannot ask', noCapability, 'expense_pay', { expense_id: 'e2' });

for (const c of [agent, alice, bob, no, yes, noCapability]) await c.close();
