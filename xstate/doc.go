// Package xstate is stategate's XState v5 compatibility layer: it turns
// the machines users already have into [interp] machines. It needs only
// the standard library and interp: a program that runs JSON machines with
// Go implementations links no JavaScript engine.
//
// It owns:
//   - the config reader: XState v5 JSON configs (as visual editors export
//     them), with diagnostics that name the file, line and state
//     ([ParseJSON], [LoadError], [Diagnostic]);
//   - the native implementation table: Go guards, actions, actors and
//     delays by name ([Registry]); a machine's names resolve from its own
//     code first, then from the registry;
//   - machine files: how they are read ([ReadFile], and [Root] for the
//     files of a machines folder), which files are machines
//     ([IsMachineFile]), and the [Loader] that loads them, JSON configs
//     itself and JavaScript or TypeScript modules through its [Modules]
//     (package xstate/js provides them);
//   - the checks the check command makes ([Loader.Check]).
//
// It behaves as the XState release named by [Version]; the conformance
// cases under testdata/conformance were recorded from it (package
// conformance runs them).
package xstate

// Version is the XState release whose behaviour this package follows.
const Version = "5.33.3"
