// Package js runs the JavaScript and TypeScript machines of XState v5 for
// package xstate: a [Host] is the Modules of an xstate.Loader.
//
// It owns:
//   - module loading: .js, .mjs, .ts and .mts files bundled with esbuild,
//     each file read through the Loader's xstate.Root; 'xstate' resolves
//     to a shim of its own that provides the v5 API (setup,
//     createMachine, assign, raise, sendTo, enqueueActions, fromPromise,
//     ...), and any other import is refused;
//   - diagnostics in the files written: a config's problems placed at
//     their keys through the bundle's source map (jslocate.go), and
//     warnings of the globals machine code uses but does not have, such
//     as fetch and setTimeout (jsio.go);
//   - the runtime: the code runs in goja runtimes taken from a pool, one
//     per step (a runtime is the step's interp.Thread), with the module's
//     functions made into interp guards, actions, expressions and actor
//     logic, and the values that cross between Go and JavaScript
//     converted once;
//   - the sandbox: a watchdog that interrupts a call past its time limit,
//     its memory budget or its step's end, built-ins bounded in what they
//     make, and regular expressions matched by the sandbox under the same
//     bounds (no file, network or timer access; Intl.NumberFormat for
//     en-US);
//   - the walls between instances: every event sees a module as it was
//     right after it loaded (the built-ins frozen before it runs, what it
//     made at load frozen after, the variables and collections it changes
//     put back when the event's runtime is released), and no host helper
//     is a global (jsharden.go, jsscope.go).
//
// It knows nothing of instances, stores or MCP: a step's actor tree and
// context come from interp, which runs the machines.
package js
