// Runs a conformance case with the real XState and prints its trace:
//   node trace.mjs CASE.case.json > CASE.trace.json
// (scripts/oracle.sh installs XState and runs this). The trace holds, after
// the start and after each step, once the actor has settled (promises
// resolved, raised and eventless transitions taken; the clock is XState's
// SimulatedClock, so no timer runs unless a step advances it): the state
// value, context, status, sorted tags, the sorted event types that
// snapshot.can() accepts (a guard that throws counts as no), the events
// emitted since the step before, and the output (done) or the error's
// message (error).
import { createActor, SimulatedClock } from 'xstate';
import { eventTypes, loadMachine, readCase } from './case.mjs';

// stdout is the trace: what a machine writes with console.log goes to
// stderr, as console.warn and console.error do, and so do log actions.
console.log = console.info = console.debug = console.error;

// A macrotask runs only once every microtask has: every promise settled.
const settle = () => new Promise((r) => setTimeout(r, 0));

async function trace(path) {
  const c = readCase(path);
  const machine = await loadMachine(c);
  const types = eventTypes(machine);
  const clock = new SimulatedClock();
  const actor = createActor(machine, {
    input: c.input,
    clock,
    logger: console.error,
  });
  let emitted = [];
  actor.on('*', (e) => emitted.push(e));
  actor.subscribe({ error() {} }); // the error is in the snapshot; nothing unhandled
  const view = (step) => {
    const s = actor.getSnapshot();
    const v = {
      step,
      value: s.value,
      context: s.context ?? null,
      status: s.status,
      tags: [...s.tags].sort(),
      enabled: types.filter((type) => {
        try {
          return s.can({ type });
        } catch {
          return false;
        }
      }),
      emitted,
    };
    if (s.status === 'done') v.output = s.output ?? null;
    if (s.status === 'error') v.error = String(s.error?.message ?? s.error);
    emitted = [];
    // As JSON now: code that changes its context in place must not
    // change what an earlier step showed.
    return JSON.parse(JSON.stringify(v));
  };
  actor.start();
  await settle();
  const steps = [view('start')];
  for (const step of c.steps) {
    if ('send' in step) {
      actor.send(step.send);
      await settle();
      steps.push(view({ send: step.send }));
    } else {
      clock.increment(step.advance);
      await settle();
      steps.push(view({ advance: step.advance }));
    }
  }
  actor.stop();
  return { case: c.description, steps };
}

const files = process.argv.slice(2);
if (files.length !== 1) {
  console.error('usage: node trace.mjs CASE.case.json');
  process.exit(2);
}
try {
  process.stdout.write(JSON.stringify(await trace(files[0]), null, 2) + '\n');
} catch (e) {
  console.error(`trace: ${e.message}`);
  process.exit(1);
}
