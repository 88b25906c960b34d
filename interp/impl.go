package interp

import "maps"

// Event is an XState event: a type and its other fields.
type Event struct {
	Type string
	// Data holds the event's fields other than "type" (nil when none). It
	// is shared, never modified.
	Data map[string]any
	// probe, when set, records reads of the event's fields (Get).
	probe *Probe
}

// Probe records whether code read a field of an event other than its type:
// a guard that did depends on the payload. Guards written in Go read fields
// with Event.Get for it to see them; JavaScript guards are seen through a
// Proxy.
type Probe struct{ read bool }

// Read reports whether a field other than the type was read.
func (p *Probe) Read() bool { return p != nil && p.read }

// ProbeEvent returns an event of a type with no payload whose field reads
// are recorded in the returned Probe.
func ProbeEvent(typ string) (Event, *Probe) {
	p := &Probe{}
	return Event{Type: typ, probe: p}, p
}

// Probe returns the event's probe, nil for an ordinary event.
func (e Event) Probe() *Probe { return e.probe }

// Get returns a field of the event ("type" included), noting the read when
// the event is probed.
func (e Event) Get(field string) any {
	if field == "type" {
		return e.Type
	}
	if e.probe != nil {
		e.probe.read = true
	}
	return e.Data[field]
}

// Object returns the event as one JSON-like object, "type" included.
func (e Event) Object() map[string]any {
	m := make(map[string]any, len(e.Data)+1)
	maps.Copy(m, e.Data)
	m["type"] = e.Type
	return m
}

// EventFromObject splits a JSON-like event object into an Event. It reports
// false when the object has no string "type".
func EventFromObject(m map[string]any) (Event, bool) {
	t, ok := m["type"].(string)
	if !ok {
		return Event{}, false
	}
	if len(m) == 1 {
		return Event{Type: t}, true
	}
	data := make(map[string]any, len(m)-1)
	for k, v := range m {
		if k != "type" {
			data[k] = v
		}
	}
	return Event{Type: t, Data: data}, true
}

// Args is what guards, actions and expressions receive: XState's
// ({context, event, self}) argument.
type Args struct {
	Context any
	Event   Event
	// Input is the actor's input, for context and invoke-input functions.
	Input any
	// Self is the running actor, when there is one.
	Self *Actor
	// Snapshot is the snapshot being evaluated; nil outside transitions.
	Snapshot *Snapshot
	// Thread is what the machine's Host lent the step (a JavaScript
	// runtime), nil for a machine with no Host.
	Thread Thread
	// Spawner, given to an assign's function and to a context function,
	// starts children at run time (XState's spawn).
	Spawner Spawner
}

// Spawner starts a child as spawnChild does and returns it: a child of
// logic, or when logic is nil, of the machine's actor named src
// (Implementations.Actors). A child of inline logic (src "") is not
// persisted by name.
type Spawner interface {
	Spawn(src string, logic ActorLogic, opts SpawnOptions) (*Actor, error)
}

// SpawnOptions are the options of a Spawner's Spawn.
type SpawnOptions struct {
	ID           string
	Input        any
	SystemID     string
	SyncSnapshot bool
}

// Expr is a value that is either static or computed from Args and params,
// as XState allows for params, events, delays, context and output.
type Expr struct {
	Value any
	Fn    func(a Args, params any) (any, error)
}

// Static returns an Expr with a fixed value.
func Static(v any) *Expr { return &Expr{Value: v} }

// Eval computes the expression.
func (e *Expr) Eval(a Args, params any) (any, error) {
	if e == nil {
		return nil, nil
	}
	if e.Fn != nil {
		return e.Fn(a, params)
	}
	return e.Value, nil
}

// Guard is a condition on a transition: NamedGuard, FuncGuard, AndGuard,
// OrGuard, NotGuard or StateInGuard.
type Guard interface{ guardType() string }

// NamedGuard names a guard of the machine's implementations, with params.
type NamedGuard struct {
	Type   string
	Params *Expr
}

// FuncGuard is a guard implemented by a function. Name is "" for an inline
// guard.
type FuncGuard struct {
	Name string
	Fn   func(a Args, params any) (bool, error)
}

// AndGuard holds when every guard holds (XState's and()).
type AndGuard struct{ Guards []Guard }

// OrGuard holds when any guard holds (XState's or()).
type OrGuard struct{ Guards []Guard }

// NotGuard holds when its guard does not (XState's not()).
type NotGuard struct{ Guard Guard }

// StateInGuard holds when the snapshot matches a state: a "#id" or a state
// value (XState's stateIn()).
type StateInGuard struct{ State any }

func (g *NamedGuard) guardType() string   { return g.Type }
func (g *FuncGuard) guardType() string    { return g.Name }
func (g *AndGuard) guardType() string     { return "xstate.and" }
func (g *OrGuard) guardType() string      { return "xstate.or" }
func (g *NotGuard) guardType() string     { return "xstate.not" }
func (g *StateInGuard) guardType() string { return "xstate.stateIn" }

// Delay is a named delay's implementation: a number of milliseconds, static
// or computed.
type Delay = *Expr

// Implementations are a machine's named guards, actions, actors and delays.
type Implementations struct {
	Guards  map[string]Guard
	Actions map[string]Action
	Actors  map[string]ActorLogic
	Delays  map[string]Delay
	// Host lends the implementations' code a thread to run in (a
	// JavaScript runtime for implementations written in JS); nil for Go
	// code.
	Host Host
}

// merge returns impl with other's entries added over it.
func (impl Implementations) merge(other Implementations) Implementations {
	host := impl.Host
	if other.Host != nil {
		host = other.Host
	}
	return Implementations{
		Guards:  mergeMap(impl.Guards, other.Guards),
		Actions: mergeMap(impl.Actions, other.Actions),
		Actors:  mergeMap(impl.Actors, other.Actors),
		Delays:  mergeMap(impl.Delays, other.Delays),
		Host:    host,
	}
}

func mergeMap[V any](a, b map[string]V) map[string]V {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	m := make(map[string]V, len(a)+len(b))
	maps.Copy(m, a)
	maps.Copy(m, b)
	return m
}
