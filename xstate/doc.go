// Package xstate is stategate's XState v5 compatibility layer: it turns
// the machines users already have into [interp] machines, and runs their
// code.
//
// It owns:
//   - the config reader: XState v5 JSON configs (as visual editors export
//     them) and the configs JS/TS modules build, with diagnostics that name
//     the file, line and state ([ParseJSON], [LoadError], [Diagnostic]);
//   - module loading: .js, .mjs, .ts and .mts files bundled with esbuild,
//     'xstate' resolved to a shim of its own that provides the v5 API
//     (setup, createMachine, assign, raise, sendTo, enqueueActions,
//     fromPromise, ...), any other import refused; the code runs in goja
//     runtimes taken from a pool, with a time limit on each call
//     ([Loader]);
//   - the native implementation table, Go guards, actions, actors and
//     delays by name ([Registry]); a machine's names resolve from its own
//     code first, then from the registry;
//   - the conformance runner that the trace and bench commands use
//     ([Case]), and the checks the check command makes ([Loader.Check]).
//
// It behaves as the XState release named by [Version]; the conformance
// cases under testdata/conformance were recorded from it.
package xstate

// Version is the XState release whose behaviour this package follows.
const Version = "5.33.3"
