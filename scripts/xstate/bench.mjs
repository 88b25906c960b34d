// Times the real XState on a conformance case, as `stategate bench` times
// stategate, and prints one JSON line:
//   node bench.mjs CASE.case.json [SECONDS]   (default 2)
//   {"case":"AREA/NAME.case.json","rounds":R,"steps":S,"ns_per_step":N,"ns_per_round":N}
// (scripts/bench-xstate.sh installs XState and runs this). A round creates
// and starts a fresh actor (with a fresh SimulatedClock), runs every step
// of the case and stops the actor. Rounds run for a quarter of SECONDS to
// warm up, then are counted for SECONDS, checking the clock every 16
// rounds. The whole loop is synchronous: it never yields to the microtasks
// that would deliver a promise actor's outcome, so cases with promise
// actors time the synchronous part of each step. ns_per_step is null for a
// case without steps. Machines' console output and log actions go nowhere.
import { basename, dirname } from 'node:path';
import { createActor, SimulatedClock } from 'xstate';
import { loadMachine, readCase } from './case.mjs';

const nothing = () => {};
for (const k of ['log', 'info', 'debug', 'warn', 'error', 'trace']) console[k] = nothing;
const report = (msg) => process.stderr.write(msg + '\n');

async function bench(path, seconds) {
  const c = readCase(path);
  const machine = await loadMachine(c);
  const quiet = { error: nothing }; // an error is part of the case, not unhandled
  const round = () => {
    const clock = new SimulatedClock();
    const actor = createActor(machine, { input: c.input, clock, logger: nothing });
    actor.subscribe(quiet);
    actor.start();
    for (const step of c.steps) {
      if ('send' in step) actor.send(step.send);
      else clock.increment(step.advance);
    }
    actor.stop();
  };
  const ns = BigInt(Math.round(seconds * 1e9));
  const warm = process.hrtime.bigint() + ns / 4n;
  while (process.hrtime.bigint() < warm) round();
  let rounds = 0;
  const t0 = process.hrtime.bigint();
  const end = t0 + ns;
  let now = t0;
  while (now < end) {
    for (let i = 0; i < 16; i++) round();
    rounds += 16;
    now = process.hrtime.bigint();
  }
  const elapsed = Number(now - t0);
  const steps = c.steps.length;
  return {
    case: `${basename(dirname(c.path))}/${basename(c.path)}`,
    rounds,
    steps,
    ns_per_step: steps > 0 ? Math.round(elapsed / (rounds * steps)) : null,
    ns_per_round: Math.round(elapsed / rounds),
  };
}

const [file, secs = '2', ...rest] = process.argv.slice(2);
const seconds = Number(secs);
if (!file || rest.length > 0 || !(seconds > 0)) {
  report('usage: node bench.mjs CASE.case.json [SECONDS]');
  process.exit(2);
}
try {
  process.stdout.write(JSON.stringify(await bench(file, seconds)) + '\n');
} catch (e) {
  report(`bench: ${e.message}`);
  process.exit(1);
}
// Promise actors' outcomes still queued for stopped actors are dropped.
process.exit(0);
