package interp

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
)

// ErrDefinition is wrapped by every error New reports about a definition.
var ErrDefinition = errors.New("invalid machine definition")

// DefError is an error in a machine definition, naming the state node.
type DefError struct {
	Path string // the state's path from the root, "(root)" for the root
	Msg  string
	// Transition is the definition of the transition the error is about
	// (a pointer into the MachineDef), for a reader of a config to place
	// it; nil when it is about the state.
	Transition *TransitionDef
}

func (e *DefError) Error() string { return fmt.Sprintf("state %s: %s", e.Path, e.Msg) }

// Unwrap lets errors.Is match ErrDefinition.
func (e *DefError) Unwrap() error { return ErrDefinition }

// Machine is a compiled machine: state nodes in document order, with their
// transitions indexed by event and their ancestors and transition domains
// precomputed. A Machine is immutable and safe for concurrent use.
type Machine struct {
	ID    string
	Root  *StateNode
	Nodes []*StateNode // document order; Nodes[i].Order == i
	// EventTypes are the event types named in some `on` (no wildcards, no
	// xstate.* events), sorted.
	EventTypes []string
	Impl       Implementations

	where   func(kind, name, state string) (string, int, int)
	context *Expr
	byID    map[string]*StateNode
	init    *Transition // enters the initial configuration
	// histories counts the history nodes (StateNode.hidx numbers them).
	histories int
	initCache *atomic.Pointer[initResult]
	configs   *configTable
	// rootConfig has only the root active: where an actor starts from;
	// emptyConfig has nothing active: an actor that failed to start.
	rootConfig, emptyConfig *config
}

// StateNode is a compiled state node.
type StateNode struct {
	Key         string
	ID          string
	Type        StateType
	Deep        bool // deep history
	Parent      *StateNode
	Children    []*StateNode // document order, history nodes included
	Order       int
	Machine     *Machine
	Tags        []string
	Meta        any
	Description string
	Output      *Expr
	// On lists the event descriptors of the node's `on`, in document order.
	On []string
	// Always holds the eventless transitions.
	Always []*Transition
	Entry  []Action
	Exit   []Action
	Invoke []*Invocation

	path        []string
	byKey       map[string]*StateNode
	regions     []*StateNode // children without history nodes
	histories   []*StateNode // history children
	ancestors   []*StateNode // proper ancestors, parent first
	desc        nodeSet      // strict descendants
	transitions map[string][]*Transition
	wildcards   []string // wildcard descriptors, longest first
	initial     *Transition
	historyTo   *Transition // a history node's default transition
	self        []*StateNode
	hidx        int    // a history node's index in a historyValue
	doneType    string // the type of its done event, xstate.done.state.ID
	// doneData is the data of the done event its parent gets when this
	// final state is entered, when its output is static (made once).
	doneData map[string]any
}

// Transition is a compiled transition.
type Transition struct {
	Source      *StateNode
	Event       string // the event descriptor; "" for eventless and initial
	Targets     []*StateNode
	HasTarget   bool
	Guard       Guard
	Actions     []Action
	Reenter     bool
	Description string
	Meta        any

	one     []*Transition // the transition alone, as selection returns it
	entry   *entrySet     // its entry set, when it does not depend on history
	static  bool          // no history target: domain is precomputed
	domain  *StateNode    // the transition domain when static (nil: none)
	noDom   bool          // static and the domain is "none" (root reentry)
	targets []*StateNode
}

// Path returns the node's key path from the root.
func (n *StateNode) Path() []string { return n.path }

// PathString returns the node's path joined with dots, "(root)" for the root.
func (n *StateNode) PathString() string {
	if len(n.path) == 0 {
		return "(root)"
	}
	return strings.Join(n.path, ".")
}

// Child returns the child with the key, or nil.
func (n *StateNode) Child(key string) *StateNode { return n.byKey[key] }

// Transitions returns the node's transitions for an event descriptor, in
// document order.
func (n *StateNode) Transitions(descriptor string) []*Transition { return n.transitions[descriptor] }

// InitialChild returns a compound node's initial child.
func (n *StateNode) InitialChild() *StateNode {
	if n.initial == nil || len(n.initial.Targets) == 0 {
		return nil
	}
	return n.initial.Targets[0]
}

// NodeByID returns the state node with the id (without '#'), or nil.
func (m *Machine) NodeByID(id string) *StateNode { return m.byID[id] }

// Provide returns a machine with more implementations, which replace the
// ones of the same name (XState's machine.provide()).
func (m *Machine) Provide(impl Implementations) *Machine {
	c := *m
	c.Impl = m.Impl.merge(impl)
	c.initCache = new(atomic.Pointer[initResult])
	return &c
}

// New compiles a machine definition.
func New(def *MachineDef) (*Machine, error) {
	if def == nil || def.Root == nil {
		return nil, &DefError{Path: "(root)", Msg: "no root state"}
	}
	m := &Machine{context: def.Context, Impl: def.Impl, where: def.Where, byID: map[string]*StateNode{}, initCache: new(atomic.Pointer[initResult]), configs: &configTable{}}
	m.ID = def.Root.ID
	if m.ID == "" {
		m.ID = "(machine)"
	}
	c := compiler{m: m, defs: map[*StateNode]*StateDef{}}
	m.Root = c.node(def.Root, nil, nil)
	for _, n := range m.Nodes {
		n.desc = newNodeSet(len(m.Nodes))
		for _, o := range m.Nodes[n.Order+1:] {
			if len(o.ancestors) <= len(n.ancestors) {
				break
			}
			n.desc.add(o.Order)
		}
	}
	for _, n := range m.Nodes {
		c.finish(n)
	}
	for _, n := range m.Nodes {
		if n.Type == History && historyLoops(n) {
			c.fail(n, "with nothing recorded, this history state resolves to itself (it is its parent's initial state, or its target leads back to it): entering it would never end (XState fails with \"Maximum call stack size exceeded\"); give it a target")
		}
	}
	if len(c.errs) > 0 {
		return nil, errors.Join(c.errs...)
	}
	// XState starts an actor with a reentering transition from the root to
	// the root and every initial descendant.
	m.init = &Transition{Source: m.Root, Targets: initialNodes(m.Root), HasTarget: true, Reenter: true}
	c.prepare(m.init)
	for _, t := range c.all {
		c.prepareEntry(t)
	}
	rootSet := newNodeSet(len(m.Nodes))
	m.emptyConfig = m.newConfig(rootSet.clone(), []*StateNode{})
	rootSet.add(m.Root.Order)
	m.rootConfig = m.intern(rootSet, nil)
	types := map[string]bool{}
	for _, n := range m.Nodes {
		for _, d := range n.On {
			if !strings.Contains(d, "*") && !strings.HasPrefix(d, "xstate.") {
				types[d] = true
			}
		}
	}
	for t := range types {
		m.EventTypes = append(m.EventTypes, t)
	}
	sort.Strings(m.EventTypes)
	return m, nil
}

type compiler struct {
	m    *Machine
	defs map[*StateNode]*StateDef
	errs []error
	all  []*Transition
}

func (c *compiler) fail(n *StateNode, format string, args ...any) {
	c.errs = append(c.errs, &DefError{Path: n.PathString(), Msg: fmt.Sprintf(format, args...)})
}

// node builds the tree in document order (pre-order), as XState numbers
// its state nodes.
func (c *compiler) node(d *StateDef, parent *StateNode, path []string) *StateNode {
	n := &StateNode{
		Key: d.Key, Type: d.Type, Deep: d.Deep, Parent: parent, Machine: c.m,
		Order: len(c.m.Nodes), Tags: d.Tags, Meta: d.Meta, Description: d.Description,
		Output: d.Output, path: path, byKey: map[string]*StateNode{},
	}
	n.self = []*StateNode{n}
	if parent == nil {
		n.Key = c.m.ID
		n.ID = c.m.ID
	} else if d.ID != "" {
		n.ID = d.ID
	} else {
		n.ID = c.m.ID + "." + strings.Join(path, ".")
	}
	n.doneType = "xstate.done.state." + n.ID
	if d.Output != nil && d.Output.Fn == nil {
		n.doneData = map[string]any{"output": d.Output.Value}
	}
	if _, dup := c.m.byID[n.ID]; dup {
		c.fail(n, "duplicate state id %q", n.ID)
	}
	c.m.byID[n.ID] = n
	c.m.Nodes = append(c.m.Nodes, n)
	c.defs[n] = d
	for p := parent; p != nil; p = p.Parent {
		n.ancestors = append(n.ancestors, p)
	}
	for _, cd := range d.States {
		if _, dup := n.byKey[cd.Key]; dup {
			c.fail(n, "duplicate child state %q", cd.Key)
		}
		child := c.node(cd, n, append(slices.Clip(path), cd.Key))
		n.Children = append(n.Children, child)
		n.byKey[cd.Key] = child
		if child.Type == History {
			child.hidx = c.m.histories
			c.m.histories++
			n.histories = append(n.histories, child)
		} else {
			n.regions = append(n.regions, child)
		}
	}
	return n
}

// finish resolves targets and builds transitions, once every node exists.
func (c *compiler) finish(n *StateNode) {
	d := c.defs[n]
	switch n.Type {
	case Compound:
		if len(n.regions) == 0 {
			c.fail(n, "a compound state needs child states")
			return
		}
		if d.Initial == "" {
			c.fail(n, "no initial state specified for compound state node %q; try adding { initial: %q }", "#"+n.ID, n.regions[0].Key)
			return
		}
		child := n.byKey[d.Initial]
		if child == nil {
			c.fail(n, "initial state %q not found on parent state node #%s", d.Initial, n.ID)
			return
		}
		n.initial = &Transition{Source: n, Targets: []*StateNode{child}, HasTarget: true}
		c.prepare(n.initial)
	case Parallel:
		if len(n.regions) == 0 {
			c.fail(n, "a parallel state needs child states")
			return
		}
	case Atomic, Final:
		if len(d.States) > 0 {
			c.fail(n, "a %s state cannot have child states", n.Type)
			return
		}
	case History:
		if n.Parent == nil {
			c.fail(n, "the root cannot be a history state")
			return
		}
		if len(d.States) > 0 {
			c.fail(n, "a history state cannot have child states")
			return
		}
		if d.HistoryTo != nil {
			t := &Transition{Source: n, HasTarget: true}
			for _, key := range d.HistoryTo {
				target, err := c.path(n.Parent, key)
				if err != nil {
					c.fail(n, "history target %q: %v", key, err)
					return
				}
				t.Targets = append(t.Targets, target)
			}
			c.prepare(t)
			n.historyTo = t
		} else if n.Parent.Type == Parallel {
			// With nothing recorded, a history state of a parallel state
			// enters the parallel state (every region), as in XState.
			t := &Transition{Source: n, HasTarget: true, Targets: []*StateNode{n.Parent}}
			c.prepare(t)
			n.historyTo = t
		} else if n.Parent.initial == nil && n.Parent.Type == Compound {
			c.fail(n, "history state in a parent with no initial state")
		}
	}
	if d.Initial != "" && n.Type != Compound && n.Type != Parallel {
		c.fail(n, "%q is not a compound state, so it cannot have an initial state", n.Type.String())
	}
	n.Entry = slices.Clone(d.Entry)
	n.Exit = slices.Clone(d.Exit)
	n.transitions = map[string][]*Transition{}
	for _, e := range d.On {
		if e.Event == "" {
			c.fail(n, `null events ("") cannot be specified as a transition key; use always: { ... } instead`)
			return
		}
		if _, dup := n.transitions[e.Event]; dup {
			continue // a duplicate key: JSON's last value was kept by the reader
		}
		n.On = append(n.On, e.Event)
		n.transitions[e.Event] = c.transitions(n, e.Event, e.Transitions)
		if e.Event == "*" || strings.HasSuffix(e.Event, ".*") {
			n.wildcards = append(n.wildcards, e.Event)
		}
	}
	if len(d.OnDone) > 0 {
		// On an atomic or final state it never fires, as in XState.
		ev := "xstate.done.state." + n.ID
		n.transitions[ev] = c.transitions(n, ev, d.OnDone)
	}
	for i, inv := range d.Invoke {
		c.invoke(n, i, inv)
	}
	for _, a := range d.After {
		delay := a.Name
		if delay == "" {
			delay = formatNumber(a.Ms)
		}
		ev := "xstate.after." + delay + "." + n.ID
		raise := &RaiseAction{Event: Static(Event{Type: ev}), ID: Static(ev), DelayName: a.Name}
		if a.Name == "" {
			raise.Delay = Static(a.Ms)
		}
		n.Entry = append(n.Entry, raise)
		n.Exit = append(n.Exit, &CancelAction{ID: Static(ev)})
		n.transitions[ev] = append(n.transitions[ev], c.transitions(n, ev, a.Transitions)...)
	}
	n.Always = c.transitions(n, "", d.Always)
	// Wildcards are tried longest first; the sort is stable, as XState's.
	sort.SliceStable(n.wildcards, func(i, j int) bool { return len(n.wildcards[i]) > len(n.wildcards[j]) })
}

func (c *compiler) transitions(n *StateNode, event string, defs []*TransitionDef) []*Transition {
	out := make([]*Transition, 0, len(defs))
	for _, td := range defs {
		t := &Transition{
			Source: n, Event: event, Guard: td.Guard, Actions: td.Actions, Reenter: td.Reenter,
			Description: td.Description, Meta: td.Meta, HasTarget: td.HasTarget || td.Targets != nil,
		}
		if t.HasTarget {
			t.Targets = []*StateNode{}
		}
		for _, target := range td.Targets {
			s, err := c.target(n, target)
			if err != nil {
				what := "event " + fmt.Sprintf("%q", event)
				if event == "" {
					what = "always"
				}
				c.errs = append(c.errs, &DefError{Path: n.PathString(), Msg: fmt.Sprintf("transition on %s: %v", what, err), Transition: td})
				return out
			}
			t.Targets = append(t.Targets, s)
		}
		c.prepare(t)
		out = append(out, t)
	}
	return out
}

// target resolves a transition target as XState's resolveTarget does.
func (c *compiler) target(n *StateNode, target string) (*StateNode, error) {
	if strings.HasPrefix(target, "#") {
		return c.byID(target)
	}
	internal := strings.HasPrefix(target, ".")
	if internal && n.Parent == nil {
		return c.path(n, target[1:])
	}
	if n.Parent == nil {
		return nil, fmt.Errorf("invalid target %q: it is not a valid target from the root node; did you mean %q?", target, "."+target)
	}
	if internal {
		target = n.Key + target
	}
	return c.path(n.Parent, target)
}

func (c *compiler) byID(ref string) (*StateNode, error) { return c.m.lookupID(ref) }

// lookupID resolves "#id" or "#id.path.to.child".
func (m *Machine) lookupID(ref string) (*StateNode, error) {
	parts := splitPath(ref)
	id := strings.TrimPrefix(parts[0], "#")
	n := m.byID[id]
	if n == nil {
		return nil, fmt.Errorf("child state node '#%s' does not exist on machine '%s'", id, m.ID)
	}
	return m.walk(n, parts[1:])
}

// path resolves a dotted key path from a node.
func (c *compiler) path(n *StateNode, p string) (*StateNode, error) {
	if strings.HasPrefix(p, "#") {
		if s, err := c.byID(p); err == nil {
			return s, nil
		}
	}
	return c.m.walk(n, splitPath(p))
}

func (m *Machine) walk(n *StateNode, keys []string) (*StateNode, error) {
	for _, key := range keys {
		if key == "" {
			break
		}
		if strings.HasPrefix(key, "#") {
			return m.lookupID(key)
		}
		if len(n.Children) == 0 {
			return nil, fmt.Errorf("unable to retrieve child state '%s' from '%s'; no child states exist", key, n.ID)
		}
		child := n.byKey[key]
		if child == nil {
			return nil, fmt.Errorf("child state '%s' does not exist on '%s'", key, n.ID)
		}
		n = child
	}
	return n, nil
}

// splitPath splits a state path on dots, honouring "\." escapes.
func splitPath(p string) []string {
	if !strings.Contains(p, `\`) {
		return strings.Split(p, ".")
	}
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(p); i++ {
		switch {
		case p[i] == '\\' && i+1 < len(p) && p[i+1] == '.':
			cur.WriteByte('.')
			i++
		case p[i] == '.':
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(p[i])
		}
	}
	return append(parts, cur.String())
}

// prepare precomputes a transition's domain when no target is a history
// node (the domain then does not depend on the history value).
func (c *compiler) prepare(t *Transition) {
	t.one = []*Transition{t}
	c.all = append(c.all, t)
	for _, s := range t.Targets {
		if s.Type == History {
			return
		}
	}
	t.static = true
	t.targets = t.Targets
	t.domain, t.noDom = transitionDomain(t, t.Targets)
}

// prepareEntry precomputes a transition's entry set when it does not
// depend on the history value; it needs every node's initial transition.
func (c *compiler) prepareEntry(t *Transition) {
	if !t.static || !t.HasTarget {
		return
	}
	e := &entrySet{toEnter: newNodeSet(len(c.m.Nodes)), defaultEntry: newNodeSet(len(c.m.Nodes))}
	e.compute(t.one)
	if !e.usedHistory {
		t.entry = e
	}
}

func (c *compiler) invoke(n *StateNode, i int, d *InvokeDef) {
	id := d.ID
	if id == "" {
		id = fmt.Sprintf("%d.%s", i, n.ID) // XState's createInvokeId
	}
	inv := &Invocation{ID: id, Src: d.Src, Logic: d.Logic, Input: d.Input, SystemID: d.SystemID, Source: n}
	if d.Src == "" && d.Logic == nil {
		c.fail(n, "invoke %q has no src", id)
		return
	}
	add := func(ev string, defs []*TransitionDef) {
		if len(defs) > 0 {
			n.transitions[ev] = append(n.transitions[ev], c.transitions(n, ev, defs)...)
		}
	}
	add("xstate.done.actor."+id, d.OnDone)
	add("xstate.error.actor."+id, d.OnError)
	add("xstate.snapshot."+id, d.OnSnapshot)
	inv.SyncSnapshot = len(d.OnSnapshot) > 0
	// Inline logic is named as XState names it, so that a persisted child
	// finds its logic again (Machine.childLogic).
	src := d.Src
	if d.Logic != nil {
		src = fmt.Sprintf("xstate.invoke.%d.%s", i, n.ID)
	}
	inv.spawn = &SpawnAction{Src: src, Logic: d.Logic, ID: Static(id), Input: d.Input, SystemID: d.SystemID, SyncSnapshot: inv.SyncSnapshot}
	inv.stop = &StopAction{ID: Static(id)}
	n.Invoke = append(n.Invoke, inv)
}

// initialNodes is XState's getInitialStateNodes: n and its initial
// descendants (every region of a parallel node), in document order.
func initialNodes(n *StateNode) []*StateNode {
	out := []*StateNode{n}
	switch n.Type {
	case Compound:
		out = append(out, initialNodes(n.initial.Targets[0])...)
	case Parallel:
		for _, r := range n.regions {
			out = append(out, initialNodes(r)...)
		}
	}
	return out
}

// Invocation is a compiled invoke of a state node.
type Invocation struct {
	ID           string
	Src          string
	Logic        ActorLogic
	Input        *Expr
	SystemID     string
	Source       *StateNode
	SyncSnapshot bool
	spawn        *SpawnAction
	stop         *StopAction
}

// historyLoops reports whether a history state's default, followed
// through the history states it targets, leads back to it.
func historyLoops(h *StateNode) bool {
	seen := map[*StateNode]bool{}
	var visit func(x *StateNode) bool
	visit = func(x *StateNode) bool {
		if seen[x] {
			return false
		}
		seen[x] = true
		def := historyDefault(x)
		if def == nil {
			return false
		}
		for _, t := range def.Targets {
			if t == h || (t.Type == History && visit(t)) {
				return true
			}
		}
		return false
	}
	return visit(h)
}
