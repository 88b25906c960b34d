// Records what the real XState does with a persisted snapshot, for
// conformance/persist_test.go: node record.mjs CASE.persist.json > CASE.want.json
// (run it in the oracle's folder, where xstate and esbuild are installed:
// scripts/xstate/install.sh installs them and prints the folder).
// A case runs its `before` events, persists the snapshot, restores it in a
// new actor, runs its `after` events, and prints the persisted snapshot
// and the restored actor's value, context and children.
// A JSON machine takes the implementations module named by the case, or
// the NAME.impl.ts beside it, as stategate does.
import * as esbuild from 'esbuild';
import { createActor, createMachine, SimulatedClock } from 'xstate';
import { existsSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { dirname, extname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

async function load(file) {
  const out = await esbuild.build({
    entryPoints: [file], bundle: true, write: false,
    format: 'esm', platform: 'node', external: ['xstate'], logLevel: 'silent',
  });
  const path = resolve(process.cwd(), `.persist-${process.pid}.mjs`);
  writeFileSync(path, out.outputFiles[0].text);
  try { return await import(pathToFileURL(path).href); } finally { rmSync(path, { force: true }); }
}

const caseFile = resolve(process.argv[2]);
const c = JSON.parse(readFileSync(caseFile, 'utf8'));
const mfile = resolve(dirname(caseFile), c.machine);
let machine;
if (extname(mfile) === '.json') {
  machine = createMachine(JSON.parse(readFileSync(mfile, 'utf8')));
  const impl = c.implementations ? resolve(dirname(caseFile), c.implementations) : mfile.replace(/\.json$/, '.impl.ts');
  if (existsSync(impl)) {
    const mod = await load(impl);
    machine = machine.provide(mod.default ?? mod);
  }
} else {
  const mod = await load(mfile);
  machine = mod.default ?? mod.machine;
}
const settle = () => new Promise((r) => setTimeout(r, 0));
// Time does not move (a simulated clock): delayed events stay pending.
const quiet = { logger: () => {}, clock: new SimulatedClock() };
const a = createActor(machine, { input: c.input, ...quiet });
a.start();
await settle(); // as the oracle's traces: promises settle before the first event
for (const e of c.before) { a.send(e); await settle(); }
const persisted = JSON.parse(JSON.stringify(a.getPersistedSnapshot()));
a.stop();
const b = createActor(machine, { snapshot: persisted, input: c.input, ...quiet });
b.start();
await settle();
for (const e of c.after) { b.send(e); await settle(); }
const s = b.getSnapshot();
console.log(JSON.stringify({ persisted, after: { value: s.value, context: s.context, status: s.status, children: Object.keys(s.children).sort() } }, null, 2));
