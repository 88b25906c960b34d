package xstate

import (
	"maps"

	"github.com/stategate/stategate/interp"
)

// Registry is a table of named implementations written in Go: guards,
// actions, actors and delays that machines name, so that a JSON machine
// runs with no JavaScript at all. A Loader resolves a machine's names from
// the machine's own code first (setup() or createMachine's second
// argument, or a NAME.impl.ts beside a JSON machine), then from its
// Registry. A Registry is filled before it is used and not changed after.
type Registry struct {
	impl interp.Implementations
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{} }

// Guard registers a guard: f gets the ({context, event}) argument and the
// guard's params.
func (r *Registry) Guard(name string, f func(a interp.Args, params any) (bool, error)) *Registry {
	if r.impl.Guards == nil {
		r.impl.Guards = map[string]interp.Guard{}
	}
	r.impl.Guards[name] = &interp.FuncGuard{Name: name, Fn: func(a interp.Args, p any) (bool, error) { return f(plainArgs(a), plainValue(a, p)) }}
	return r
}

// Action registers an action run for its effects.
func (r *Registry) Action(name string, f func(a interp.Args, params any) error) *Registry {
	return r.ActionOf(name, &interp.FuncAction{Name: name, Fn: func(a interp.Args, p any) error { return f(plainArgs(a), plainValue(a, p)) }})
}

// Assign registers an action that updates the context, as XState's
// assign(): f returns the properties to change.
func (r *Registry) Assign(name string, f func(a interp.Args, params any) (map[string]any, error)) *Registry {
	return r.ActionOf(name, &interp.AssignAction{Fn: func(a interp.Args, p any) (map[string]any, error) { return f(plainArgs(a), plainValue(a, p)) }})
}

// ActionOf registers any action (a built-in such as interp.RaiseAction).
func (r *Registry) ActionOf(name string, a interp.Action) *Registry {
	if r.impl.Actions == nil {
		r.impl.Actions = map[string]interp.Action{}
	}
	r.impl.Actions[name] = a
	return r
}

// Actor registers actor logic (interp.PromiseLogic and the like).
func (r *Registry) Actor(name string, logic interp.ActorLogic) *Registry {
	if r.impl.Actors == nil {
		r.impl.Actors = map[string]interp.ActorLogic{}
	}
	r.impl.Actors[name] = logic
	return r
}

// Delay registers a named delay computed from the context and event.
func (r *Registry) Delay(name string, f func(a interp.Args, params any) (float64, error)) *Registry {
	if r.impl.Delays == nil {
		r.impl.Delays = map[string]interp.Delay{}
	}
	r.impl.Delays[name] = &interp.Expr{Fn: func(a interp.Args, params any) (any, error) { return f(plainArgs(a), plainValue(a, params)) }}
	return r
}

// DelayMs registers a named delay of a fixed number of milliseconds.
func (r *Registry) DelayMs(name string, ms float64) *Registry {
	if r.impl.Delays == nil {
		r.impl.Delays = map[string]interp.Delay{}
	}
	r.impl.Delays[name] = interp.Static(ms)
	return r
}

// PlainValues is an interp.Thread whose code may leave values of its own
// in a step's context and params, converted only as the step ends (a
// JavaScript runtime's objects): Plain returns v with none of them left,
// for Go code, changing nothing in place. A Registry's functions get their
// arguments so, when a machine's own code runs in such threads.
type PlainValues interface {
	interp.Thread
	Plain(v any) any
}

// plainArgs returns a with a context that holds no values of the step's
// thread.
func plainArgs(a interp.Args) interp.Args {
	if p, ok := a.Thread.(PlainValues); ok {
		a.Context = p.Plain(a.Context)
	}
	return a
}

// plainValue returns params that are no value of the step's thread.
func plainValue(a interp.Args, params any) any {
	if p, ok := a.Thread.(PlainValues); ok {
		return p.Plain(params)
	}
	return params
}

func (r *Registry) implementations() interp.Implementations {
	return interp.Implementations{
		Guards:  maps.Clone(r.impl.Guards),
		Actions: maps.Clone(r.impl.Actions),
		Actors:  maps.Clone(r.impl.Actors),
		Delays:  maps.Clone(r.impl.Delays),
	}
}
