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
export function fromObservable(creator) { return mark('observable', { creator }); }
export function fromEventObservable(creator) { return mark('eventObservable', { creator }); }

// assertEvent throws unless the event's type matches one of the given
// descriptors (wildcards as in transitions), as XState's does; code calls it
// to narrow an event's type in TypeScript.
export function assertEvent(event, type) {
  const types = Array.isArray(type) ? type : [type];
  if (!types.some((d) => matchesEventDescriptor(event.type, d))) {
    const typesText = types.length === 1 ? `type matching "${types[0]}"` : `one of types matching "${types.join('", "')}"`;
    throw new Error(`Expected event ${JSON.stringify(event)} to have ${typesText}`);
  }
}

function matchesEventDescriptor(eventType, descriptor) {
  if (descriptor === eventType || descriptor === '*') return true;
  if (!descriptor.endsWith('.*')) return false;
  const partial = descriptor.split('.');
  const tokens = eventType.split('.');
  for (let i = 0; i < partial.length; i++) {
    if (partial[i] === '*') return i === partial.length - 1;
    if (partial[i] !== tokens[i]) return false;
  }
  return true;
}

// matchesState and pathToStateValue are XState's pure helpers on state
// values ('a.b' or {a: 'b'}).
export function matchesState(parentStateId, childStateId) {
  const parent = toStateValue(parentStateId);
  const child = toStateValue(childStateId);
  if (typeof child === 'string') {
    return typeof parent === 'string' && child === parent;
  }
  if (typeof parent === 'string') return parent in child;
  return Object.keys(parent).every((key) => key in child && matchesState(parent[key], child[key]));
}

function toStateValue(v) {
  if (v && typeof v === 'object' && 'value' in v && typeof v.matches === 'function') return v.value;
  if (typeof v !== 'string') return v;
  const path = [];
  let segment = '';
  for (let i = 0; i < v.length; i++) {
    if (v[i] === '\\') { segment += v[i + 1]; i++; continue; }
    if (v[i] === '.') { path.push(segment); segment = ''; continue; }
    segment += v[i];
  }
  path.push(segment);
  return pathToStateValue(path);
}

export function pathToStateValue(statePath) {
  if (statePath.length === 1) return statePath[0];
  const value = {};
  let marker = value;
  for (let i = 0; i < statePath.length - 1; i++) {
    if (i === statePath.length - 2) {
      marker[statePath[i]] = statePath[i + 1];
    } else {
      const next = {};
      marker[statePath[i]] = next;
      marker = next;
    }
  }
  return value;
}

export const SpecialTargets = { Parent: '#_parent', Internal: '#_internal' };

// What runs actors is stategate's: a module may import these (a file that
// also holds code to run its machine), but calling them fails clearly.
function runsActors(name) {
  return function () {
    throw new Error(`stategate: ${name}() is not available inside a machine module; stategate runs the machine`);
  };
}
export const createEmptyActor = runsActors('createEmptyActor');
export const waitFor = runsActors('waitFor');
export const toPromise = runsActors('toPromise');
export const getInitialSnapshot = runsActors('getInitialSnapshot');
export const getNextSnapshot = runsActors('getNextSnapshot');
export const transition = runsActors('transition');
export const initialTransition = runsActors('initialTransition');
export const getMicrosteps = runsActors('getMicrosteps');
export const getInitialMicrosteps = runsActors('getInitialMicrosteps');
export const getNextTransitions = runsActors('getNextTransitions');
export const getStateNodes = runsActors('getStateNodes');
export const isMachineSnapshot = runsActors('isMachineSnapshot');
export const mapState = runsActors('mapState');
export const toObserver = runsActors('toObserver');
export const __unsafe_getAllOwnEventDescriptors = runsActors('__unsafe_getAllOwnEventDescriptors');
export class Actor { constructor() { runsActors('new Actor')(); } }
export class StateMachine { constructor() { runsActors('new StateMachine')(); } }
export class StateNode { constructor() { runsActors('new StateNode')(); } }

export function createActor() {
  throw new Error('stategate: createActor() is not available inside a machine module; stategate runs the machine');
}
export function interpret() {
  throw new Error('stategate: interpret() is XState v4; stategate runs the machine');
}

export class SimulatedClock {}
