package interp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/stategate/stategate/internal/jsonenc"
)

// ErrRestore is wrapped by every error of Machine.Restore.
var ErrRestore = errors.New("cannot restore snapshot")

// Persisted is a snapshot in the shape of XState's persisted snapshot
// (actor.getPersistedSnapshot()): JSON-ready, and restorable by
// Machine.Restore in another process without running entry actions again.
type Persisted struct {
	Status  string `json:"status"`
	Value   Value  `json:"value"`
	Context any    `json:"context"`
	// HistoryValue maps a history state's id to the nodes it restores,
	// each as {"id": ...} (XState stores the state nodes themselves and
	// reads back their ids).
	HistoryValue map[string][]NodeRef `json:"historyValue"`
	// Children are the child actors, invoked and spawned, by id.
	Children map[string]PersistedChild `json:"children"`
	Output   any                       `json:"output,omitempty"`
	Error    any                       `json:"error,omitempty"`

	// childErr is why a child's snapshot could not be written
	// (MarshalJSON reports it).
	childErr error
}

// PersistedChild is a child actor in a persisted snapshot, as XState
// persists it: its own persisted snapshot, and the name of its logic, by
// which Restore finds the logic again. A child whose logic was given
// inline to spawnChild or spawn has no such name and is not persisted.
type PersistedChild struct {
	// Snapshot is a child machine's Persisted, or another actor's
	// {status, input, output, error, context}, as JSON.
	Snapshot     json.RawMessage `json:"snapshot"`
	Src          string          `json:"src"`
	SystemID     string          `json:"systemId,omitempty"`
	SyncSnapshot bool            `json:"syncSnapshot"`
}

// NodeRef names a state node by id.
type NodeRef struct {
	ID string `json:"id"`
}

// Value is a state value that keeps the order of its keys: a string, or
// an object of child keys. The order matters to XState (it is the order in
// which parallel regions are visited), so a restored snapshot behaves as
// the saved one did.
type Value struct {
	Leaf string
	Keys []ValuePair // nil for a leaf
	obj  bool
}

// ValuePair is one key of a Value object.
type ValuePair struct {
	Key   string
	Value Value
}

// IsObject reports whether the value is an object (not a leaf string).
func (v Value) IsObject() bool { return v.obj }

// Plain converts the value to a string or a map[string]any.
func (v Value) Plain() any {
	if !v.obj {
		return v.Leaf
	}
	m := make(map[string]any, len(v.Keys))
	for _, p := range v.Keys {
		m[p.Key] = p.Value.Plain()
	}
	return m
}

// MarshalJSON writes the value with its keys in order.
func (v Value) MarshalJSON() ([]byte, error) {
	return v.appendJSON(nil), nil
}

func (v Value) appendJSON(dst []byte) []byte {
	if !v.obj {
		return jsonenc.AppendString(dst, v.Leaf)
	}
	dst = append(dst, '{')
	for i, p := range v.Keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonenc.AppendString(dst, p.Key)
		dst = append(dst, ':')
		dst = p.Value.appendJSON(dst)
	}
	return append(dst, '}')
}

// UnmarshalJSON reads a state value, keeping the order of keys.
func (v *Value) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	out, err := readValue(dec)
	if err != nil {
		return fmt.Errorf("state value: %w", err)
	}
	*v = out
	return nil
}

func readValue(dec *json.Decoder) (Value, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Value{}, err
	}
	switch t := tok.(type) {
	case string:
		return Value{Leaf: t}, nil
	case json.Delim:
		if t != '{' {
			break
		}
		v := Value{obj: true, Keys: []ValuePair{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return Value{}, err
			}
			child, err := readValue(dec)
			if err != nil {
				return Value{}, err
			}
			v.Keys = append(v.Keys, ValuePair{Key: kt.(string), Value: child})
		}
		_, err := dec.Token()
		return v, err
	}
	return Value{}, fmt.Errorf("a state value must be a string or an object, not %v", tok)
}

// OrderedValue returns the state value with its keys in XState's order.
func (s *Snapshot) OrderedValue() Value {
	adj := adjacency(s.Machine.full(s.cfg).nodes)
	var walk func(n *StateNode) Value
	walk = func(n *StateNode) Value {
		kids := adj[n]
		if n.Type == Compound && len(kids) > 0 {
			if k := kids[0]; k.Type == Atomic || k.Type == Final {
				return Value{Leaf: k.Key}
			}
		}
		v := Value{obj: true, Keys: make([]ValuePair, 0, len(kids))}
		for _, k := range kids {
			v.Keys = append(v.Keys, ValuePair{k.Key, walk(k)})
		}
		return v
	}
	return walk(s.Machine.Root)
}

// Persist returns the snapshot in XState's persisted shape.
func (s *Snapshot) Persist() *Persisted {
	p := &Persisted{
		Status:       s.Status.String(),
		Value:        s.OrderedValue(),
		Context:      s.Context,
		HistoryValue: map[string][]NodeRef{},
		Children:     map[string]PersistedChild{},
	}
	p.childErr = s.persistChildren(p.Children)
	for id, ids := range s.HistoryValue() {
		refs := make([]NodeRef, len(ids))
		for i, x := range ids {
			refs[i] = NodeRef{x}
		}
		p.HistoryValue[id] = refs
	}
	switch s.Status {
	case StatusDone:
		p.Output = s.Output()
	case StatusError:
		if err := s.Err(); err != nil {
			p.Error = err.Error()
		}
	}
	return p
}

// MarshalJSON writes the snapshot in XState's persisted shape.
func (s *Snapshot) MarshalJSON() ([]byte, error) { return s.Persist().MarshalJSON() }

// MarshalJSON writes the persisted snapshot as json.Marshal would write
// its fields, only faster.
func (p *Persisted) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 256)
	b = append(b, `{"status":`...)
	b = jsonenc.AppendString(b, p.Status)
	b = append(b, `,"value":`...)
	b = p.Value.appendJSON(b)
	b = append(b, `,"context":`...)
	b, err := jsonenc.Append(b, p.Context)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"historyValue":`...)
	if p.HistoryValue == nil {
		b = append(b, "null"...)
	} else {
		ids := slices.Sorted(maps.Keys(p.HistoryValue))
		b = append(b, '{')
		for i, id := range ids {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonenc.AppendString(b, id)
			b = append(b, ':')
			if refs := p.HistoryValue[id]; refs == nil {
				b = append(b, "null"...)
			} else {
				b = append(b, '[')
				for j, r := range refs {
					if j > 0 {
						b = append(b, ',')
					}
					b = append(b, `{"id":`...)
					b = jsonenc.AppendString(b, r.ID)
					b = append(b, '}')
				}
				b = append(b, ']')
			}
		}
		b = append(b, '}')
	}
	if p.childErr != nil {
		return nil, p.childErr
	}
	b = append(b, `,"children":`...)
	if p.Children == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '{')
		for i, id := range slices.Sorted(maps.Keys(p.Children)) {
			c := p.Children[id]
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonenc.AppendString(b, id)
			b = append(b, `:{"snapshot":`...)
			if len(c.Snapshot) == 0 {
				b = append(b, "null"...)
			} else {
				b = append(b, c.Snapshot...)
			}
			b = append(b, `,"src":`...)
			b = jsonenc.AppendString(b, c.Src)
			if c.SystemID != "" {
				b = append(b, `,"systemId":`...)
				b = jsonenc.AppendString(b, c.SystemID)
			}
			b = append(b, `,"syncSnapshot":`...)
			b = strconv.AppendBool(b, c.SyncSnapshot)
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	if p.Output != nil {
		b = append(b, `,"output":`...)
		if b, err = jsonenc.Append(b, p.Output); err != nil {
			return nil, err
		}
	}
	if p.Error != nil {
		b = append(b, `,"error":`...)
		if b, err = jsonenc.Append(b, p.Error); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// Restore makes a snapshot from a persisted one, as XState's
// machine.resolveState/restoreSnapshot: the active nodes are those of the
// value (with missing initial descendants filled in), and no action runs.
// A value that names a state the machine lacks is an error.
func (m *Machine) Restore(p *Persisted) (*Snapshot, error) {
	status, ok := parseStatus(p.Status)
	if !ok {
		return nil, fmt.Errorf("%w: unknown status %q", ErrRestore, p.Status)
	}
	var order []*StateNode
	seen := newNodeSet(len(m.Nodes))
	add := func(n *StateNode) {
		if !seen.has(n.Order) {
			seen.add(n.Order)
			order = append(order, n)
		}
	}
	if !p.Value.obj && p.Value.Leaf == "" && len(m.Root.Children) > 0 {
		return nil, fmt.Errorf("%w: no state value", ErrRestore)
	}
	nodes, err := m.stateNodes(m.Root, p.Value)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRestore, err)
	}
	for _, n := range nodes {
		add(n)
	}
	// XState's getAllStateNodes: fill in the initial states of compound
	// nodes with no active child and of parallel regions not given, then
	// every ancestor.
	for i := 0; i < len(order); i++ {
		n := order[i]
		switch n.Type {
		case Compound:
			has := false
			for _, c := range n.regions {
				has = has || seen.has(c.Order)
			}
			if !has {
				for _, x := range initialWithAncestors(n) {
					add(x)
				}
			}
		case Parallel:
			for _, c := range n.regions {
				if !seen.has(c.Order) {
					for _, x := range initialWithAncestors(c) {
						add(x)
					}
				}
			}
		}
	}
	for i := 0; i < len(order); i++ {
		for _, a := range order[i].ancestors {
			add(a)
		}
	}
	sorted := slices.IsSortedFunc(order, func(a, b *StateNode) int { return a.Order - b.Order })
	if sorted {
		order = nil
	}
	s := &Snapshot{Machine: m, Context: p.Context, Status: status, cfg: m.intern(seen, order)}
	if len(p.HistoryValue) > 0 && m.histories > 0 {
		h := make(historyValue, m.histories)
		for id, refs := range p.HistoryValue {
			hn := m.byID[id]
			if hn == nil || hn.Type != History {
				continue // XState skips what it cannot resolve
			}
			var list []*StateNode
			for _, r := range refs {
				if x := m.byID[r.ID]; x != nil {
					list = append(list, x)
				}
			}
			h[hn.hidx] = list // nil (nothing recorded) when none resolved
		}
		s.own().history = h
	}
	switch status {
	case StatusDone:
		s.own().output = p.Output
	case StatusError:
		s.own().err = &ThrownError{Value: p.Error}
	}
	if len(p.Children) > 0 {
		// Made into actors by the actor that starts from the snapshot.
		s.own().persisted = maps.Clone(p.Children)
	}
	return s, nil
}

// parseStatus reads a persisted status ("" is active).
func parseStatus(st string) (Status, bool) {
	switch st {
	case "", "active":
		return StatusActive, true
	case "done":
		return StatusDone, true
	case "error":
		return StatusError, true
	case "stopped":
		return StatusStopped, true
	}
	return 0, false
}

// stateNodes is XState's getStateNodes: the nodes a state value names.
func (m *Machine) stateNodes(n *StateNode, v Value) ([]*StateNode, error) {
	if !v.obj {
		c := n.byKey[v.Leaf]
		if c == nil {
			return nil, fmt.Errorf("state %q does not exist on %q", v.Leaf, n.ID)
		}
		return []*StateNode{n, c}, nil
	}
	out := []*StateNode{m.Root, n}
	children := make([]*StateNode, 0, len(v.Keys))
	for _, p := range v.Keys {
		c := n.byKey[p.Key]
		if c == nil {
			return nil, fmt.Errorf("state %q does not exist on %q", p.Key, n.ID)
		}
		children = append(children, c)
	}
	out = append(out, children...)
	for i, p := range v.Keys {
		sub, err := m.stateNodes(children[i], p.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
	}
	return out, nil
}

// initialWithAncestors is XState's getInitialStateNodesWithTheirAncestors.
func initialWithAncestors(n *StateNode) []*StateNode {
	out := initialNodes(n)
	seen := map[*StateNode]bool{}
	for _, x := range out {
		seen[x] = true
	}
	for _, x := range slices.Clone(out) {
		for _, a := range x.ancestors {
			if a == n {
				break
			}
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	return out
}

// String renders a value compactly, for messages: "a.b" or {"a":"x"}.
func (v Value) String() string {
	if !v.obj {
		return v.Leaf
	}
	if len(v.Keys) == 1 && !v.Keys[0].Value.obj {
		return v.Keys[0].Key + "." + v.Keys[0].Value.Leaf
	}
	b, _ := v.MarshalJSON()
	return strings.TrimSpace(string(b))
}

// Prune cuts a state value where it names a state the machine lacks: a
// part of the value whose state was removed falls back to the nearest
// surviving ancestor, which Restore then fills with its initial states.
// It reports whether anything was cut.
func (m *Machine) Prune(v Value) (Value, bool) {
	return prune(m.Root, v)
}

func prune(n *StateNode, v Value) (Value, bool) {
	if !v.obj {
		if n.byKey[v.Leaf] != nil {
			return v, false
		}
		return Value{obj: true, Keys: []ValuePair{}}, true
	}
	out := Value{obj: true, Keys: make([]ValuePair, 0, len(v.Keys))}
	cut := false
	for _, p := range v.Keys {
		c := n.byKey[p.Key]
		if c == nil {
			cut = true
			continue
		}
		sub, subCut := prune(c, p.Value)
		cut = cut || subCut
		out.Keys = append(out.Keys, ValuePair{p.Key, sub})
	}
	return out, cut
}
