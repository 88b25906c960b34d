package interp

import (
	"errors"
	"fmt"
	"strings"
)

// This file is the transition algorithm. It follows XState v5's stateUtils
// step by step (macrostep, microstep, selectTransitions,
// selectEventlessTransitions, removeConflictingTransitions, computeExitSet,
// computeEntrySet, exitStates, enterStates), on bitsets of state nodes.

// EventInit is the type of the event that starts an actor.
const EventInit = "xstate.init"

// EffectKind is the kind of an Effect.
type EffectKind uint8

// The kinds of effects a step leaves for its actor to carry out.
const (
	EffectExec     EffectKind = iota // run a deferred custom action
	EffectSchedule                   // schedule a delayed event
	EffectCancel                     // cancel a delayed event
	EffectEmit                       // emit an event to listeners
	EffectLog                        // log a value
	EffectSend                       // deliver an event to another actor
	EffectStart                      // start a child actor
	EffectStop                       // stop a child actor
)

// Effect is what a step leaves for the actor to do once the step is
// computed, in order (XState's deferred actions): timers, emitted events,
// messages to other actors, and custom actions of a starting actor.
type Effect struct {
	Kind  EffectKind
	ID    string  // a scheduled event's id
	Event Event   // the event to schedule, emit or send
	Delay float64 // milliseconds, for EffectSchedule
	Value any     // a logged value
	Label string  // a log label
	// To is the receiving actor of EffectSend and EffectSchedule
	// (nil: the actor itself), the child of EffectStart and EffectStop.
	To   *Actor
	exec func() error
}

// stepper carries what one macrostep needs besides the snapshot: the actor
// scope (whether custom actions run now or are deferred), the internal
// event queue and the effects collected so far.
type stepper struct {
	m       *Machine
	actor   *Actor
	running bool
	queue   []Event
	effects []Effect
	depth   int
}

// Initial computes the initial snapshot for an input, as XState's
// getInitialSnapshot: custom actions are not run but returned as effects,
// to run once the actor starts.
func (m *Machine) Initial(input any) (*Snapshot, []Effect, error) {
	return m.initial(nil, input)
}

func (m *Machine) initial(actor *Actor, input any) (*Snapshot, []Effect, error) {
	st := &stepper{m: m, actor: actor}
	ev := Event{Type: EventInit, Data: map[string]any{"input": input}}
	s := &Snapshot{Machine: m, Context: map[string]any{}, set: newNodeSet(len(m.Nodes))}
	s.set.add(m.Root.Order)
	s.nodes = []*StateNode{m.Root}
	if m.context != nil {
		if m.context.Fn == nil {
			s.Context = m.context.Value
		} else {
			v, err := m.context.Fn(Args{Context: s.Context, Event: ev, Input: input, Self: actor}, nil)
			if err != nil {
				return nil, nil, err
			}
			ctx := map[string]any{}
			if obj, ok := v.(map[string]any); ok {
				for k, x := range obj {
					ctx[k] = x
				}
			}
			s.Context = ctx
		}
	}
	var targets []*StateNode
	var walk func(n *StateNode)
	walk = func(n *StateNode) {
		targets = append(targets, n)
		switch n.Type {
		case Compound:
			walk(n.initial.Targets[0])
		case Parallel:
			for _, r := range n.regions {
				walk(r)
			}
		}
	}
	walk(m.Root)
	t := &Transition{Source: m.Root, Targets: targets, HasTarget: true, Reenter: true}
	next, err := st.microstep([]*Transition{t}, s, ev, true)
	if err != nil {
		return nil, nil, err
	}
	next, err = st.macrostep(next, ev)
	if err != nil {
		return nil, nil, err
	}
	return next, st.effects, nil
}

// Transition computes the snapshot after an event, as XState's
// machine.transition: custom actions run during the step; timers, emitted
// events and messages are returned as effects. An error (a guard or action
// that failed) leaves the snapshot unchanged for the caller to keep.
func (m *Machine) Transition(s *Snapshot, ev Event) (*Snapshot, []Effect, error) {
	st := &stepper{m: m, running: true}
	next, err := st.macrostep(s, ev)
	return next, st.effects, err
}

func (m *Machine) transition(actor *Actor, s *Snapshot, ev Event) (*Snapshot, []Effect, error) {
	st := &stepper{m: m, actor: actor, running: true}
	next, err := st.macrostep(s, ev)
	return next, st.effects, err
}

// isErrorEvent reports whether an event is an actor's error event.
func isErrorEvent(ev Event) bool { return strings.HasPrefix(ev.Type, "xstate.error.actor") }

func (st *stepper) macrostep(s *Snapshot, ev Event) (*Snapshot, error) {
	next := s
	if ev.Type != EventInit {
		ts, err := st.selectTransitions(next, ev)
		if err != nil {
			return nil, err
		}
		if len(ts) == 0 && isErrorEvent(ev) {
			next = next.clone()
			next.Status = StatusError
			next.Err = eventError(ev)
			return next, nil
		}
		next, err = st.microstep(ts, next, ev, false)
		if err != nil {
			return nil, err
		}
	}
	selectEventless := true
	for next.Status == StatusActive {
		var ts []*Transition
		var err error
		if selectEventless {
			if ts, err = st.selectEventless(next, ev); err != nil {
				return nil, err
			}
		}
		var prev *Snapshot
		if len(ts) > 0 {
			prev = next
		} else {
			if len(st.queue) == 0 {
				break
			}
			ev = st.queue[0]
			st.queue = st.queue[1:]
			if ts, err = st.selectTransitions(next, ev); err != nil {
				return nil, err
			}
		}
		after, err := st.microstep(ts, next, ev, false)
		if err != nil {
			return nil, err
		}
		selectEventless = after != prev
		next = after
	}
	if next.Status != StatusActive && len(next.children) > 0 {
		next = st.stopChildren(next)
	}
	return next, nil
}

// eventError returns the error an error event carries.
func eventError(ev Event) error {
	switch e := ev.Data["error"].(type) {
	case error:
		return e
	case nil:
		return errors.New("undefined")
	default:
		return &ThrownError{Value: e}
	}
}

// ThrownError is an error made from a thrown value that is not an error.
type ThrownError struct{ Value any }

func (e *ThrownError) Error() string {
	if m, ok := e.Value.(map[string]any); ok {
		if msg, ok := m["message"].(string); ok {
			return msg
		}
	}
	return fmt.Sprint(e.Value)
}

// selectTransitions finds the transitions an event enables, as XState's
// transitionNode: deepest states first, regions in the snapshot's order.
func (st *stepper) selectTransitions(s *Snapshot, ev Event) ([]*Transition, error) {
	return st.transitionNode(s.Machine.Root, s, ev)
}

func (st *stepper) transitionNode(n *StateNode, s *Snapshot, ev Event) ([]*Transition, error) {
	switch n.Type {
	case Compound:
		for _, c := range n.regions {
			if s.set.has(c.Order) {
				ts, err := st.transitionNode(c, s, ev)
				if err != nil || len(ts) > 0 {
					return ts, err
				}
				break
			}
		}
	case Parallel:
		var all []*Transition
		for _, c := range s.nodes {
			if c.Parent == n {
				ts, err := st.transitionNode(c, s, ev)
				if err != nil {
					return nil, err
				}
				all = append(all, ts...)
			}
		}
		if len(all) > 0 {
			return all, nil
		}
	}
	return st.next(n, s, ev)
}

// next selects the node's own transition for an event: the candidates for
// the event type (or else the matching wildcards, longest first), the
// first whose guard passes.
func (st *stepper) next(n *StateNode, s *Snapshot, ev Event) ([]*Transition, error) {
	cands, exact := n.transitions[ev.Type]
	if !exact && len(n.wildcards) > 0 {
		for _, d := range n.wildcards {
			if matchesWildcard(d, ev.Type) {
				cands = append(cands[:len(cands):len(cands)], n.transitions[d]...)
			}
		}
	}
	for _, t := range cands {
		if t.Guard == nil {
			return []*Transition{t}, nil
		}
		ok, err := st.evalGuard(t.Guard, s, s.Context, ev)
		if err != nil {
			name := GuardType(t.Guard)
			if name != "" {
				name = "'" + name + "' "
			}
			return nil, &GuardError{
				Msg: fmt.Sprintf("Unable to evaluate guard %sin transition for event '%s' in state node '%s':\n%s", name, ev.Type, n.ID, err.Error()),
				Err: err,
			}
		}
		if ok {
			return []*Transition{t}, nil
		}
	}
	return nil, nil
}

// GuardError is a guard that failed while a transition was selected, with
// XState's message.
type GuardError struct {
	Msg string
	Err error
}

func (e *GuardError) Error() string { return e.Msg }
func (e *GuardError) Unwrap() error { return e.Err }

// matchesWildcard reports whether a wildcard descriptor ("*" or
// "prefix.*") matches an event type, token by token as XState does.
func matchesWildcard(desc, typ string) bool {
	if desc == "*" {
		return true
	}
	prefix := desc[:len(desc)-2] // without ".*"
	if !strings.HasPrefix(typ, prefix) {
		return false
	}
	rest := typ[len(prefix):]
	if rest != "" && rest[0] != '.' {
		return false
	}
	// A "*" in the prefix is a literal token only where XState compares
	// tokens; a non-final "*" token makes XState match (it warns).
	if i := strings.Index(prefix, "*"); i >= 0 {
		return wildcardTokens(desc, typ)
	}
	return true
}

func wildcardTokens(desc, typ string) bool {
	pt := strings.Split(desc, ".")
	et := strings.Split(typ, ".")
	for i, p := range pt {
		if p == "*" {
			return i == len(pt)-1
		}
		if i >= len(et) || p != et[i] {
			return false
		}
	}
	return true
}

// selectEventless finds the enabled eventless transitions, as XState's
// selectEventlessTransitions: for each atomic state in the snapshot's
// order, the first passing `always` of it or its nearest ancestor.
func (st *stepper) selectEventless(s *Snapshot, ev Event) ([]*Transition, error) {
	var enabled []*Transition
	for _, a := range s.nodes {
		if a.Type != Atomic && a.Type != Final {
			continue
		}
	loop:
		for n := a; n != nil; n = n.Parent {
			for _, t := range n.Always {
				ok := t.Guard == nil
				if !ok {
					var err error
					if ok, err = st.evalGuard(t.Guard, s, s.Context, ev); err != nil {
						return nil, err
					}
				}
				if ok {
					dup := false
					for _, e := range enabled {
						dup = dup || e == t
					}
					if !dup {
						enabled = append(enabled, t)
					}
					break loop
				}
			}
		}
	}
	if len(enabled) == 0 {
		return nil, nil
	}
	return removeConflicting(enabled, s.set, s.history), nil
}

// effectiveTargets resolves history targets to the nodes they restore.
func effectiveTargets(t *Transition, history map[*StateNode][]*StateNode) []*StateNode {
	if t.static {
		return t.targets
	}
	var out []*StateNode
	seen := map[*StateNode]bool{}
	for _, n := range t.Targets {
		var add []*StateNode
		if n.Type != History {
			add = []*StateNode{n}
		} else if h, ok := history[n]; ok {
			add = h
		} else {
			add = effectiveTargets(historyDefault(n), history)
		}
		for _, a := range add {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	return out
}

func historyDefault(h *StateNode) *Transition {
	if h.historyTo != nil {
		return h.historyTo
	}
	return h.Parent.initial
}

func isDescendant(child, parent *StateNode) bool {
	if parent == nil {
		return true
	}
	return parent.desc.has(child.Order)
}

// transitionDomain is XState's getTransitionDomain; none is true when the
// domain is undefined (a reentering transition to the root).
func transitionDomain(t *Transition, targets []*StateNode) (domain *StateNode, none bool) {
	if !t.Reenter {
		all := true
		for _, s := range targets {
			if s != t.Source && !isDescendant(s, t.Source) {
				all = false
				break
			}
		}
		if all {
			return t.Source, false
		}
	}
	nodes := append(append([]*StateNode{}, targets...), t.Source)
	head, tail := nodes[0], nodes[1:]
	for _, anc := range head.ancestors {
		all := true
		for _, s := range tail {
			if !isDescendant(s, anc) {
				all = false
				break
			}
		}
		if all {
			return anc, false
		}
	}
	if t.Reenter {
		return nil, true
	}
	return t.Source.Machine.Root, false
}

func domainOf(t *Transition, history map[*StateNode][]*StateNode) (*StateNode, bool) {
	if t.static {
		return t.domain, t.noDom
	}
	return transitionDomain(t, effectiveTargets(t, history))
}

// exitSet is XState's computeExitSet for one transition.
func exitSet(t *Transition, active nodeSet, history map[*StateNode][]*StateNode, into nodeSet) {
	if len(t.Targets) == 0 {
		return
	}
	domain, none := domainOf(t, history)
	if none {
		for i, w := range active {
			into[i] |= w
		}
		return
	}
	if t.Reenter && t.Source == domain {
		into.add(domain.Order)
	}
	for i, w := range active {
		into[i] |= w & domain.desc[i]
	}
}

// removeConflicting is XState's removeConflictingTransitions: of two
// transitions whose exit sets intersect, a descendant's source wins, else
// the one selected first.
func removeConflicting(ts []*Transition, active nodeSet, history map[*StateNode][]*StateNode) []*Transition {
	if len(ts) < 2 {
		return ts
	}
	exits := make([]nodeSet, len(ts))
	for i, t := range ts {
		exits[i] = newNodeSet(len(t.Source.Machine.Nodes))
		exitSet(t, active, history, exits[i])
	}
	var kept []int
	for i, t1 := range ts {
		preempted := false
		var remove []int
		for _, j := range kept {
			if exits[i].intersects(exits[j]) {
				if isDescendant(t1.Source, ts[j].Source) && t1.Source != ts[j].Source {
					remove = append(remove, j)
				} else {
					preempted = true
					break
				}
			}
		}
		if preempted {
			continue
		}
		if len(remove) > 0 {
			k := kept[:0]
			for _, j := range kept {
				drop := false
				for _, r := range remove {
					drop = drop || r == j
				}
				if !drop {
					k = append(k, j)
				}
			}
			kept = k
		}
		kept = append(kept, i)
	}
	out := make([]*Transition, len(kept))
	for i, j := range kept {
		out[i] = ts[j]
	}
	return out
}

// mutConfig is the configuration being changed by a microstep.
type mutConfig struct {
	set     nodeSet
	exited  nodeSet
	entered []*StateNode
}

func (st *stepper) microstep(ts []*Transition, s *Snapshot, ev Event, initial bool) (*Snapshot, error) {
	if len(ts) == 0 {
		return s, nil
	}
	mut := &mutConfig{set: s.set.clone()}
	history := s.history
	filtered := removeConflicting(ts, s.set, history)
	next := s
	var err error
	histChanged := false
	if !initial {
		next, history, histChanged, err = st.exitStates(next, ev, filtered, mut, history)
		if err != nil {
			return nil, err
		}
	}
	var actions []Action
	for _, t := range filtered {
		actions = append(actions, t.Actions...)
	}
	if next, err = st.resolveActions(next, ev, actions); err != nil {
		return nil, err
	}
	if next, err = st.enterStates(next, ev, filtered, mut, history, initial); err != nil {
		return nil, err
	}
	// The new order: the nodes kept, in their order, then those entered.
	var nodes []*StateNode
	changed := !mut.set.equal(s.set) || mut.exited != nil
	if changed {
		nodes = make([]*StateNode, 0, len(s.nodes)+len(mut.entered))
		kept := newNodeSet(len(s.Machine.Nodes))
		for _, n := range s.nodes {
			if (mut.exited == nil || !mut.exited.has(n.Order)) && mut.set.has(n.Order) {
				nodes = append(nodes, n)
				kept.add(n.Order)
			}
		}
		for _, n := range mut.entered {
			if !kept.has(n.Order) {
				nodes = append(nodes, n)
				kept.add(n.Order)
			}
		}
	} else {
		nodes = s.nodes
	}
	if next.Status == StatusDone {
		var exits []Action
		mut.set.eachDesc(func(i int) {
			n := s.Machine.Nodes[i]
			exits = append(exits, n.Exit...)
		})
		if next, err = st.resolveActions(next, ev, exits); err != nil {
			return nil, err
		}
		nodes = make([]*StateNode, 0, len(nodes))
		mut.set.eachDesc(func(i int) { nodes = append(nodes, s.Machine.Nodes[i]) })
		changed = true
	}
	if !changed && !histChanged {
		return next, nil
	}
	if next == s {
		next = s.clone()
	}
	next.nodes = nodes
	next.set = mut.set
	next.history = history
	return next, nil
}

func (st *stepper) exitStates(s *Snapshot, ev Event, ts []*Transition, mut *mutConfig, history map[*StateNode][]*StateNode) (*Snapshot, map[*StateNode][]*StateNode, bool, error) {
	exit := newNodeSet(len(s.Machine.Nodes))
	for _, t := range ts {
		exitSet(t, mut.set, history, exit)
	}
	if exit.empty() {
		return s, history, false, nil
	}
	nodes := s.Machine.Nodes
	changed := false
	exit.eachDesc(func(i int) {
		x := nodes[i]
		for _, h := range x.histories {
			if !changed {
				c := make(map[*StateNode][]*StateNode, len(history)+1)
				for k, v := range history {
					c[k] = v
				}
				history = c
				changed = true
			}
			var rec []*StateNode
			for _, n := range s.nodes {
				if !mut.set.has(n.Order) {
					continue
				}
				if h.Deep {
					if (n.Type == Atomic || n.Type == Final) && isDescendant(n, x) {
						rec = append(rec, n)
					}
				} else if n.Parent == x {
					rec = append(rec, n)
				}
			}
			history[h] = rec
		}
	})
	mut.exited = exit
	var err error
	exit.eachDesc(func(i int) {
		if err != nil {
			return
		}
		x := nodes[i]
		actions := x.Exit
		if len(x.Invoke) > 0 {
			actions = append(actions[:len(actions):len(actions)], invokeStops(x)...)
		}
		s, err = st.resolveActions(s, ev, actions)
		mut.set.del(i)
	})
	return s, history, changed, err
}

func (st *stepper) enterStates(s *Snapshot, ev Event, ts []*Transition, mut *mutConfig, history map[*StateNode][]*StateNode, initial bool) (*Snapshot, error) {
	m := s.Machine
	toEnter := newNodeSet(len(m.Nodes))
	defaultEntry := newNodeSet(len(m.Nodes))
	computeEntrySet(ts, history, defaultEntry, toEnter)
	if initial {
		defaultEntry.add(m.Root.Order)
	}
	var completed nodeSet
	var err error
	toEnter.each(func(i int) {
		if err != nil {
			return
		}
		n := m.Nodes[i]
		mut.set.add(i)
		mut.entered = append(mut.entered, n)
		actions := n.Entry
		if len(n.Invoke) > 0 {
			actions = append(actions[:len(actions):len(actions)], invokeStarts(n)...)
		}
		if s, err = st.resolveActions(s, ev, actions); err != nil {
			return
		}
		if n.Type != Final {
			return
		}
		parent := n.Parent
		var marker *StateNode
		if parent != nil {
			if parent.Type == Parallel {
				marker = parent
			} else {
				marker = parent.Parent
			}
		}
		completion := n
		if marker != nil {
			completion = marker
		}
		if parent != nil && parent.Type == Compound {
			var out any
			if n.Output != nil {
				if out, err = n.Output.Eval(Args{Context: s.Context, Event: ev, Self: st.actor}, nil); err != nil {
					return
				}
			}
			st.queue = append(st.queue, doneStateEvent(parent.ID, out, n.Output != nil))
		}
		for marker != nil && marker.Type == Parallel && (completed == nil || !completed.has(marker.Order)) && inFinalState(mut.set, marker) {
			if completed == nil {
				completed = newNodeSet(len(m.Nodes))
			}
			completed.add(marker.Order)
			st.queue = append(st.queue, doneStateEvent(marker.ID, nil, false))
			completion = marker
			marker = marker.Parent
		}
		if marker != nil {
			return
		}
		var out any
		if m.Root.Output != nil {
			var cout any
			hasOut := completion.Output != nil && completion.Parent != nil
			if hasOut {
				if cout, err = completion.Output.Eval(Args{Context: s.Context, Event: ev, Self: st.actor}, nil); err != nil {
					return
				}
			}
			done := doneStateEvent(completion.ID, cout, hasOut)
			if out, err = m.Root.Output.Eval(Args{Context: s.Context, Event: done, Self: st.actor}, nil); err != nil {
				return
			}
		}
		s = s.clone()
		s.Status = StatusDone
		s.Output = out
	})
	return s, err
}

func doneStateEvent(id string, output any, hasOutput bool) Event {
	ev := Event{Type: "xstate.done.state." + id}
	if hasOutput {
		ev.Data = map[string]any{"output": output}
	}
	return ev
}

func inFinalState(set nodeSet, n *StateNode) bool {
	switch n.Type {
	case Compound:
		for _, c := range n.regions {
			if c.Type == Final && set.has(c.Order) {
				return true
			}
		}
		return false
	case Parallel:
		for _, c := range n.regions {
			if !inFinalState(set, c) {
				return false
			}
		}
		return true
	}
	return n.Type == Final
}

func computeEntrySet(ts []*Transition, history map[*StateNode][]*StateNode, defaultEntry, toEnter nodeSet) {
	for _, t := range ts {
		domain, none := domainOf(t, history)
		for _, s := range t.Targets {
			if s.Type != History && (t.Source != s || none || t.Source != domain || t.Reenter) {
				toEnter.add(s.Order)
				defaultEntry.add(s.Order)
			}
			addDescendants(s, history, defaultEntry, toEnter)
		}
		for _, s := range effectiveTargets(t, history) {
			var ancestors []*StateNode
			if none || s != domain {
				for _, a := range s.ancestors {
					if !none && a == domain {
						break
					}
					ancestors = append(ancestors, a)
				}
			}
			if !none && domain.Type == Parallel {
				ancestors = append(ancestors, domain)
			}
			var reentry *StateNode
			reentryNone := none
			if t.Source.Parent == nil && t.Reenter {
				reentry, reentryNone = nil, true
			} else {
				reentry = domain
			}
			addAncestors(toEnter, history, defaultEntry, ancestors, reentry, reentryNone)
		}
	}
}

func coveredBy(toEnter nodeSet, child *StateNode) bool {
	return toEnter.intersects(child.desc)
}

func addDescendants(n *StateNode, history map[*StateNode][]*StateNode, defaultEntry, toEnter nodeSet) {
	switch {
	case n.Type == History:
		if h, ok := history[n]; ok {
			for _, s := range h {
				toEnter.add(s.Order)
				addDescendants(s, history, defaultEntry, toEnter)
			}
			for _, s := range h {
				addProperAncestors(s, n.Parent, toEnter, history, defaultEntry)
			}
			return
		}
		def := historyDefault(n)
		for _, s := range def.Targets {
			toEnter.add(s.Order)
			if def == n.Parent.initial {
				defaultEntry.add(n.Parent.Order)
			}
			addDescendants(s, history, defaultEntry, toEnter)
		}
		for _, s := range def.Targets {
			addProperAncestors(s, n.Parent, toEnter, history, defaultEntry)
		}
	case n.Type == Compound:
		init := n.initial.Targets[0]
		if init.Type != History {
			toEnter.add(init.Order)
			defaultEntry.add(init.Order)
		}
		addDescendants(init, history, defaultEntry, toEnter)
		addProperAncestors(init, n, toEnter, history, defaultEntry)
	case n.Type == Parallel:
		for _, c := range n.regions {
			if !coveredBy(toEnter, c) {
				toEnter.add(c.Order)
				defaultEntry.add(c.Order)
				addDescendants(c, history, defaultEntry, toEnter)
			}
		}
	}
}

func addProperAncestors(n, to *StateNode, toEnter nodeSet, history map[*StateNode][]*StateNode, defaultEntry nodeSet) {
	var ancestors []*StateNode
	if n != to {
		for _, a := range n.ancestors {
			if a == to {
				break
			}
			ancestors = append(ancestors, a)
		}
	}
	addAncestors(toEnter, history, defaultEntry, ancestors, nil, true)
}

func addAncestors(toEnter nodeSet, history map[*StateNode][]*StateNode, defaultEntry nodeSet, ancestors []*StateNode, reentry *StateNode, reentryNone bool) {
	for _, a := range ancestors {
		if reentryNone || isDescendant(a, reentry) {
			toEnter.add(a.Order)
		}
		if a.Type == Parallel {
			for _, c := range a.regions {
				if !coveredBy(toEnter, c) {
					toEnter.add(c.Order)
					addDescendants(c, history, defaultEntry, toEnter)
				}
			}
		}
	}
}
