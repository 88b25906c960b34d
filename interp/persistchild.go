package interp

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/stategate/stategate/internal/jsonenc"
)

// Child actors across persistence, as XState persists them: a snapshot's
// children are written with their own snapshots and the names of their
// logic; an actor started from a restored snapshot makes them again and
// starts those still active: a child machine resumes where it was (no
// entry action runs again), a callback actor's function and an active
// promise's creator run again, a transition actor keeps its context.

// persistChildren writes the snapshot's children into out.
func (s *Snapshot) persistChildren(out map[string]PersistedChild) error {
	x := s.extra()
	maps.Copy(out, x.persisted)
	for id, c := range x.children {
		if c == nil || c.src == "" {
			continue // no logic, or inline logic: nothing to restore it from
		}
		pc, err := c.persist()
		if err != nil {
			return err
		}
		out[id] = pc
	}
	return nil
}

// persist returns a child actor as its parent's persisted snapshot holds
// it.
func (a *Actor) persist() (PersistedChild, error) {
	pc := PersistedChild{Src: a.src, SystemID: a.systemID, SyncSnapshot: a.sync}
	var err error
	if a.m != nil {
		pc.Snapshot, err = a.snap.MarshalJSON()
		return pc, err
	}
	v := map[string]any{"status": a.status.String()}
	switch a.logic.(type) {
	case *TransitionLogic:
		v["context"] = a.state
	case *ObservableLogic:
		if a.state != nil {
			v["context"] = a.state // an event observable's stays undefined
		}
		if a.input != nil && a.status == StatusActive {
			v["input"] = a.input // to subscribe again
		}
	default:
		// A promise's or callback's, to run it again while active (XState
		// drops a settled promise's).
		if a.input != nil && a.status == StatusActive {
			v["input"] = a.input
		}
	}
	switch a.status {
	case StatusDone:
		v["output"] = a.output
	case StatusError:
		if a.err != nil {
			v["error"] = a.err.Error()
		}
	}
	pc.Snapshot, err = jsonenc.Append(nil, v)
	return pc, err
}

// Detach returns the snapshot with its child actors replaced by their
// persisted snapshots, as Restore makes them: a copy that does not change
// when the actor that made it goes on or stops (its children stop with
// it). An actor started from it makes children of its own.
func (s *Snapshot) Detach() (*Snapshot, error) {
	if len(s.extra().children) == 0 {
		return s, nil
	}
	recs := map[string]PersistedChild{}
	if err := s.persistChildren(recs); err != nil {
		return nil, err
	}
	d := s.clone()
	x := d.own()
	x.children, x.persisted = nil, nil
	if len(recs) > 0 {
		x.persisted = recs
	}
	return d, nil
}

// adoptRestored makes the actor's children from the persisted children of
// the snapshot it starts from (and of a snapshot still holding actors, as
// they would be persisted), each an actor of its own.
func (a *Actor) adoptRestored() {
	x := a.snap.extra()
	if len(x.children) == 0 && len(x.persisted) == 0 {
		return
	}
	recs := map[string]PersistedChild{}
	if err := a.snap.persistChildren(recs); err != nil {
		recs = maps.Clone(x.persisted)
	}
	s := a.snap.clone()
	own := s.own()
	own.children, own.persisted = nil, nil
	for _, id := range slices.Sorted(maps.Keys(recs)) {
		if c := a.restoreChild(id, recs[id]); c != nil {
			if own.children == nil {
				own.children = map[string]*Actor{}
			}
			own.children[id] = c
		}
	}
	a.snap = s
}

// restoreChild makes a child from its persisted form, or returns nil when
// its logic cannot be found (as XState skips it).
func (a *Actor) restoreChild(id string, pc PersistedChild) *Actor {
	logic := a.m.childLogic(pc.Src)
	if logic == nil {
		return nil
	}
	c := &Actor{ID: id, parent: a, sync: pc.SyncSnapshot, src: pc.Src, clock: a.clock}
	c.opts.OnLog = a.opts.OnLog
	c.opts.HoldPromises = a.opts.HoldPromises
	c.opts.Context = a.opts.Context
	if l, ok := logic.(*MachineLogic); ok {
		var p Persisted
		if err := json.Unmarshal(pc.Snapshot, &p); err != nil {
			return nil
		}
		s, err := l.Machine.Restore(&p)
		if err != nil {
			return nil
		}
		c.m, c.opts.Snapshot = l.Machine, s
		c.init()
	} else {
		var st struct {
			Status  string `json:"status"`
			Input   any    `json:"input"`
			Output  any    `json:"output"`
			Error   any    `json:"error"`
			Context any    `json:"context"`
		}
		if err := json.Unmarshal(pc.Snapshot, &st); err != nil {
			return nil
		}
		status, ok := parseStatus(st.Status)
		if !ok {
			return nil
		}
		c.logic, c.status, c.input, c.output, c.state = logic, status, st.Input, st.Output, st.Context
		if status == StatusError {
			c.err = &ThrownError{Value: st.Error}
		}
	}
	if pc.SystemID != "" {
		_ = c.register(pc.SystemID)
	}
	return c
}

// startRestored starts the children an actor made from a restored
// snapshot that are still active, as XState's machine logic does when it
// starts.
func (a *Actor) startRestored() {
	s := a.snap
	for _, id := range s.Children() {
		if c := s.Child(id); c != nil && c.Status() == StatusActive {
			c.Start()
		}
	}
}

// childLogic finds the logic a persisted child names: a named actor of
// the implementations, or the inline logic of an invoke
// (xstate.invoke.INDEX.NODE_ID, as XState's resolveReferencedActor).
func (m *Machine) childLogic(src string) ActorLogic {
	if l := m.Impl.Actors[src]; l != nil {
		return l
	}
	rest, ok := strings.CutPrefix(src, "xstate.invoke.")
	if !ok {
		return nil
	}
	idx, nodeID, _ := strings.Cut(rest, ".")
	i, err := strconv.Atoi(idx)
	n := m.byID[nodeID]
	if err != nil || n == nil || i < 0 || i >= len(n.Invoke) {
		return nil
	}
	if inv := n.Invoke[i]; inv.Logic != nil {
		return inv.Logic
	}
	return nil
}
