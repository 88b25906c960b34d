package graph

import (
	"strings"

	"github.com/stategate/stategate/interp"
)

// The drawing's colours: slate lines and text, blue for what is active.
const (
	colLine       = "#475569"
	colText       = "#0f172a"
	colMuted      = "#64748b"
	colActiveLine = "#1d4ed8"
	colActiveFill = "#bfdbfe"
	colActiveBox  = "#eff6ff"
	colNoteFill   = "#fefce8"
	colNoteLine   = "#a16207"
	font          = "Helvetica"
	descWidth     = 34 // runes per line of a description
)

// DOT returns the machine as a Graphviz digraph: compound and parallel
// states are clusters (cluster_ID, holding an invisible node ID_anchor
// that the transitions to and from the state attach to, clipped at the
// cluster's border), other states nodes named by [ID]. A state's
// self-loops of one kind are drawn as one loop, a line of its label per
// transition.
func DOT(m *interp.Machine, o Options) string {
	d := &dotWriter{o: &o}
	d.line(0, "digraph machine {")
	d.line(1, `graph [compound=true fontname=`+font+` fontsize=12 fontcolor="`+colText+`" nodesep=0.35 ranksep=0.45 pad=0.2]`)
	d.line(1, `node [fontname=`+font+` fontsize=12 fontcolor="`+colText+`" shape=box style="rounded,filled" fillcolor=white color="`+colLine+`" margin="0.14,0.06"]`)
	d.line(1, `edge [fontname=`+font+` fontsize=10 fontcolor="`+colText+`" color="`+colLine+`" arrowsize=0.7]`)
	if o.Title != "" {
		d.line(1, `label=`+dotString(o.Title)+` labelloc=t fontsize=16`)
	}
	d.state(m.Root, 1)
	if o.Context != nil {
		d.context(1)
	}
	// A state's self-loops of one kind (targetless, or back to the state)
	// are one loop with a line per transition: Graphviz stacks loops so
	// that each crosses the label of the one inside it.
	es := edges(m, &o)
	type loop struct {
		n          *interp.StateNode
		targetless bool
	}
	first := map[loop]int{}
	var lines [][]string
	for i, e := range es {
		lines = append(lines, []string{e.label})
		if e.to != nil && e.to != e.from {
			continue
		}
		k := loop{e.from, e.to == nil}
		if j, ok := first[k]; ok {
			lines[j] = append(lines[j], e.label)
			lines[i] = nil
			continue
		}
		first[k] = i
	}
	for i, e := range es {
		if lines[i] != nil {
			d.edge(e, lines[i])
		}
	}
	d.line(0, "}")
	return d.b.String()
}

type dotWriter struct {
	b strings.Builder
	o *Options
}

func (d *dotWriter) line(depth int, s string) {
	for range depth {
		d.b.WriteString("  ")
	}
	d.b.WriteString(s)
	d.b.WriteByte('\n')
}

// region reports whether n is a region of a parallel state.
func region(n *interp.StateNode) bool { return n.Parent != nil && n.Parent.Type == interp.Parallel }

func classes(n *interp.StateNode, active bool) string {
	c := "state " + n.Type.String()
	if active {
		c += " active"
	}
	return c
}

func (d *dotWriter) state(n *interp.StateNode, depth int) {
	id := ID(n)
	active := d.o.active(n)
	if !isBox(n) {
		attrs := []string{`id="` + id + `"`, `class="` + classes(n, active) + `"`}
		style := []string{"rounded", "filled"}
		switch n.Type {
		case interp.History:
			attrs = append(attrs, "shape=circle", "fixedsize=true", "width=0.42", `label="`+historyLabel(n)+`"`, "fontsize=11")
			style = []string{"filled"}
		case interp.Final:
			attrs = append(attrs, "peripheries=2", "label="+nodeLabel(n))
		default:
			attrs = append(attrs, "label="+nodeLabel(n))
		}
		if region(n) {
			style = append(style, "dashed")
		}
		if active {
			attrs = append(attrs, `fillcolor="`+colActiveFill+`"`, `color="`+colActiveLine+`"`, "penwidth=2.5")
		}
		attrs = append(attrs, `style="`+strings.Join(style, ",")+`"`)
		d.line(depth, id+" ["+strings.Join(attrs, " ")+"]")
		return
	}
	d.line(depth, "subgraph cluster_"+id+" {")
	in := depth + 1
	style := "rounded,filled"
	if region(n) {
		style += ",dashed"
	}
	fill, line, pen := "white", colLine, "1"
	if active {
		fill, line, pen = colActiveBox, colActiveLine, "2"
	}
	d.line(in, `id="`+id+`" class="`+classes(n, active)+`" label=`+clusterLabel(n)+` labeljust=l style="`+style+`" fillcolor="`+fill+`" color="`+line+`" penwidth=`+pen)
	d.line(in, id+`_anchor [shape=point style=invis width=0.01 height=0.01]`)
	if n.Type == interp.Compound {
		if c := n.InitialChild(); c != nil {
			d.line(in, id+`_initial [shape=point fillcolor="`+colText+`" color="`+colText+`" width=0.14]`)
			if isBox(c) {
				d.line(in, id+"_initial -> "+ID(c)+"_anchor [lhead=cluster_"+ID(c)+"]")
			} else {
				d.line(in, id+"_initial -> "+ID(c))
			}
		}
	}
	for _, c := range n.Children {
		d.state(c, in)
	}
	d.line(depth, "}")
}

func (d *dotWriter) edge(e edge, labels []string) {
	var attrs []string
	tail := ID(e.from)
	if isBox(e.from) {
		tail += "_anchor"
		if e.to != nil && !contains(e.from, e.to) {
			attrs = append(attrs, "ltail=cluster_"+ID(e.from))
		}
	}
	head := tail
	if e.to != nil {
		head = ID(e.to)
		if isBox(e.to) {
			head += "_anchor"
			if !contains(e.to, e.from) {
				attrs = append(attrs, "lhead=cluster_"+ID(e.to))
			}
		}
	} else {
		attrs = append(attrs, "style=dashed")
	}
	label := " " + strings.Join(labels, " \n ") + " "
	attrs = append(attrs, "label="+dotString(label))
	d.line(1, tail+" -> "+head+" ["+strings.Join(attrs, " ")+"]")
}

// context writes the context as a note: a table of its properties.
func (d *dotWriter) context(depth int) {
	var b strings.Builder
	b.WriteString(`<<table border="0" cellborder="0" cellspacing="0" cellpadding="2">`)
	b.WriteString(`<tr><td colspan="2" align="left"><b>context</b></td></tr>`)
	for _, r := range contextRows(d.o.Context) {
		if r[0] == "" {
			b.WriteString(`<tr><td colspan="2" align="left">` + htmlEscape(r[1]) + `</td></tr>`)
			continue
		}
		b.WriteString(`<tr><td align="left"><font color="` + colMuted + `">` + htmlEscape(r[0]) + `</font></td><td align="left">` + htmlEscape(r[1]) + `</td></tr>`)
	}
	b.WriteString(`</table>>`)
	d.line(depth, `context [id="context" class="context" shape=note style=filled fillcolor="`+colNoteFill+`" color="`+colNoteLine+`" fontsize=10 label=`+b.String()+`]`)
}

// nodeLabel is a state's key in bold, its description below, smaller,
// and the actors it invokes.
func nodeLabel(n *interp.StateNode) string {
	var b strings.Builder
	b.WriteString("<<b>" + htmlEscape(n.Key) + "</b>")
	details(&b, n)
	b.WriteString(">")
	return b.String()
}

func clusterLabel(n *interp.StateNode) string {
	var b strings.Builder
	b.WriteString("<<b>" + htmlEscape(n.Key) + "</b>")
	if n.Type == interp.Parallel {
		b.WriteString(` <font point-size="10" color="` + colMuted + `"><i>parallel</i></font>`)
	}
	details(&b, n)
	b.WriteString(">")
	return b.String()
}

func details(b *strings.Builder, n *interp.StateNode) {
	for _, l := range wrap(n.Description, descWidth) {
		b.WriteString(`<br/><font point-size="9" color="` + colMuted + `">` + htmlEscape(l) + `</font>`)
	}
	for _, inv := range n.Invoke {
		src := inv.Src
		if src == "" {
			src = inv.ID
		}
		b.WriteString(`<br/><font point-size="9" color="` + colMuted + `">invoke ` + htmlEscape(src) + `</font>`)
	}
}

// htmlEscape escapes text for a Graphviz HTML-like label.
func htmlEscape(s string) string {
	return htmlReplacer.Replace(s)
}

var htmlReplacer = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "\n", " ", "\r", " ")

// dotString quotes a string for DOT: a backslash is doubled, so that
// Graphviz's escapes (\n, \N, ...) never apply to a machine's text.
func dotString(s string) string {
	return `"` + dotReplacer.Replace(s) + `"`
}

var dotReplacer = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", "")
