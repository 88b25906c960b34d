// Package workflow runs XState workflows for whoever serves them: a
// Workflow is a machine and the tools its events make (Load, New, Check);
// Instances keeps their instances in a store.Store (one event at a time
// per instance, Hold; each step under a deadline, stored with its audit
// entry before anyone sees it; timers fired on a clock; intents of bound
// calls; Subscribe for every change; the walls of each workflow: a cap on
// its instances and a rate of their creations, ErrLimit; on a
// store.Shared, replicas: every write checked against the store, the
// change feed, timers claimed from the store, other replicas' intents
// honoured, ErrBusy); a Library keeps the workflows of a
// folder of machine files, reloaded on demand, and hands each reload to
// whoever serves it.
//
// It knows nothing of MCP (package gate serves workflows as tools), of
// how files are watched (the caller calls Library.Reload), of which
// engine keeps the instances (package store's interface), nor of
// JavaScript (an xstate.Loader with a module host runs JS/TS machines).
package workflow
