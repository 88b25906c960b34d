// Package js runs the JavaScript and TypeScript machines of XState v5 for
// package xstate: a [Host] is the Modules of an xstate.Loader.
//
// It owns:
//   - module loading: .js, .mjs, .ts and .mts files bundled with esbuild,
//     each file read through the Loader's xstate.Root; 'xstate' resolves
//     to a shim of its own that provides the v5 API (setup,
//     createMachine, assign, raise, sendTo, enqueueActions, fromPromise,
//     ...), and any other import is refused;
//   - the runtime: the code runs in goja runtimes taken from a pool, one
//     per step (a runtime is the step's interp.Thread), with the module's
//     functions made into interp guards, actions, expressions and actor
//     logic, and the values that cross between Go and JavaScript
//     converted once;
//   - the sandbox: a watchdog that interrupts a call past its time limit
//     or its memory budget, and built-ins bounded in what they make (no
//     file, network or timer access; Intl.NumberFormat for en-US).
package js
