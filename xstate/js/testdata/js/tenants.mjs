import { assign, raise, setup } from 'xstate';

// A module written as if it served one client. Each instance of it is
// another client's: what one instance's event leaves in the module's
// variables, in what the module made at load or in the built-ins must not
// reach another instance's event.
let lastUser = null;
const seen = new Map();
const config = { limit: 3 };
const tagged = new WeakSet();
// An object no property leads to, but a bound function keeps.
const note = (function () { return this; }).bind({ text: 'as loaded' });

// A deep merge, as naive as many: a "__proto__" key in its source walks
// into Object.prototype.
function merge(target, source) {
  for (const key of Object.keys(source)) {
    const v = source[key];
    if (v && typeof v === 'object') {
      if (!target[key] || typeof target[key] !== 'object') target[key] = {};
      merge(target[key], v);
    } else {
      target[key] = v;
    }
  }
  return target;
}

const hostGlobals = () => Object.getOwnPropertyNames(globalThis).filter((n) => n.startsWith('__sg') || n === 'GoError');

class DomainError extends Error {
  constructor(message) {
    super(message);
    this.name = 'DomainError';
  }
}

export default setup({
  actions: { bump: (_, params) => { params.n += 1; } },
}).createMachine({
  id: 'tenants',
  initial: 'idle',
  context: { settings: {}, found: null },
  states: {
    idle: {
      on: {
        POLLUTE: { actions: () => { Object.prototype.isAdmin = true; } },
        MERGE: { actions: assign({ settings: ({ event }) => merge({}, JSON.parse(event.json)) }) },
        REMEMBER: { actions: ({ event }) => { lastUser = event.user; seen.set(event.user, true); } },
        // Within one event, what an action changed is there for the guards
        // after it.
        REMEMBER_AND_CHECK: {
          actions: [({ event }) => { lastUser = event.user; }, raise(({ event }) => ({ type: 'SAME_USER', user: event.user }))],
        },
        RAISE_LIMIT: { actions: () => { config.limit = 100; } },
        ADMIN: { guard: () => ({}).isAdmin === true, target: 'admin' },
        SAME_USER: { guard: ({ event }) => lastUser === event.user, target: 'same' },
        SEEN_USER: { guard: ({ event }) => seen.has(event.user), target: 'same' },
        LIMIT: { guard: () => config.limit !== 3, target: 'raised' },
        // An event without data: the first instance marks it, the second
        // must not find the mark.
        PROBE: [
          { guard: ({ event }) => event.marked === true, target: 'marked' },
          { actions: ({ event }) => { event.marked = true; } },
        ],
        // The event object of an event without data is the runtime's, for
        // every instance: a WeakSet made at load must not carry it over.
        TAG: [
          { guard: ({ event }) => tagged.has(event), target: 'marked' },
          { actions: ({ event }) => { tagged.add(event); } },
        ],
        SCRIBBLE: { actions: () => { note().text = 'scribbled'; } },
        NOTE: { guard: () => note().text !== 'as loaded', target: 'marked' },
        // Static params are the module's, made at load: frozen.
        BUMP: { actions: { type: 'bump', params: { n: 1 } } },
        GLOBALS: {
          guard: () => hostGlobals().length === 0 && typeof __sgXState === 'undefined' && typeof __sgModule === 'undefined'
            && typeof __sgSpread === 'undefined' && typeof GoError === 'undefined',
          target: 'clean',
        },
        ERROR_NAME: {
          actions: assign({ found: () => { const e = new DomainError('no'); return `${e.name}: ${e.message} ${e instanceof Error}`; } }),
        },
      },
    },
    admin: {},
    same: {},
    raised: {},
    marked: {},
    clean: {},
  },
});
