package graph

import (
	"encoding/json"
	"strings"

	"github.com/stategate/stategate/interp"
)

// Mermaid returns the machine as a Mermaid stateDiagram-v2: the machine is
// a composite state named after its id, compound states nested composite
// states, the regions of a parallel state separated by "--". The package
// documentation lists what Mermaid cannot draw and what is drawn instead.
func Mermaid(m *interp.Machine, o Options) string {
	w := &mermaidWriter{o: &o, at: map[*interp.StateNode][]edge{}}
	// Each transition is written in the body of its ends' parent when they
	// are siblings, else at the top level (nil): see holder.
	for _, e := range edges(m, &o) {
		e = outOfRegions(e)
		c := holder(e.from, e.to)
		w.at[c] = append(w.at[c], e)
	}
	if o.Title != "" {
		w.line(0, "---")
		title, _ := json.Marshal(o.Title) // a YAML string
		w.line(0, "title: "+string(title))
		w.line(0, "---")
	}
	w.line(0, "stateDiagram-v2")
	if o.Active != nil {
		w.line(1, "classDef active fill:"+colActiveFill+",stroke:"+colActiveLine+",stroke-width:3px,font-weight:bold")
		w.line(1, "classDef activeBox stroke:"+colActiveLine+",stroke-width:3px")
	}
	w.state(m.Root, 1)
	w.transitions(nil, 1)
	if o.Context != nil {
		w.line(1, "note right of "+ID(m.Root))
		w.line(2, "context")
		rows := contextRows(o.Context)
		for _, r := range rows {
			if r[0] == "" {
				w.line(2, mermaidNote(r[1]))
			} else {
				w.line(2, mermaidNote(r[0]+": "+r[1]))
			}
		}
		w.line(1, "end note")
	}
	for _, n := range m.Nodes {
		switch {
		case !o.active(n):
		case isBox(n):
			w.line(1, "class "+ID(n)+" activeBox")
		default:
			w.line(1, "class "+ID(n)+" active")
		}
	}
	return w.b.String()
}

type mermaidWriter struct {
	b  strings.Builder
	o  *Options
	at map[*interp.StateNode][]edge
}

func (w *mermaidWriter) line(depth int, s string) {
	for range depth {
		w.b.WriteString("  ")
	}
	w.b.WriteString(s)
	w.b.WriteByte('\n')
}

// outOfRegions moves a transition's ends that are regions of a parallel
// state to the parallel state, noting the region in its label: Mermaid
// fails on a transition that names a region ("No such shape: divider").
func outOfRegions(e edge) edge {
	if region(e.from) {
		key := e.from.Key
		for region(e.from) {
			e.from = e.from.Parent
		}
		e.label += " (in " + key + ")"
	}
	if e.to != nil && region(e.to) {
		key := e.to.Key
		for region(e.to) {
			e.to = e.to.Parent
		}
		e.label += " (to " + key + ")"
	}
	return e
}

// holder is the state in whose body a transition is written: the parent
// of both ends when they are siblings (or one state), unless it is a
// parallel state (whose body holds its regions only); else nil, the top
// level. Mermaid makes a state a child of the composite state whose body
// names it, so a transition between states of different composite states
// is written outside them all, where it moves none.
func holder(from, to *interp.StateNode) *interp.StateNode {
	if to == nil {
		to = from
	}
	if p := from.Parent; p != nil && p == to.Parent && p.Type != interp.Parallel {
		return p
	}
	return nil
}

func (w *mermaidWriter) state(n *interp.StateNode, depth int) {
	id := ID(n)
	label := n.Key
	if n.Type == interp.History {
		label = historyLabel(n)
	}
	w.line(depth, `state "`+mermaidText(label)+`" as `+id)
	if isBox(n) {
		w.line(depth, "state "+id+" {")
		in := depth + 1
		if n.Type == interp.Compound {
			if c := n.InitialChild(); c != nil {
				w.line(in, "[*] --> "+ID(c))
			}
		}
		for i, c := range n.Children {
			if n.Type == interp.Parallel && i > 0 {
				w.line(in, "--")
			}
			w.state(c, in)
		}
		w.transitions(n, in)
		w.line(depth, "}")
	}
	if n.Type == interp.Final {
		w.line(depth, id+" --> [*]")
	}
}

func (w *mermaidWriter) transitions(holder *interp.StateNode, depth int) {
	for _, e := range w.at[holder] {
		to := e.from
		if e.to != nil {
			to = e.to
		}
		w.line(depth, ID(e.from)+" --> "+ID(to)+" : "+mermaidText(e.label))
	}
}

// mermaidText makes text safe in a Mermaid label. Mermaid 11 does not
// decode its entity codes (#quot;) in a state diagram's labels, and the
// labels are Markdown and HTML: the characters that would end a label or a
// statement become lookalikes (" ', ; ,), angle brackets ‹ ›, line breaks
// spaces, and stars are escaped when there are two (Markdown's emphasis).
func mermaidText(s string) string {
	s = mermaidReplacer.Replace(s)
	if strings.Count(s, "*") > 1 {
		s = strings.ReplaceAll(s, "*", `\*`)
	}
	return s
}

var mermaidReplacer = strings.NewReplacer(`"`, "'", ";", ",", "<", "‹", ">", "›", "\n", " ", "\r", " ")

// mermaidNote makes text safe on a line of a note (HTML and Markdown).
func mermaidNote(s string) string {
	s = noteReplacer.Replace(s)
	if strings.Count(s, "*") > 1 {
		s = strings.ReplaceAll(s, "*", `\*`)
	}
	return s
}

var noteReplacer = strings.NewReplacer("<", "‹", ">", "›", "\n", " ", "\r", " ")
