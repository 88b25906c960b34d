// Drives the billing example over stdio with the official TypeScript SDK:
//   node client.mjs BILLING-BINARY [ARGS...]
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [command, ...args] = process.argv.slice(2);
const client = new Client({ name: 'billing-ts', version: '1' });
await client.connect(new StdioClientTransport({ command, args, stderr: 'ignore' }));
const names = async () => (await client.listTools()).tools.map((t) => t.name).sort();
const call = async (name, args = {}) => {
  const res = await client.callTool({ name, arguments: args });
  return [res.isError === true, res.content.map((c) => c.text).join('\n')];
};
const fail = (why) => { console.error(why); process.exit(1); };

let tools = await names();
if (tools.includes('discharge')) fail(`discharge listed in draft: ${tools}`);
const [refused] = await call('discharge', { payer: 'ts-sdk' });
if (!refused) fail('discharge was not refused in draft');
await call('invoice_add_line', { description: 'design', amount: 80 });
await call('invoice_submit');
await call('invoice_approve');
tools = await names();
if (!tools.includes('discharge')) fail(`discharge not listed once approved: ${tools}`);
const [isError, text] = await call('discharge', { payer: 'ts-sdk' });
if (isError) fail(`discharge failed: ${text}`);
console.log(text);
await client.close();
