package interp

import (
	"context"
	"reflect"
	"slices"
	"sort"
)

// Status is an actor's status.
type Status uint8

// The statuses of XState's snapshots.
const (
	StatusActive Status = iota
	StatusDone
	StatusError
	StatusStopped
)

var statusNames = [...]string{"active", "done", "error", "stopped"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "unknown"
}

// Snapshot is an immutable state of a machine actor: its active state
// nodes, context, status, output or error, and history.
type Snapshot struct {
	Machine *Machine
	Context any
	Status  Status

	// cfg holds the active state nodes, in the order XState keeps them
	// (insertion order: entered nodes are appended) and as a set.
	cfg *config
	x   *snapExtra // nil when all its fields are zero
}

// snapExtra holds what most snapshots lack, to keep snapshots small.
type snapExtra struct {
	output  any
	err     error
	history historyValue
	// children are the running child actors by id (invoked and spawned).
	children map[string]*Actor
	// persisted are the children of a restored or detached snapshot, not
	// actors yet: an actor started from the snapshot makes them.
	persisted map[string]PersistedChild
}

var noExtra snapExtra

func (s *Snapshot) extra() *snapExtra {
	if s.x == nil {
		return &noExtra
	}
	return s.x
}

// own gives s its own copy of its extra fields, to change them; s must be
// a snapshot the caller made.
func (s *Snapshot) own() *snapExtra {
	x := &snapExtra{}
	if s.x != nil {
		*x = *s.x
	}
	s.x = x
	return x
}

func (s *Snapshot) clone() *Snapshot {
	c := *s
	return &c
}

// withStatus returns a copy of s with a status, output and error.
func (s *Snapshot) withStatus(st Status, output any, err error) *Snapshot {
	// The copy and its extra fields in one allocation.
	both := &struct {
		s Snapshot
		x snapExtra
	}{s: *s}
	if s.x != nil {
		both.x = *s.x
	}
	c := &both.s
	c.x = &both.x
	c.Status = st
	c.x.output, c.x.err = output, err
	return c
}

// Output returns the output of a machine that is done (nil when none).
func (s *Snapshot) Output() any { return s.extra().output }

// Err returns the error of a snapshot whose status is error.
func (s *Snapshot) Err() error { return s.extra().err }

func (s *Snapshot) history() historyValue { return s.extra().history }

// Nodes returns the active state nodes, in XState's order.
func (s *Snapshot) Nodes() []*StateNode { return s.cfg.nodes }

// SameStates reports whether two snapshots of one machine have the same
// active state nodes.
func (s *Snapshot) SameStates(o *Snapshot) bool {
	if s.cfg == o.cfg {
		return true
	}
	a, b := s.cfg.set, o.cfg.set
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Active reports whether the state node is active.
func (s *Snapshot) Active(n *StateNode) bool { return s.cfg.set.has(n.Order) }

// Children returns the ids of the running child actors, sorted.
func (s *Snapshot) Children() []string {
	ids := make([]string, 0, len(s.extra().children))
	for id := range s.extra().children {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Child returns the running child actor with the id, or nil.
func (s *Snapshot) Child(id string) *Actor { return s.extra().children[id] }

// Value returns the state value as XState prints it: a string for an
// atomic child of the root, else an object (map[string]any) of child keys.
func (s *Snapshot) Value() any {
	cfg := s.Machine.full(s.cfg)
	if cfg.value != nil {
		return cfg.value
	}
	return valueOf(s.Machine.Root, adjacency(cfg.nodes))
}

// adjacency lists each active node's active children in XState's order.
func adjacency(nodes []*StateNode) map[*StateNode][]*StateNode {
	adj := make(map[*StateNode][]*StateNode, len(nodes))
	for _, n := range nodes {
		if n.Parent != nil {
			adj[n.Parent] = append(adj[n.Parent], n)
		}
	}
	return adj
}

func valueOf(n *StateNode, adj map[*StateNode][]*StateNode) any {
	kids := adj[n]
	if n.Type == Compound && len(kids) > 0 {
		if k := kids[0]; k.Type == Atomic || k.Type == Final {
			return k.Key
		}
	}
	v := make(map[string]any, len(kids))
	for _, k := range kids {
		v[k.Key] = valueOf(k, adj)
	}
	return v
}

// Tags returns the tags of the active state nodes, sorted, without
// duplicates.
func (s *Snapshot) Tags() []string {
	var tags []string
	for _, n := range s.Nodes() { // as they are, not completed (see Machine.full)
		tags = append(tags, n.Tags...)
	}
	sort.Strings(tags)
	return slices.Compact(tags)
}

// HasTag reports whether an active state node has the tag.
func (s *Snapshot) HasTag(tag string) bool {
	for _, n := range s.Nodes() { // as they are, not completed (see Machine.full)
		if slices.Contains(n.Tags, tag) {
			return true
		}
	}
	return false
}

// Matches reports whether the snapshot is in the state value: a dotted
// path ("a.b") or a (partial) value object, as XState's matches().
func (s *Snapshot) Matches(value any) bool {
	return matchesState(toStateValue(value), s.Value())
}

func toStateValue(v any) any {
	str, ok := v.(string)
	if !ok {
		return v
	}
	parts := splitPath(str)
	var out any = parts[len(parts)-1]
	for i := len(parts) - 2; i >= 0; i-- {
		out = map[string]any{parts[i]: out}
	}
	return out
}

func matchesState(parent, child any) bool {
	cs, childIsString := child.(string)
	ps, parentIsString := parent.(string)
	if childIsString {
		return parentIsString && cs == ps
	}
	cm, _ := child.(map[string]any)
	if parentIsString {
		_, ok := cm[ps]
		return ok
	}
	pm, ok := parent.(map[string]any)
	if !ok {
		return false
	}
	for k, pv := range pm {
		cv, ok := cm[k]
		if !ok || !matchesState(toStateValue(pv), cv) {
			return false
		}
	}
	return true
}

// HistoryValue returns the recorded history: history node id to the ids
// of the state nodes it restores.
func (s *Snapshot) HistoryValue() map[string][]string {
	out := map[string][]string{}
	for _, n := range s.Machine.Nodes {
		if ns, ok := s.history().get(n); ok && n.Type == History {
			ids := make([]string, len(ns))
			for i, x := range ns {
				ids[i] = x.ID
			}
			out[n.ID] = ids
		}
	}
	return out
}

// Can reports whether the snapshot would take the event: a transition is
// selected and it has a target or actions (XState's snapshot.can). The
// status is not looked at, as in XState. A guard that fails gives an error.
func (s *Snapshot) Can(ev Event) (bool, error) {
	var t Thread
	if h := s.Machine.Impl.Host; h != nil {
		t = h.Acquire(context.Background())
		defer t.Release()
	}
	return s.CanIn(t, ev)
}

// CanIn is Can with the machine's code run in t, a thread its Host lent
// (that of a step in progress, whose code asks).
func (s *Snapshot) CanIn(t Thread, ev Event) (bool, error) {
	st := &stepper{m: s.Machine, thread: t}
	ts, err := st.selectTransitions(s, ev)
	if err != nil {
		return false, err
	}
	for _, t := range ts {
		if t.HasTarget || len(t.Actions) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// sameValue reports whether two contexts are the same value: the same map,
// or equal scalars.
func sameValue(a, b any) bool {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok || bok {
		return aok && bok && len(am) == len(bm) && (len(am) == 0 || reflect.ValueOf(am).UnsafePointer() == reflect.ValueOf(bm).UnsafePointer())
	}
	defer func() { _ = recover() }()
	return a == b
}

// Candidates returns the transitions an event has in a snapshot's active
// states, innermost states first (wildcards aside): when Can says no,
// the guards of these are the ones that said no.
func (s *Snapshot) Candidates(event string) []*Transition {
	var out []*Transition
	nodes := s.cfg.nodes
	for i := len(nodes) - 1; i >= 0; i-- {
		out = append(out, nodes[i].transitions[event]...)
	}
	return out
}
