// The 'xstate' module that stategate gives machine modules in place of the
// real XState. It only describes: every function returns plain data marked
// with __sg (the kind of thing it is), which stategate's Go engine reads and
// runs. Names and arguments follow XState v5.
const K = '__sg';

function mark(kind, fields) {
  const o = { [K]: kind };
  for (const k of Object.keys(fields)) {
    if (fields[k] !== undefined) o[k] = fields[k];
  }
  return o;
}

function merge(a, b) {
  const out = {};
  for (const part of ['guards', 'actions', 'actors', 'delays']) {
    out[part] = Object.assign({}, a && a[part], b && b[part]);
  }
  return out;
}

function machine(config, impl) {
  return {
    [K]: 'machine',
    config,
    implementations: impl,
    id: config && config.id,
    provide(more) {
      return machine(config, merge(impl, more));
    },
    transition() {
      throw new Error('stategate: machine.transition() is not available inside a machine module');
    },
  };
}

export function createMachine(config, implementations) {
  return machine(config, merge({}, implementations));
}

export function setup(options) {
  const impl = merge({}, options);
  return {
    createMachine(config) {
      return machine(config, impl);
    },
    extend(more) {
      return setup(merge(impl, more));
    },
  };
}

export function assign(assignment) { return mark('assign', { assignment }); }
export function raise(event, options) {
  return mark('raise', { event, delay: options && options.delay, id: options && options.id });
}
export function emit(event) { return mark('emit', { event }); }
export function log(value, label) { return mark('log', { value, label }); }
export function sendTo(to, event, options) {
  return mark('sendTo', { to, event, delay: options && options.delay, id: options && options.id });
}
export function sendParent(event, options) {
  return mark('sendParent', { event, delay: options && options.delay, id: options && options.id });
}
export function forwardTo(to, options) {
  return mark('forwardTo', { to, delay: options && options.delay, id: options && options.id });
}
export function cancel(id) { return mark('cancel', { id }); }
export function enqueueActions(fn) { return mark('enqueueActions', { fn }); }
export function spawnChild(src, options) {
  return mark('spawnChild', {
    src, id: options && options.id, input: options && options.input,
    systemId: options && options.systemId, syncSnapshot: options && options.syncSnapshot,
  });
}
export function stopChild(actor) { return mark('stopChild', { actor }); }
export const stop = stopChild;

export function and(guards) { return mark('and', { guards }); }
export function or(guards) { return mark('or', { guards }); }
export function not(guard) { return mark('not', { guard }); }
export function stateIn(state) { return mark('stateIn', { state }); }

export function fromPromise(creator) { return mark('promise', { creator }); }
export function fromCallback(callback) { return mark('callback', { callback }); }
export function fromTransition(transition, initialState) {
  return mark('transition', { transition, initialState });
}
export function fromObservable() {
  throw new Error('stategate: fromObservable is not supported');
}
export function fromEventObservable() {
  throw new Error('stategate: fromEventObservable is not supported');
}

export function createActor() {
  throw new Error('stategate: createActor() is not available inside a machine module; stategate runs the machine');
}
export function interpret() {
  throw new Error('stategate: interpret() is XState v4; stategate runs the machine');
}

export class SimulatedClock {}
