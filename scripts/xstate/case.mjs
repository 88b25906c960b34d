// Reads a conformance case and loads its machine with the real XState, for
// trace.mjs and bench.mjs (the case format: README.md beside this file).
//
// A case names its machine relative to the case file: a JSON config (given
// to createMachine, then to machine.provide() with the default export of
// the case's `implementations` module when it names one), or a JS/TS module
// (.js, .mjs, .ts, .mts) that exports one machine, as its default export or
// as `machine`. Modules are bundled with esbuild (which also strips
// TypeScript's types), with `xstate` and its subpaths left as imports of
// the one copy of XState installed beside this file, so the machine and
// the actor running it share it.
import * as esbuild from 'esbuild';
import { readFileSync } from 'node:fs';
import { dirname, extname, resolve } from 'node:path';

const moduleExts = new Set(['.js', '.mjs', '.ts', '.mts']);

// readCase returns the case at path, its file names resolved, its steps
// checked: each is {send: EVENT} or {advance: MS}.
export function readCase(path) {
  const file = resolve(path);
  let c;
  try {
    c = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Error(`${path}: ${e.message}`);
  }
  if (typeof c.machine !== 'string' || c.machine === '') {
    throw new Error(`${path}: the case names no machine`);
  }
  const steps = c.steps ?? [];
  if (!Array.isArray(steps)) throw new Error(`${path}: steps is not a list`);
  steps.forEach((s, i) => {
    const send = s !== null && typeof s === 'object' && 'send' in s;
    const advance = s !== null && typeof s === 'object' && 'advance' in s;
    if (send && (s.send === null || typeof s.send !== 'object' || typeof s.send.type !== 'string')) {
      throw new Error(`${path}: step ${i}: send needs an event object with a string type`);
    }
    if (advance && typeof s.advance !== 'number') {
      throw new Error(`${path}: step ${i}: advance needs a number of milliseconds`);
    }
    if (send === advance) throw new Error(`${path}: step ${i}: unknown step ${JSON.stringify(s)}`);
  });
  const dir = dirname(file);
  return {
    path: file,
    description: c.description ?? '',
    machine: resolve(dir, c.machine),
    implementations: c.implementations ? resolve(dir, c.implementations) : undefined,
    input: c.input,
    steps,
  };
}

// Imports a JS/TS module through esbuild: one ES module with every import
// bundled in but XState's, loaded from a data: URL (no file is written).
async function importModule(file) {
  if (!moduleExts.has(extname(file).toLowerCase())) {
    throw new Error(`${file}: not a machine module (.js, .mjs, .ts, .mts) nor a JSON config`);
  }
  const xstate = {
    name: 'xstate',
    setup(build) {
      build.onResolve({ filter: /^xstate(\/.*)?$/ }, (args) => ({
        path: import.meta.resolve(args.path),
        external: true,
      }));
    },
  };
  const out = await esbuild.build({
    entryPoints: [file],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'node',
    logLevel: 'silent',
    plugins: [xstate],
  }).catch((e) => {
    const first = e.errors?.[0];
    const where = first?.location ? `${first.location.file}:${first.location.line}: ` : `${file}: `;
    throw new Error(where + (first?.text ?? e.message));
  });
  const code = out.outputFiles[0].text;
  return import('data:text/javascript;base64,' + Buffer.from(code).toString('base64'));
}

// loadMachine returns the case's machine.
export async function loadMachine(c) {
  const { createMachine } = await import('xstate');
  let machine;
  if (extname(c.machine).toLowerCase() === '.json') {
    let config;
    try {
      config = JSON.parse(readFileSync(c.machine, 'utf8'));
    } catch (e) {
      throw new Error(`${c.machine}: ${e.message}`);
    }
    machine = createMachine(config);
  } else {
    const mod = await importModule(c.machine);
    machine = mod.default ?? mod.machine;
    if (!machine || typeof machine.provide !== 'function') {
      throw new Error(`${c.machine}: exports no machine (as default or as \`machine\`)`);
    }
  }
  if (c.implementations) {
    const mod = await importModule(c.implementations);
    machine = machine.provide(mod.default ?? mod);
  }
  return machine;
}

// eventTypes returns the event types named in some state's `on`, without
// wildcards and XState's own events (xstate.*: after, done, error), sorted.
export function eventTypes(machine) {
  const types = new Set();
  const walk = (node) => {
    for (const d of Object.keys(node.on)) {
      if (!d.includes('*') && !d.startsWith('xstate.')) types.add(d);
    }
    for (const child of Object.values(node.states ?? {})) walk(child);
  };
  walk(machine.root);
  return [...types].sort();
}
