package interp

import "sort"

// Unresolved is a named implementation a machine refers to and does not
// have.
type Unresolved struct {
	Kind  string // "guard", "action", "actor" or "delay"
	Name  string
	State string // the path of the state that refers to it
	// File, Line and Column say where the machine's source names it,
	// when its definition said (MachineDef.Where): File is "" for the
	// machine's own file, Line and Column 0 when unknown.
	File         string
	Line, Column int
}

// Unresolved lists the named guards, actions, actors and delays that the
// machine's states refer to and its implementations lack, in document
// order, each name once per state.
func (m *Machine) Unresolved() []Unresolved {
	var out []Unresolved
	seen := map[Unresolved]bool{}
	add := func(n *StateNode, kind, name string) {
		u := Unresolved{Kind: kind, Name: name, State: n.PathString()}
		if !seen[u] {
			seen[u] = true
			if m.where != nil {
				u.File, u.Line, u.Column = m.where(kind, name, u.State)
			}
			out = append(out, u)
		}
	}
	var guard func(n *StateNode, g Guard)
	guard = func(n *StateNode, g Guard) {
		switch g := g.(type) {
		case *NamedGuard:
			if m.Impl.Guards[g.Type] == nil {
				add(n, "guard", g.Type)
			}
		case *AndGuard:
			for _, c := range g.Guards {
				guard(n, c)
			}
		case *OrGuard:
			for _, c := range g.Guards {
				guard(n, c)
			}
		case *NotGuard:
			guard(n, g.Guard)
		}
	}
	actions := func(n *StateNode, as []Action) {
		for _, a := range as {
			switch a := a.(type) {
			case *NamedAction:
				if m.Impl.Actions[a.Type] == nil {
					add(n, "action", a.Type)
				}
			case *RaiseAction:
				if a.DelayName != "" && m.Impl.Delays[a.DelayName] == nil {
					add(n, "delay", a.DelayName)
				}
			case *SendToAction:
				if a.DelayName != "" && m.Impl.Delays[a.DelayName] == nil {
					add(n, "delay", a.DelayName)
				}
			case *SpawnAction:
				if a.Logic == nil && m.Impl.Actors[a.Src] == nil {
					add(n, "actor", a.Src)
				}
			}
		}
	}
	transitions := func(n *StateNode, ts []*Transition) {
		for _, t := range ts {
			if t.Guard != nil {
				guard(n, t.Guard)
			}
			actions(n, t.Actions)
		}
	}
	for _, n := range m.Nodes {
		actions(n, n.Entry)
		actions(n, n.Exit)
		descs := make([]string, 0, len(n.transitions))
		for d := range n.transitions {
			descs = append(descs, d)
		}
		sort.Strings(descs)
		for _, d := range descs {
			transitions(n, n.transitions[d])
		}
		transitions(n, n.Always)
		for _, inv := range n.Invoke {
			if inv.Logic == nil && m.Impl.Actors[inv.Src] == nil {
				add(n, "actor", inv.Src)
			}
		}
	}
	return out
}
