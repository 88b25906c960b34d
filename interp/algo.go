package interp

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// This file is the transition algorithm. It follows XState v5's stateUtils
// step by step (macrostep, microstep, selectTransitions,
// selectEventlessTransitions, removeConflictingTransitions, computeExitSet,
// computeEntrySet, exitStates, enterStates), on bitsets of state nodes.

// MaxMicrosteps bounds the microsteps of one macrostep. XState has no
// bound and hangs on a machine whose eventless transitions or raised events
// never settle; stategate stops it with ErrLoop instead.
const MaxMicrosteps = 100_000

// ErrLoop is the error of a macrostep that does not settle.
var ErrLoop = errors.New("infinite loop")

// ErrStopped is wrapped by the error of a macrostep stopped because the
// actor's context (ActorOptions.Context) ended before it settled; the
// error wraps the context's cause too (context.DeadlineExceeded,
// context.Canceled, or the cause given to the context).
var ErrStopped = errors.New("stopped")

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
	To *Actor
	// ToChild, when set, names the receiving child instead (To is nil),
	// to be found when the event is sent: a child the step starts after
	// it resolved the send (a sendTo in the entry actions of the state
	// that invokes it).
	ToChild string
	exec    func() error
	// data makes the data of an emitted LazyEvent.
	data func() map[string]any
}

// LazyEvent is an event to emit whose data is made only when a listener
// gets it: an event no one listens to never is. Data is called at most
// once, before the step's runtime is released.
type LazyEvent struct {
	Type string
	Data func() map[string]any
}

// dropLazy forgets how to make the data of lazy emitted events, for an
// actor that has no listener.
func dropLazy(effects []Effect) {
	for i := range effects {
		if effects[i].data != nil { // cached effects are shared, and have none
			effects[i].data = nil
		}
	}
}

// sealStarts converts what the step's thread left in the input of the
// children that effects start, for effects carried out once the thread
// is released.
func sealStarts(t Thread, effects []Effect) error {
	if t == nil {
		return nil
	}
	for _, e := range effects {
		if e.Kind == EffectStart && e.To != nil && e.To.input != nil {
			in, err := t.Seal(e.To.input)
			if err != nil {
				return err
			}
			e.To.input = in
		}
	}
	return nil
}

// materialize makes the data of the lazy emitted events of effects that
// outlive the step's thread.
func materialize(effects []Effect) {
	for i := range effects {
		if e := &effects[i]; e.data != nil {
			e.Event.Data, e.data = e.data(), nil
		}
	}
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
	arena   []uint64 // backing for tmpSet
	thread  Thread   // the thread the Host lent for this step, nil when none
	// spawned collects the children an assign's function spawns.
	spawned []*Actor
	// impure notes that user code ran (a function guard, action or
	// expression, or a generated id): the step may not be replayed.
	impure bool
	// entering is the state whose entry actions are resolved: a sendTo in
	// them may name a child its invokes are about to start (XState's
	// deferredActorIds).
	entering *StateNode
}

// done returns the Done channel of the context of the step's actor, nil
// when it has none: the macrostep stops between microsteps once it is
// closed.
func (st *stepper) done() <-chan struct{} {
	if st.actor == nil || st.actor.opts.Context == nil {
		return nil
	}
	return st.actor.opts.Context.Done()
}

// stopped returns the error of a step whose context has ended (done
// closed), nil while it may go on. It costs a check of a channel, between
// microsteps.
func (st *stepper) stopped(done <-chan struct{}, ev Event) error {
	select {
	case <-done:
		return fmt.Errorf("%w while handling '%s': %w", ErrStopped, ev.Type, context.Cause(st.actor.opts.Context))
	default:
		return nil
	}
}

// Initial computes the initial snapshot for an input, as XState's
// getInitialSnapshot: custom actions are not run but returned as effects,
// to run once the actor starts.
func (m *Machine) Initial(input any) (*Snapshot, []Effect, error) {
	var t Thread
	if m.Impl.Host != nil {
		t = m.Impl.Host.Acquire(context.Background())
		defer t.Release()
	}
	s, effects, err := m.initial(nil, input, t)
	materialize(effects)
	if serr := sealStarts(t, effects); serr != nil && err == nil {
		return m.failedStart(&Snapshot{Machine: m, Context: map[string]any{}}, serr), nil, serr
	}
	sealed, serr := seal(t, s)
	if serr != nil && err == nil {
		return m.failedStart(&Snapshot{Machine: m, Context: map[string]any{}}, serr), nil, serr
	}
	return sealed, effects, err
}

func (m *Machine) initial(actor *Actor, input any, t Thread) (*Snapshot, []Effect, error) {
	if c := m.initCache.Load(); c != nil {
		return c.snap, c.effects, nil
	}
	st := &stepper{m: m, actor: actor, thread: t}
	ev := Event{Type: EventInit}
	if input != nil {
		ev.Data = map[string]any{"input": input}
	}
	s := &Snapshot{Machine: m, Context: map[string]any{}, cfg: m.rootConfig}
	if m.context != nil {
		if m.context.Fn == nil {
			s.Context = m.context.Value
		} else {
			st.impure = true
			// The function gets spawn, as an assign's does: the actors it
			// spawns are the initial snapshot's children.
			st.spawned = st.spawned[:0]
			v, err := m.context.Fn(Args{Context: s.Context, Event: ev, Input: input, Self: actor, Thread: t, Spawner: st}, nil)
			if err != nil {
				return m.failedStart(s, err), nil, err
			}
			// The object the function made is the context, as in XState
			// (contexts are never changed in place).
			ctx, ok := v.(map[string]any)
			if !ok || ctx == nil {
				ctx = map[string]any{}
			}
			s.Context = ctx
			for _, c := range st.spawned {
				st.adopt(s, c.ID, c)
			}
			st.spawned = nil
		}
	}
	next, err := st.microstep(m.init.one, s, ev, true)
	if err != nil {
		return m.failedStart(s, err), nil, err
	}
	next, err = st.macrostep(next, ev)
	if err != nil {
		return m.failedStart(s, err), nil, err
	}
	if !st.impure {
		// No user code ran, so every actor of this machine starts the same
		// way, whatever its input: keep the (immutable) result.
		m.initCache.Store(&initResult{snap: next, effects: st.effects})
	}
	return next, st.effects, nil
}

// failedStart is the snapshot of an actor whose initial step failed (a
// context function, an assign or a guard that threw, a sendTo an actor
// that does not exist), as XState's getInitialSnapshot makes it: the
// snapshot from before the initial transition (its context, the root
// alone active) with status error. Its value is the initial state's, as
// XState completes the nodes for the value (see Machine.full), but its
// tags and stateIn('#id') see the root alone. No effect runs.
func (m *Machine) failedStart(pre *Snapshot, err error) *Snapshot {
	s := &Snapshot{Machine: m, Context: pre.Context, cfg: m.rootConfig}
	return s.withStatus(StatusError, nil, err)
}

// initResult is a machine's initial snapshot and effects, when they do not
// depend on user code.
type initResult struct {
	snap    *Snapshot
	effects []Effect
}

// Transition computes the snapshot after an event, as XState's
// machine.transition: custom actions run during the step; timers, emitted
// events and messages are returned as effects. On an error (a guard or
// action that failed) the snapshot returned is nil: s is not changed, and
// the caller keeps it (an actor goes to status error instead).
func (m *Machine) Transition(s *Snapshot, ev Event) (*Snapshot, []Effect, error) {
	st := &stepper{m: m, running: true}
	if m.Impl.Host != nil {
		st.thread = m.Impl.Host.Acquire(context.Background())
		defer st.thread.Release()
	}
	next, err := st.macrostep(s, ev)
	materialize(st.effects)
	if err != nil {
		return nil, st.effects, err
	}
	if err := sealStarts(st.thread, st.effects); err != nil {
		return nil, st.effects, err
	}
	sealed, err := seal(st.thread, next)
	if err != nil {
		return nil, st.effects, err
	}
	return sealed, st.effects, nil
}

func (m *Machine) transition(actor *Actor, s *Snapshot, ev Event, t Thread) (*Snapshot, []Effect, error) {
	// The actor's own stepper: a closure (enqueueActions' check) makes a
	// stepper escape, and an actor runs one step at a time.
	st := &actor.st
	*st = stepper{m: m, actor: actor, running: true, thread: t, arena: actor.scratch, effects: actor.effects[:0], queue: actor.queue[:0]}
	next, err := st.macrostep(s, ev)
	actor.effects = st.effects
	actor.queue = st.queue[:0:cap(st.queue)]
	return next, st.effects, err
}

// isErrorEvent reports whether an event is an actor's error event.
func isErrorEvent(ev Event) bool { return strings.HasPrefix(ev.Type, "xstate.error.actor") }

func (st *stepper) macrostep(s *Snapshot, ev Event) (*Snapshot, error) {
	done := st.done()
	if done != nil {
		if err := st.stopped(done, ev); err != nil {
			return nil, err
		}
	}
	next := s
	if ev.Type != EventInit {
		ts, err := st.selectTransitions(next, ev)
		if err != nil {
			return nil, err
		}
		if len(ts) == 0 && isErrorEvent(ev) {
			return next.withStatus(StatusError, nil, eventError(ev)), nil
		}
		next, err = st.microstep(ts, next, ev, false)
		if err != nil {
			return nil, err
		}
	}
	selectEventless := true
	for steps := 0; next.Status == StatusActive; steps++ {
		if steps >= MaxMicrosteps {
			return nil, fmt.Errorf("%w: more than %d microsteps for event '%s' (eventless transitions or raised events that never settle)", ErrLoop, MaxMicrosteps, ev.Type)
		}
		if done != nil { // a check a step without a context does not pay for
			if err := st.stopped(done, ev); err != nil {
				return nil, err
			}
		}
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
	if next.Status != StatusActive && len(next.extra().children) > 0 {
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
	// XState walks the state value, made of the completed nodes.
	return st.transitionNode(s.Machine.Root, s, s.Machine.full(s.cfg), ev)
}

func (st *stepper) transitionNode(n *StateNode, s *Snapshot, cfg *config, ev Event) ([]*Transition, error) {
	switch n.Type {
	case Compound:
		if multiValued(n, cfg) {
			// XState's transitionNode goes by the state value, and takes
			// a node whose value has several keys for a parallel one.
			return st.transitionRegions(n, s, cfg, ev)
		}
		// The child the state value names.
		kids := n.regions
		if cfg != s.cfg {
			kids = cfg.nodes
		}
		for _, c := range kids {
			if c.Parent == n && cfg.set.has(c.Order) {
				ts, err := st.transitionNode(c, s, cfg, ev)
				if err != nil || len(ts) > 0 {
					return ts, err
				}
				break
			}
		}
	case Parallel:
		return st.transitionRegions(n, s, cfg, ev)
	}
	return st.next(n, s, ev)
}

// multiValued reports whether a compound state's value has several keys,
// which a configuration XState left with two of its children (or its
// completion, see Machine.full) may give it: when the configuration holds
// two or more of its children and the first of them, in the nodes' order,
// is not atomic (XState's getValueFromAdj gives a compound state whose
// first child is atomic that child's key alone).
func multiValued(n *StateNode, cfg *config) bool {
	k := 0
	for _, c := range n.regions {
		if cfg.set.has(c.Order) {
			if k++; k > 1 {
				break
			}
		}
	}
	if k < 2 {
		return false
	}
	for _, c := range cfg.nodes {
		if c.Parent == n {
			return c.Type != Atomic && c.Type != Final
		}
	}
	return false
}

// transitionRegions is XState's transitionParallelNode: the transitions of
// every child of n in the configuration, in the order of the state value's
// keys (the snapshot's node order), else n's own.
func (st *stepper) transitionRegions(n *StateNode, s *Snapshot, cfg *config, ev Event) ([]*Transition, error) {
	var all []*Transition
	shared := true // all is a result of transitionNode, not ours
	for _, c := range cfg.nodes {
		if c.Parent != n {
			continue
		}
		ts, err := st.transitionNode(c, s, cfg, ev)
		if err != nil {
			return nil, err
		}
		switch {
		case len(ts) == 0:
		case len(all) == 0:
			all = ts
		case shared:
			all = append(append(make([]*Transition, 0, len(all)+len(ts)+2), all...), ts...)
			shared = false
		default:
			all = append(all, ts...)
		}
	}
	if len(all) > 0 {
		return all, nil
	}
	return st.next(n, s, ev)
}

// next selects the node's own transition for an event: the candidates for
// the event type, then those of the matching wildcards (longest first),
// as XState 5.33 orders them; the first whose guard passes.
func (st *stepper) next(n *StateNode, s *Snapshot, ev Event) ([]*Transition, error) {
	cands := n.transitions[ev.Type]
	for _, d := range n.wildcards {
		if d != ev.Type && matchesWildcard(d, ev.Type) {
			if cands == nil {
				cands = n.transitions[d]
			} else {
				cands = append(cands[:len(cands):len(cands)], n.transitions[d]...)
			}
		}
	}
	for _, t := range cands {
		if t.Guard == nil {
			return t.one, nil
		}
		ok, err := st.evalGuard(t.Guard, s, s.Context, ev)
		if err != nil {
			// XState names a guard given by name, not a function (an
			// inline guard, and(), or(), not(), stateIn()).
			name := GuardType(t.Guard)
			if name != "" && !strings.HasPrefix(name, "xstate.") {
				name = "'" + name + "' "
			} else {
				name = ""
			}
			// It reads the error's message: a thrown string has none.
			msg := err.Error()
			var m interface{ Message() (string, bool) }
			if errors.As(err, &m) {
				if text, has := m.Message(); has {
					msg = text
				} else {
					msg = "undefined"
				}
			}
			return nil, &GuardError{
				Msg: fmt.Sprintf("Unable to evaluate guard %sin transition for event '%s' in state node '%s':\n%s", name, ev.Type, n.ID, msg),
				Err: err,
			}
		}
		if ok {
			return t.one, nil
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
	if !s.cfg.always {
		return nil, nil
	}
	var enabled []*Transition
	for _, a := range s.cfg.atomics {
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
	return st.removeConflicting(enabled, s.cfg.set, s.history()), nil
}

// historyValue is the recorded history of a snapshot, indexed by history
// node (StateNode.hidx): nil where nothing is recorded. It is copied on
// write.
type historyValue [][]*StateNode

func (h historyValue) get(n *StateNode) ([]*StateNode, bool) {
	if n.hidx >= len(h) || h[n.hidx] == nil {
		return nil, false
	}
	return h[n.hidx], true
}

// effectiveTargets resolves history targets to the nodes they restore.
func effectiveTargets(t *Transition, history historyValue) []*StateNode {
	if t.static {
		return t.targets
	}
	if len(t.Targets) == 1 && t.Targets[0].Type == History {
		if h, ok := history.get(t.Targets[0]); ok {
			return h
		}
		return effectiveTargets(historyDefault(t.Targets[0]), history)
	}
	var out []*StateNode
	seen := map[*StateNode]bool{}
	for _, n := range t.Targets {
		var add []*StateNode
		if n.Type != History {
			add = []*StateNode{n}
		} else if h, ok := history.get(n); ok {
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
	// XState's findLCCA over targets + source: the first proper ancestor
	// of the first node that contains all the others.
	head, rest := t.Source, targets[:0]
	if len(targets) > 0 {
		head, rest = targets[0], targets[1:]
	}
	for _, anc := range head.ancestors {
		all := head == t.Source || isDescendant(t.Source, anc)
		for _, s := range rest {
			if !all {
				break
			}
			all = isDescendant(s, anc)
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

func domainOf(t *Transition, history historyValue) (*StateNode, bool) {
	if t.static {
		return t.domain, t.noDom
	}
	return transitionDomain(t, effectiveTargets(t, history))
}

// exitSet is XState's computeExitSet for one transition.
func exitSet(t *Transition, active nodeSet, history historyValue, into nodeSet) {
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
func (st *stepper) removeConflicting(ts []*Transition, active nodeSet, history historyValue) []*Transition {
	if len(ts) < 2 {
		return ts
	}
	exits := make([]nodeSet, len(ts))
	for i, t := range ts {
		exits[i] = st.tmpSet()
		exitSet(t, active, history, exits[i])
	}
	var kept []int
	for i, t1 := range ts {
		preempted := false
		var remove []int
		for _, j := range kept {
			if exits[i].intersects(exits[j]) {
				if isDescendant(t1.Source, ts[j].Source) {
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

// tmpSet returns an empty node set that lives until the stepper is done.
func (st *stepper) tmpSet() nodeSet {
	w := (len(st.m.Nodes) + 63) / 64
	if len(st.arena) < w {
		st.arena = make([]uint64, 16*w)
		if st.actor != nil {
			st.actor.scratch = st.arena
		}
	}
	s := nodeSet(st.arena[:w:w])
	st.arena = st.arena[w:]
	clear(s)
	return s
}

func (st *stepper) microstep(ts []*Transition, s *Snapshot, ev Event, initial bool) (*Snapshot, error) {
	if len(ts) == 0 {
		return s, nil
	}
	if len(ts) == 1 && ts[0].HasTarget == (len(ts[0].Targets) > 0) && !initial {
		return st.cachedMicrostep(ts[0], s, ev)
	}
	m := s.Machine
	set := st.tmpSet()
	copy(set, s.cfg.set)
	history := s.history()
	filtered := st.removeConflicting(ts, s.cfg.set, history)
	next := s
	var err error
	var exited nodeSet
	histChanged := false
	if !initial {
		next, exited, history, histChanged, err = st.exitStates(next, ev, filtered, set, history)
		if err != nil {
			return nil, err
		}
	}
	if len(filtered) == 1 {
		next, err = st.resolveActions(next, ev, filtered[0].Actions)
	} else {
		var actions []Action
		for _, t := range filtered {
			actions = append(actions, t.Actions...)
		}
		next, err = st.resolveActions(next, ev, actions)
	}
	if err != nil {
		return nil, err
	}
	entered := st.tmpSet()
	if next, err = st.enterStates(next, ev, filtered, set, entered, history); err != nil {
		return nil, err
	}
	cfg := s.cfg
	if (exited != nil || !entered.empty()) && (histChanged || !set.equal(s.cfg.set)) {
		// (The same nodes with no history recorded keep their order, as
		// in XState.)
		cfg = m.intern(set, orderOf(m, s.cfg, set, exited, entered))
	}
	return st.finishMicrostep(s, next, ev, cfg, history, histChanged)
}

// cachedMicrostep takes one transition whose effect on the configuration
// is cached: only its actions are run.
func (st *stepper) cachedMicrostep(t *Transition, s *Snapshot, ev Event) (*Snapshot, error) {
	history := s.history()
	r := s.cfg.step(s.Machine, t, history)
	histChanged := false
	if len(r.records) > 0 {
		h := make(historyValue, s.Machine.histories)
		copy(h, history)
		for _, rec := range r.records {
			h[rec.h.hidx] = rec.nodes
		}
		history, histChanged = h, true
	}
	next := s
	var err error
	for _, x := range r.exits {
		if next, err = st.exitActions(next, ev, x); err != nil {
			return nil, err
		}
	}
	if next, err = st.resolveActions(next, ev, t.Actions); err != nil {
		return nil, err
	}
	var set, completed nodeSet
	if r.hasFinal {
		set = st.tmpSet()
		copy(set, r.base)
	}
	for _, n := range r.enters {
		if set != nil {
			set.add(n.Order)
		}
		if next, err = st.enter(next, ev, n, set, &completed); err != nil {
			return nil, err
		}
	}
	return st.finishMicrostep(s, next, ev, r.next, history, histChanged)
}

// finishMicrostep gives the snapshot its new configuration and history;
// a machine that is done exits every state, innermost first, and XState
// leaves its nodes in that order.
func (st *stepper) finishMicrostep(s, next *Snapshot, ev Event, cfg *config, history historyValue, histChanged bool) (*Snapshot, error) {
	if next.Status == StatusDone {
		cfg = s.Machine.doneConfig(cfg)
		for _, n := range cfg.nodes {
			if len(n.Exit) > 0 {
				var err error
				if next, err = st.resolveActions(next, ev, n.Exit); err != nil {
					return nil, err
				}
			}
		}
	}
	if cfg == s.cfg && !histChanged {
		return next, nil
	}
	if next == s {
		next = s.clone()
	}
	next.cfg = cfg
	if histChanged {
		next.own().history = history
	}
	return next, nil
}

// exitStates exits the states of the transitions' exit sets, innermost
// first, recording history first. It returns the set of states exited
// (nil when none).
func (st *stepper) exitStates(s *Snapshot, ev Event, ts []*Transition, set nodeSet, history historyValue) (*Snapshot, nodeSet, historyValue, bool, error) {
	exit := st.tmpSet()
	for _, t := range ts {
		exitSet(t, set, history, exit)
	}
	if exit.empty() {
		return s, nil, history, false, nil
	}
	nodes := s.Machine.Nodes
	changed := false
	for i := exit.prev(len(nodes) - 1); i >= 0; i = exit.prev(i - 1) {
		x := nodes[i]
		for _, h := range x.histories {
			if !changed {
				c := make(historyValue, s.Machine.histories)
				copy(c, history)
				history = c
				changed = true
			}
			rec := []*StateNode{}
			for k := set.next(0); k >= 0; k = set.next(k + 1) {
				n := nodes[k]
				if h.Deep {
					if (n.Type == Atomic || n.Type == Final) && isDescendant(n, x) {
						rec = append(rec, n)
					}
				} else if n.Parent == x {
					rec = append(rec, n)
				}
			}
			history[h.hidx] = rec
		}
	}
	for i := exit.prev(len(nodes) - 1); i >= 0; i = exit.prev(i - 1) {
		var err error
		if s, err = st.exitActions(s, ev, nodes[i]); err != nil {
			return nil, nil, nil, false, err
		}
		set.del(i)
	}
	return s, exit, history, changed, nil
}

// exitActions runs a node's exit actions and stops its invoked actors.
func (st *stepper) exitActions(s *Snapshot, ev Event, x *StateNode) (*Snapshot, error) {
	actions := x.Exit
	if len(x.Invoke) > 0 {
		actions = append(actions[:len(actions):len(actions)], invokeStops(x)...)
	}
	if len(actions) == 0 {
		return s, nil
	}
	return st.resolveActions(s, ev, actions)
}

func (st *stepper) enterStates(s *Snapshot, ev Event, ts []*Transition, set, entered nodeSet, history historyValue) (*Snapshot, error) {
	m := s.Machine
	if len(ts) == 1 && ts[0].entry != nil {
		copy(entered, ts[0].entry.toEnter)
	} else {
		e := entrySet{history: history, toEnter: entered, defaultEntry: st.tmpSet()}
		e.compute(ts)
	}
	var completed nodeSet
	var err error
	for i := entered.next(0); i >= 0; i = entered.next(i + 1) {
		set.add(i)
		if s, err = st.enter(s, ev, m.Nodes[i], set, &completed); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// enter runs a node's entry actions and starts its invoked actors; for a
// final node it queues the done events and, when the machine is done,
// computes its output. set holds the nodes entered so far.
func (st *stepper) enter(s *Snapshot, ev Event, n *StateNode, set nodeSet, completed *nodeSet) (*Snapshot, error) {
	m := s.Machine
	actions := n.Entry
	if len(n.Invoke) > 0 {
		actions = append(actions[:len(actions):len(actions)], invokeStarts(n)...)
	}
	var err error
	if len(actions) > 0 {
		prev := st.entering
		st.entering = n
		s, err = st.resolveActions(s, ev, actions)
		st.entering = prev
		if err != nil {
			return nil, err
		}
	}
	if n.Type != Final {
		return s, nil
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
		done := Event{Type: parent.doneType, Data: n.doneData}
		if n.Output != nil && n.doneData == nil {
			out, err := st.eval(n.Output, Args{Context: s.Context, Event: ev, Self: st.actor, Snapshot: s, Thread: st.thread}, nil)
			if err != nil {
				return nil, err
			}
			done = doneStateEvent(parent, out, true)
		}
		st.queue = append(st.queue, done)
	}
	for marker != nil && marker.Type == Parallel && (*completed == nil || !completed.has(marker.Order)) && inFinalState(set, marker) {
		if *completed == nil {
			*completed = st.tmpSet()
		}
		completed.add(marker.Order)
		st.queue = append(st.queue, doneStateEvent(marker, nil, false))
		completion = marker
		marker = marker.Parent
	}
	if marker != nil {
		return s, nil
	}
	var out any
	if m.Root.Output != nil {
		var cout any
		hasOut := completion.Output != nil && completion.Parent != nil
		if hasOut {
			if cout, err = st.eval(completion.Output, Args{Context: s.Context, Event: ev, Self: st.actor, Snapshot: s, Thread: st.thread}, nil); err != nil {
				return nil, err
			}
		}
		done := doneStateEvent(completion, cout, hasOut)
		if out, err = st.eval(m.Root.Output, Args{Context: s.Context, Event: done, Self: st.actor, Snapshot: s, Thread: st.thread}, nil); err != nil {
			return nil, err
		}
	}
	return s.withStatus(StatusDone, out, nil), nil
}

func doneStateEvent(n *StateNode, output any, hasOutput bool) Event {
	ev := Event{Type: n.doneType}
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

// entrySet is the state of XState's computeEntrySet: the states to enter,
// those entered by default (whose initial actions run), and whether the
// history value was read.
type entrySet struct {
	history      historyValue
	toEnter      nodeSet
	defaultEntry nodeSet
	usedHistory  bool
}

// computeEntrySet is XState's computeEntrySet.
func (e *entrySet) compute(ts []*Transition) {
	for _, t := range ts {
		if !t.static {
			e.usedHistory = true
		}
		domain, none := domainOf(t, e.history)
		for _, s := range t.Targets {
			if s.Type != History && (t.Source != s || none || t.Source != domain || t.Reenter) {
				e.toEnter.add(s.Order)
				e.defaultEntry.add(s.Order)
			}
			e.addDescendants(s)
		}
		for _, s := range effectiveTargets(t, e.history) {
			// The proper ancestors of s below the domain: a prefix of
			// s.ancestors.
			ancestors := s.ancestors
			if !none {
				if s == domain {
					ancestors = nil
				} else {
					for k, a := range s.ancestors {
						if a == domain {
							ancestors = s.ancestors[:k]
							break
						}
					}
				}
			}
			reentry, reentryNone := domain, none
			if t.Source.Parent == nil && t.Reenter {
				reentry, reentryNone = nil, true
			}
			e.addAncestors(ancestors, reentry, reentryNone)
			if !none && domain.Type == Parallel {
				// XState appends a parallel domain to the ancestors: its
				// regions not yet covered are entered.
				e.addAncestors(domain.self, reentry, reentryNone)
			}
		}
	}
}

func (e *entrySet) covered(child *StateNode) bool {
	return e.toEnter.intersects(child.desc)
}

func (e *entrySet) addDescendants(n *StateNode) {
	switch n.Type {
	case History:
		e.usedHistory = true
		if h, ok := e.history.get(n); ok {
			for _, s := range h {
				e.toEnter.add(s.Order)
				e.addDescendants(s)
			}
			for _, s := range h {
				e.addProperAncestors(s, n.Parent)
			}
			return
		}
		def := historyDefault(n)
		for _, s := range def.Targets {
			e.toEnter.add(s.Order)
			if def == n.Parent.initial {
				e.defaultEntry.add(n.Parent.Order)
			}
			e.addDescendants(s)
		}
		for _, s := range def.Targets {
			e.addProperAncestors(s, n.Parent)
		}
	case Compound:
		init := n.initial.Targets[0]
		if init.Type != History {
			e.toEnter.add(init.Order)
			e.defaultEntry.add(init.Order)
		}
		e.addDescendants(init)
		e.addProperAncestors(init, n)
	case Parallel:
		for _, c := range n.regions {
			if !e.covered(c) {
				e.toEnter.add(c.Order)
				e.defaultEntry.add(c.Order)
				e.addDescendants(c)
			}
		}
	}
}

// addProperAncestors enters the ancestors of n below `to`.
func (e *entrySet) addProperAncestors(n, to *StateNode) {
	var ancestors []*StateNode
	if n != to {
		ancestors = n.ancestors
		for k, a := range n.ancestors {
			if a == to {
				ancestors = n.ancestors[:k]
				break
			}
		}
	}
	e.addAncestors(ancestors, nil, true)
}

// addAncestors is XState's addAncestorStatesToEnter: each ancestor inside
// the reentry domain is entered (all when reentryNone), and the regions of a
// parallel ancestor that nothing covers yet are entered with their
// descendants.
func (e *entrySet) addAncestors(ancestors []*StateNode, reentry *StateNode, reentryNone bool) {
	for _, a := range ancestors {
		if reentryNone || isDescendant(a, reentry) {
			e.toEnter.add(a.Order)
		}
		if a.Type == Parallel {
			for _, c := range a.regions {
				if !e.covered(c) {
					e.toEnter.add(c.Order)
					e.addDescendants(c)
				}
			}
		}
	}
}
