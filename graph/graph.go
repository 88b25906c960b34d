// Package graph draws machines: a compiled [interp.Machine] as Graphviz DOT
// text ([DOT]), as an SVG laid out by Graphviz ([SVG]), or as Mermaid
// stateDiagram-v2 text to paste into Markdown ([Mermaid]).
//
// It owns the picture of a machine as XState's visualizer draws one:
// compound states as nested boxes, the regions of a parallel state side by
// side in dashed boxes, the initial state marked by a filled dot, final
// states with a double border, history states as a circle "H" (shallow) or
// "H*" (deep), and transitions labelled with the event, the guard's name
// and the MCP tool the event becomes ("SUBMIT [canSubmit] / invoice_submit").
// `after` transitions read "after 1000ms" (or the named delay), eventless
// ones "always", a state's onDone "onDone", an invoked actor's handlers
// "onDone (id)", "onError (id)" and "onSnapshot (id)"; a wildcard stays
// "*". A targetless transition is a dashed self-loop. Given an instance
// ([Options].Active and [Options].Context), its active states are filled
// in light blue with a bold blue border, and its context is a table beside
// the machine.
//
// Every state is drawn under a generated id, [ID]: "s" and its index in
// document order (s0 is the root), so that keys with dots, spaces or quotes
// are safe in DOT and Mermaid and the same state keeps its id in every
// drawing of a machine. The key is the label. In the SVG, a state's group
// (<g>, a node or a cluster) has that id and, after Graphviz's own "node"
// or "cluster", the classes "state", its type ("atomic", "compound",
// "parallel", "final", "history") and, when active, "active"; the context
// is the group "context". The output is deterministic: states and transitions in
// document order.
//
// What a drawing shows of a transition comes from interp's public view of
// a compiled machine: the `on` descriptors (StateNode.On), the `after`
// events (the delayed raise each state's entry holds), `always`, onDone and
// the handlers of invoked actors. A history state's default target is not
// in that view, so it is not drawn.
//
// SVG lays the DOT text out with github.com/goccy/go-graphviz: Graphviz
// compiled to WebAssembly and run by wazero, in pure Go, with no system
// install. That library instantiates its module when the program starts
// (its package init: about a second to compile the module the first time,
// then some 50 ms with the compilation cache it keeps in
// $TMPDIR/go-graphviz) and the module runs one call at a time: SVG
// serializes its calls on one cached Graphviz instance (a layout takes a
// few milliseconds). A layout cannot be stopped once it runs, and dot's
// time grows much faster than a machine's size: SVG and PNG refuse a
// machine over the diagram limits (MaxStates, MaxTransitions) with
// ErrTooLarge, and a caller whose context ends gives its layout up at once
// while it finishes in the background.
//
// Mermaid's limits, and how they are met (checked with Mermaid 11.17):
//   - A composite state cannot be declared with a label and a body in one
//     statement, so each state is declared (`state "key" as s3`) before its
//     body (`state s3 { ... }`).
//   - The machine is wrapped in a composite state named after its id (as
//     the DOT drawing's outer box), so that the root's own transitions and
//     the regions of a parallel root have a place.
//   - Mermaid makes a state a child of every composite state whose body
//     names it: a transition written inside a composite state drags the
//     other end in. So a transition is written in its parent's body only
//     between siblings (or as a self-loop); any other, such as one between
//     inner states of different composite states, is written at the top
//     level, where Mermaid draws it across the boxes without moving them.
//   - Mermaid fails ("No such shape: divider") on a transition that names
//     a region of a parallel state: such an end is drawn at the parallel
//     state, its label saying which region ("onDone (in shipping)").
//   - Mermaid has no history pseudo-state: a history state is a state
//     labelled "H" or "H*". It has no dashed transitions: a targetless
//     transition is a plain self-loop.
//   - Mermaid does not decode its entity codes (#quot;) in state diagram
//     labels, which are Markdown and HTML: in a label, " becomes ', ;
//     becomes , (it would end the statement), < and > become ‹ and ›, and
//     stars are escaped when there are two.
//   - Active states get `class X active` (a blue fill); an active
//     composite state `class X activeBox` (a blue border only, so that
//     its active children stand out).
//   - The context is a note beside the machine's outer box.
//
// [PNG] renders the same drawing as an image, for a look at it where no
// SVG viewer is at hand (go-graphviz's own renderer: plainer than the SVG).
//
// docs/invoice.svg, the README's picture, is the bundled invoice with an
// instance in review (handle INV-2041, saved in a store at DIR):
//
//	go run ./cmd/stategate graph machines/invoice.json --data DIR --handle INV-2041 -o docs/invoice.svg
package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/stategate/stategate/interp"
)

// Options say what to draw besides the machine.
type Options struct {
	// Active reports the states to highlight (an instance's active
	// states, snapshot.Active); nil: none.
	Active func(*interp.StateNode) bool
	// Tools maps an event type to the MCP tool it becomes, shown on the
	// transitions it labels ("SUBMIT / invoice_submit").
	Tools map[string]string
	// Context is an instance's context, shown beside the diagram (a
	// table of its top-level properties); nil: none. It is written as
	// encoding/json writes it (a json.RawMessage keeps its key order).
	Context any
	// Title is the drawing's title; "": none.
	Title string
}

// ID is the id a state is drawn under: "s" and its index in document
// order ("s0" for the root). It names the state's group in the SVG.
func ID(n *interp.StateNode) string { return "s" + strconv.Itoa(n.Order) }

func (o *Options) active(n *interp.StateNode) bool { return o.Active != nil && o.Active(n) }

// edge is one arrow: a transition to one of its targets, or a targetless
// transition (to == nil).
type edge struct {
	from, to *interp.StateNode
	label    string
}

// edges lists the machine's transitions in document order: by source
// state, then `on` (in the order written), `after`, `always`, onDone and
// the invoked actors' handlers; a transition with several targets makes
// one edge per target.
func edges(m *interp.Machine, o *Options) []edge {
	var out []edge
	add := func(n *interp.StateNode, event string, ts []*interp.Transition) {
		for _, t := range ts {
			label := event
			if t.Guard != nil {
				label += " [" + guardName(t.Guard) + "]"
			}
			if tool := o.Tools[t.Event]; tool != "" && t.Event != "" {
				label += " / " + tool
			}
			if len(t.Targets) == 0 {
				out = append(out, edge{from: n, label: label})
				continue
			}
			for _, target := range t.Targets {
				out = append(out, edge{from: n, to: target, label: label})
			}
		}
	}
	for _, n := range m.Nodes {
		written := map[string]bool{}
		for _, d := range n.On {
			written[d] = true
			add(n, d, n.Transitions(d))
		}
		// interp compiles `after` into a delayed raise on entry, whose id
		// is the event the state's delayed transitions wait for.
		for _, a := range n.Entry {
			r, ok := a.(*interp.RaiseAction)
			if !ok || r.ID == nil || r.ID.Fn != nil {
				continue
			}
			ev, _ := r.ID.Value.(string)
			delay, ok := afterDelay(ev, n)
			if !ok || written[ev] {
				continue
			}
			written[ev] = true
			label := "after " + delay + "ms"
			if r.DelayName != "" {
				label = "after " + r.DelayName
			}
			add(n, label, n.Transitions(ev))
		}
		add(n, "always", n.Always)
		if ev := "xstate.done.state." + n.ID; !written[ev] {
			add(n, "onDone", n.Transitions(ev))
		}
		for i, inv := range n.Invoke {
			name := inv.ID
			if name == fmt.Sprintf("%d.%s", i, n.ID) && inv.Src != "" {
				name = inv.Src // XState's generated id: the source says more
			}
			for _, h := range [...]struct{ prefix, label string }{
				{"xstate.done.actor.", "onDone"}, {"xstate.error.actor.", "onError"}, {"xstate.snapshot.", "onSnapshot"},
			} {
				if ev := h.prefix + inv.ID; !written[ev] {
					written[ev] = true
					add(n, h.label+" ("+name+")", n.Transitions(ev))
				}
			}
		}
	}
	return out
}

// afterDelay returns the delay of an `after` event of n
// ("xstate.after.DELAY.ID").
func afterDelay(ev string, n *interp.StateNode) (string, bool) {
	const prefix = "xstate.after."
	suffix := "." + n.ID
	if !strings.HasPrefix(ev, prefix) || !strings.HasSuffix(ev, suffix) || len(ev) < len(prefix)+len(suffix) {
		return "", false
	}
	return ev[len(prefix) : len(ev)-len(suffix)], true
}

// GuardName names a guard as a machine's config does, and as the
// drawings label transitions: its type, and XState's combinators around
// their guards ("and(isAdmin, not(locked))").
func GuardName(g interp.Guard) string { return guardName(g) }

func guardName(g interp.Guard) string {
	switch g := g.(type) {
	case *interp.NamedGuard:
		return g.Type
	case *interp.FuncGuard:
		if g.Name != "" {
			return g.Name
		}
		return "inline"
	case *interp.AndGuard:
		return "and(" + guardList(g.Guards) + ")"
	case *interp.OrGuard:
		return "or(" + guardList(g.Guards) + ")"
	case *interp.NotGuard:
		return "not(" + guardName(g.Guard) + ")"
	case *interp.StateInGuard:
		if s, ok := g.State.(string); ok {
			return "stateIn(" + s + ")"
		}
		b, _ := json.Marshal(g.State)
		return "stateIn(" + string(b) + ")"
	}
	return "guard"
}

func guardList(gs []interp.Guard) string {
	names := make([]string, len(gs))
	for i, g := range gs {
		names[i] = guardName(g)
	}
	return strings.Join(names, ", ")
}

// isBox reports whether a state is drawn as a box holding others (a DOT
// cluster, a Mermaid composite state).
func isBox(n *interp.StateNode) bool {
	return n.Type == interp.Compound || n.Type == interp.Parallel
}

// contains reports whether a is n or one of n's ancestors.
func contains(a, n *interp.StateNode) bool {
	for ; n != nil; n = n.Parent {
		if n == a {
			return true
		}
	}
	return false
}

// historyLabel is a history state's symbol.
func historyLabel(n *interp.StateNode) string {
	if n.Deep {
		return "H*"
	}
	return "H"
}

// contextRows returns the context as rows of a table: its top-level
// properties in order, each value as one line of JSON (shortened), or one
// row without a name for a context that is not an object.
func contextRows(v any) [][2]string {
	data, err := json.Marshal(v)
	if err != nil {
		return [][2]string{{"", shorten(fmt.Sprint(v))}}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return [][2]string{{"", shorten(compact(data))}}
	}
	var rows [][2]string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			break
		}
		rows = append(rows, [2]string{key, shorten(compact(raw))})
	}
	if len(rows) == 0 {
		return [][2]string{{"", "{}"}}
	}
	return rows
}

func compact(data []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, data); err != nil {
		return string(data)
	}
	return b.String()
}

// maxValue bounds a context value's line.
const maxValue = 48

func shorten(s string) string {
	if r := []rune(s); len(r) > maxValue {
		return string(r[:maxValue-1]) + "…"
	}
	return s
}

// wrap breaks text into lines of at most width runes, at spaces (a longer
// word is a line of its own).
func wrap(text string, width int) []string {
	var lines []string
	var cur []rune
	for _, w := range strings.Fields(text) {
		r := []rune(w)
		if len(cur) > 0 && len(cur)+1+len(r) > width {
			lines = append(lines, string(cur))
			cur = cur[:0]
		}
		if len(cur) > 0 {
			cur = append(cur, ' ')
		}
		cur = append(cur, r...)
	}
	if len(cur) > 0 {
		lines = append(lines, string(cur))
	}
	return lines
}
