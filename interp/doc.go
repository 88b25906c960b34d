// Package interp is stategate's statechart engine: it runs XState v5 machines
// with XState's own semantics, natively in Go.
//
// It owns the machine model (a [MachineDef] of [StateDef]s compiled by [New]
// into an indexed [Machine]), the pure transition function (microsteps and
// macrosteps, in the order of XState's stateUtils), snapshots and their
// persisted JSON form (child actors included, as XState persists them),
// [Snapshot.Can], and an [Actor] that drives a machine on a [Clock] with a
// scheduler for delayed events, whose pending timers (its children's too)
// can be restored with a snapshot.
//
// interp knows nothing of JavaScript, MCP or disks. Guards, actions, actors
// and delays are Go values ([Guard], [Action], [ActorLogic], [Delay]); the
// xstate package builds them from JSON configs, from JS modules run in goja,
// or from a table of Go functions.
package interp
