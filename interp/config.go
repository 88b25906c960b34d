package interp

import (
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"
)

// config is an interned configuration of a machine: its active state nodes
// as a set and in XState's order, with what steps ask of it precomputed,
// and a cache of the microsteps taken from it. Configs are immutable but
// for the cache, and shared by every snapshot of the machine that is in
// them.
type config struct {
	set   nodeSet
	nodes []*StateNode // XState's order
	// atomics are the atomic and final nodes, in order: where eventless
	// transitions are looked for.
	atomics []*StateNode
	// always tells whether an active node has eventless transitions.
	always bool
	// value is the state value when it is a string (the one active child
	// of a compound root, an atomic or final state), made once; nil when
	// the value is an object.
	value any

	mu    sync.Mutex
	steps atomic.Pointer[map[stepKey]*stepResult]
	done  atomic.Pointer[config]
	// full is the configuration completed as XState's getAllStateNodes
	// completes one (see full); c itself when it is complete.
	full atomic.Pointer[config]
}

// full returns c completed as XState completes a snapshot's nodes for its
// value and for selecting an event's transitions (getAllStateNodes): a
// compound state with no active child gets its initial descendants, a
// parallel state its missing regions (at their initial states), every
// node its ancestors. A configuration made by ordinary steps is complete;
// XState leaves some incomplete (a transition into a region's history
// taken with one that re-enters the parallel state): their tags, stateIn
// and eventless transitions see the nodes as they are, their value and
// events the completed ones.
func (m *Machine) full(c *config) *config {
	if f := c.full.Load(); f != nil {
		return f
	}
	set := c.set.clone()
	nodes := slices.Clone(c.nodes)
	add := func(n *StateNode) {
		if !set.has(n.Order) {
			set.add(n.Order)
			nodes = append(nodes, n)
		}
	}
	// addInitial adds n's initial states with their ancestors up to n.
	var addInitial func(n *StateNode)
	addInitial = func(n *StateNode) {
		add(n)
		switch n.Type {
		case Compound:
			if n.initial != nil && len(n.initial.Targets) > 0 {
				t := n.initial.Targets[0]
				for a := t.Parent; a != nil && a != n; a = a.Parent {
					add(a)
				}
				addInitial(t)
			}
		case Parallel:
			for _, r := range n.regions {
				if r.Type != History {
					addInitial(r)
				}
			}
		}
	}
	hasChild := func(n *StateNode) bool {
		for _, k := range n.regions {
			if c.set.has(k.Order) {
				return true
			}
		}
		return false
	}
	for i := 0; i < len(nodes); i++ {
		n := nodes[i]
		switch n.Type {
		case Compound:
			if i >= len(c.nodes) || !hasChild(n) {
				addInitial(n)
			}
		case Parallel:
			for _, r := range n.regions {
				if r.Type != History && !set.has(r.Order) {
					addInitial(r)
				}
			}
		}
	}
	for i := 0; i < len(nodes); i++ {
		for a := nodes[i].Parent; a != nil; a = a.Parent {
			add(a)
		}
	}
	f := c
	if len(nodes) != len(c.nodes) {
		f = m.intern(set, nodes)
	}
	c.full.Store(f)
	return f
}

// doneConfig returns the configuration of a machine that reached its final
// state in c: the same nodes in reverse document order, as XState leaves
// them after exiting every state.
func (m *Machine) doneConfig(c *config) *config {
	if d := c.done.Load(); d != nil {
		return d
	}
	nodes := make([]*StateNode, 0, len(c.nodes))
	for i := c.set.prev(len(m.Nodes) - 1); i >= 0; i = c.set.prev(i - 1) {
		nodes = append(nodes, m.Nodes[i])
	}
	d := m.intern(c.set, nodes)
	c.done.Store(d)
	return d
}

// stepResult is what a microstep of one transition does to the
// configuration, when that does not depend on the history value.
type stepResult struct {
	next   *config
	exits  []*StateNode // reverse document order
	enters []*StateNode // document order
	// base is the configuration less the exited nodes: where entering
	// starts (needed only when a final node is entered).
	base     nodeSet
	hasFinal bool
	// records are the history values recorded by the exits.
	records []historyRecord
}

type historyRecord struct {
	h     *StateNode
	nodes []*StateNode
}

// maxConfigs bounds the configurations a machine interns; past it,
// configurations are made afresh, without a step cache.
const maxConfigs = 1 << 14

// configTable interns a machine's configurations.
type configTable struct {
	mu    sync.Mutex
	small map[uint64]*config // one-word sets in document order
	other map[string]*config
}

// intern returns the config with the set and order (nil: document order).
func (m *Machine) intern(set nodeSet, order []*StateNode) *config {
	t := m.configs
	var buf [128]byte
	var key []byte
	small := len(set) == 1 && order == nil
	if !small {
		key = buf[:0]
		for _, w := range set {
			key = binary.LittleEndian.AppendUint64(key, w)
		}
		for _, n := range order {
			key = binary.LittleEndian.AppendUint16(key, uint16(n.Order))
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if small {
		if c := t.small[set[0]]; c != nil {
			return c
		}
	} else if c := t.other[string(key)]; c != nil {
		return c
	}
	c := m.newConfig(set.clone(), order)
	if len(t.small)+len(t.other) >= maxConfigs {
		return c
	}
	if small {
		if t.small == nil {
			t.small = map[uint64]*config{}
		}
		t.small[set[0]] = c
	} else {
		if t.other == nil {
			t.other = map[string]*config{}
		}
		t.other[string(key)] = c
	}
	return c
}

func (m *Machine) newConfig(set nodeSet, order []*StateNode) *config {
	c := &config{set: set, nodes: order}
	if c.nodes == nil {
		for i := set.next(0); i >= 0; i = set.next(i + 1) {
			c.nodes = append(c.nodes, m.Nodes[i])
		}
	}
	for _, n := range c.nodes {
		if n.Type == Atomic || n.Type == Final {
			c.atomics = append(c.atomics, n)
		}
		if len(n.Always) > 0 {
			c.always = true
		}
	}
	if len(c.nodes) == 2 && m.Root.Type == Compound {
		for _, n := range c.nodes {
			if n.Parent == m.Root && (n.Type == Atomic || n.Type == Final) {
				c.value = n.Key
			}
		}
	}
	return c
}

// stepKey names a cached step: a transition and, for one whose entry set
// depends on history, the history value it was taken with.
type stepKey struct {
	t       *Transition
	history string
}

// maxHistorySteps bounds the history-dependent steps a configuration
// caches.
const maxHistorySteps = 64

// step returns the cached result of taking t from c with a history value
// (only read when t's entry set depends on it), computing it on the first
// call.
func (c *config) step(m *Machine, t *Transition, history historyValue) *stepResult {
	key := stepKey{t: t}
	if t.entry == nil && len(t.Targets) > 0 {
		key.history = history.fingerprint()
	}
	if steps := c.steps.Load(); steps != nil {
		if r := (*steps)[key]; r != nil {
			return r
		}
	}
	r := m.computeStep(c, t, history)
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.steps.Load()
	steps := make(map[stepKey]*stepResult, 1)
	if old != nil {
		if r0 := (*old)[key]; r0 != nil {
			return r0
		}
		if len(*old) >= maxHistorySteps && key.history != "" {
			return r // enough cached: compute such steps each time
		}
		for k, v := range *old {
			steps[k] = v
		}
	}
	steps[key] = r
	c.steps.Store(&steps)
	return r
}

// fingerprint encodes a history value for a cache key.
func (h historyValue) fingerprint() string {
	var b []byte
	for i, nodes := range h {
		if nodes == nil {
			continue
		}
		b = binary.LittleEndian.AppendUint16(b, uint16(i))
		b = binary.LittleEndian.AppendUint16(b, uint16(len(nodes)))
		for _, n := range nodes {
			b = binary.LittleEndian.AppendUint16(b, uint16(n.Order))
		}
	}
	return string(b)
}

// computeStep computes what taking t (a transition whose entry set does not
// depend on history) does to configuration c.
func (m *Machine) computeStep(c *config, t *Transition, history historyValue) *stepResult {
	r := &stepResult{}
	set := c.set.clone()
	exit := newNodeSet(len(m.Nodes))
	exitSet(t, set, history, exit)
	for i := exit.prev(len(m.Nodes) - 1); i >= 0; i = exit.prev(i - 1) {
		x := m.Nodes[i]
		r.exits = append(r.exits, x)
		for _, h := range x.histories {
			rec := []*StateNode{}
			for k := set.next(0); k >= 0; k = set.next(k + 1) {
				n := m.Nodes[k]
				if h.Deep {
					if (n.Type == Atomic || n.Type == Final) && isDescendant(n, x) {
						rec = append(rec, n)
					}
				} else if n.Parent == x {
					rec = append(rec, n)
				}
			}
			r.records = append(r.records, historyRecord{h, rec})
		}
	}
	for _, x := range r.exits {
		set.del(x.Order)
	}
	r.base = set.clone()
	var entered nodeSet
	if t.entry != nil {
		entered = t.entry.toEnter.clone()
	} else {
		// The targets' history is what the exits just recorded, as in
		// XState (a transition may leave a state and restore it at once).
		if len(r.records) > 0 {
			h := make(historyValue, m.histories)
			copy(h, history)
			for _, rec := range r.records {
				h[rec.h.hidx] = rec.nodes
			}
			history = h
		}
		e := entrySet{history: history, toEnter: newNodeSet(len(m.Nodes)), defaultEntry: newNodeSet(len(m.Nodes))}
		e.compute(t.one)
		entered = e.toEnter
	}
	for i := entered.next(0); i >= 0; i = entered.next(i + 1) {
		n := m.Nodes[i]
		r.enters = append(r.enters, n)
		r.hasFinal = r.hasFinal || n.Type == Final
		set.add(i)
	}
	var exited nodeSet
	if len(r.exits) > 0 {
		exited = exit
	}
	if (len(r.exits) == 0 && len(r.enters) == 0) || (len(r.records) == 0 && set.equal(c.set)) {
		// The same nodes (a state left and entered again) and no history
		// recorded: XState keeps the snapshot's node order, and so the
		// snapshot itself when nothing else changed.
		r.next = c
		return r
	}
	r.next = m.intern(set, orderOf(m, c, set, exited, entered))
	return r
}

// orderOf computes the new order of the active nodes: the nodes kept, in
// their order, then those entered, in document order (XState's Set
// semantics). It returns nil when that is the document order. It removes
// the kept nodes from entered.
func orderOf(m *Machine, c *config, set, exited, entered nodeSet) []*StateNode {
	var nodes []*StateNode
	sorted := true
	push := func(n *StateNode) {
		if len(nodes) > 0 && n.Order < nodes[len(nodes)-1].Order {
			sorted = false
		}
		nodes = append(nodes, n)
	}
	for _, n := range c.nodes {
		if (exited == nil || !exited.has(n.Order)) && set.has(n.Order) {
			push(n)
			entered.del(n.Order)
		}
	}
	for i := entered.next(0); i >= 0; i = entered.next(i + 1) {
		push(m.Nodes[i])
	}
	if sorted {
		return nil
	}
	return nodes
}
