package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stategate/stategate/graph"
	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/xstate"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/graph")

const conformance = "../testdata/conformance/"

// invoiceTools are the invoice's tools as the gate names them.
var invoiceTools = map[string]string{
	"ADD_LINE": "invoice_add_line", "REMOVE_LINE": "invoice_remove_line", "SUBMIT": "invoice_submit",
	"APPROVE": "invoice_approve", "REQUEST_CHANGES": "invoice_request_changes",
	"RECORD_PAYMENT": "invoice_record_payment", "DISCHARGE": "invoice_discharge",
}

const invoiceInReview = `{"status":"active","value":"review","context":{"lines":[{"description":"Consulting","amount":1200},{"description":"Travel","amount":300}],"total":1500,"paid":0,"approvalLimit":5000,"revisions":0,"lastReason":null}}`

// goldenCases are machines of every shape: each is drawn as DOT and
// Mermaid into testdata/graph/NAME.dot and NAME.mmd.
var goldenCases = []struct {
	name, file string
	// instance is a persisted snapshot whose active states and context
	// are drawn; "" for none.
	instance string
	tools    map[string]string
}{
	{"invoice", "../machines/invoice.json", "", invoiceTools},
	{"invoice-review", "../machines/invoice.json", invoiceInReview, invoiceTools},
	{"deep-nesting", conformance + "hierarchy/deep-nesting.json", "", nil},
	{"parent-handles-event", conformance + "hierarchy/parent-handles-event.json", `{"status":"active","value":{"editing":"email"},"context":{"cancels":1}}`, nil},
	{"nested-parallel", conformance + "parallel/nested-parallel-value.json", `{"status":"active","value":{"on":{"display":"dim","audio":{"volume":"high","mute":"unmuted"},"network":{"online":"wifi"}}},"context":{}}`, nil},
	{"regions-root", conformance + "parallel/regions-value.json", "", nil},
	{"ondone-all-final", conformance + "parallel/ondone-all-final.json", "", nil},
	{"history", conformance + "history/parallel-deep-and-shallow.json", `{"status":"active","value":"settings","context":{}}`, nil},
	{"history-default", conformance + "history/default-target.json", "", nil},
	{"ticket", conformance + "own/misc/realistic-ticket.json", "", nil},
	{"delays", conformance + "own/delayed/delay-key-parsing.json", "", nil},
	{"wildcards", conformance + "wildcards/enabled-excludes-wildcards.json", "", nil},
	{"guards", conformance + "guards/first-enabled-wins.json", "", nil},
	{"targetless", conformance + "basic/targetless-transition.json", "", nil},
	{"awkward", "../testdata/graph/awkward.json", `{"status":"active","value":{"box":{"inner":"deepest"}},"context":"a \"string\" context"}`, nil},
}

// load parses a JSON machine: its config alone, as a visual editor
// exports it (a drawing needs no implementations).
func load(t testing.TB, file string) *interp.Machine {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := xstate.ParseJSON(file, data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// options are the drawing options for a case: its tools, and the
// instance restored from its persisted snapshot.
func options(t testing.TB, m *interp.Machine, title, instance string, tools map[string]string) (graph.Options, *interp.Snapshot) {
	t.Helper()
	o := graph.Options{Title: title, Tools: tools}
	if instance == "" {
		return o, nil
	}
	var p interp.Persisted
	if err := json.Unmarshal([]byte(instance), &p); err != nil {
		t.Fatal(err)
	}
	snap, err := m.Restore(&p)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct{ Context json.RawMessage }
	if err := json.Unmarshal([]byte(instance), &raw); err != nil {
		t.Fatal(err)
	}
	o.Active, o.Context = snap.Active, raw.Context
	return o, snap
}

func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			m := load(t, c.file)
			o, _ := options(t, m, c.name, c.instance, c.tools)
			for _, f := range []struct {
				ext  string
				draw func(*interp.Machine, graph.Options) string
			}{{".dot", graph.DOT}, {".mmd", graph.Mermaid}} {
				got := f.draw(m, o)
				if again := f.draw(m, o); again != got {
					t.Fatalf("%s: two drawings differ", f.ext)
				}
				golden(t, filepath.Join("..", "testdata", "graph", c.name+f.ext), got)
			}
		})
	}
}

func golden(t *testing.T, file, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (go test ./graph -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test ./graph -update rewrites it); got:\n%s", file, got)
	}
}

// svgGroup is a <g> of the SVG: a node, a cluster or an edge.
type svgGroup struct {
	id, class string
	texts     []string
	fills     []string
}

// parseSVG returns the SVG's groups by id and every text it shows.
func parseSVG(t *testing.T, data []byte) (map[string]*svgGroup, []string) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	dec.Strict = false // the DOCTYPE
	groups := map[string]*svgGroup{}
	var stack []*svgGroup
	var texts []string
	inText := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			attr := func(name string) string {
				for _, a := range tok.Attr {
					if a.Name.Local == name {
						return a.Value
					}
				}
				return ""
			}
			switch tok.Name.Local {
			case "g":
				g := &svgGroup{id: attr("id"), class: attr("class")}
				groups[g.id] = g
				stack = append(stack, g)
			case "text":
				inText = true
				texts = append(texts, "")
			case "polygon", "path", "ellipse":
				if len(stack) > 0 {
					g := stack[len(stack)-1]
					g.fills = append(g.fills, attr("fill"))
				}
			}
		case xml.EndElement:
			switch tok.Name.Local {
			case "g":
				stack = stack[:len(stack)-1]
			case "text":
				inText = false
				if len(stack) > 0 {
					g := stack[len(stack)-1]
					g.texts = append(g.texts, texts[len(texts)-1])
				}
			}
		case xml.CharData:
			if inText {
				texts[len(texts)-1] += string(tok)
			}
		}
	}
	return groups, texts
}

func hasClass(g *svgGroup, c string) bool {
	for _, f := range strings.Fields(g.class) {
		if f == c {
			return true
		}
	}
	return false
}

// TestSVG checks the SVG of every golden case: each state is a group with
// its id, its type and "active" as classes, showing its key; the active
// ones are filled in light blue; each transition's label is shown.
func TestSVG(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			m := load(t, c.file)
			o, snap := options(t, m, c.name, c.instance, c.tools)
			data, err := graph.SVG(context.Background(), m, o)
			if err != nil {
				t.Fatal(err)
			}
			groups, texts := parseSVG(t, data)
			for _, n := range m.Nodes {
				g := groups[graph.ID(n)]
				if g == nil {
					t.Errorf("%s: no group %s", n.PathString(), graph.ID(n))
					continue
				}
				if !hasClass(g, "state") || !hasClass(g, n.Type.String()) {
					t.Errorf("%s: class %q", n.PathString(), g.class)
				}
				label := n.Key
				if n.Type == interp.History {
					label = "H"
					if n.Deep {
						label = "H*"
					}
				}
				if len(g.texts) == 0 || g.texts[0] != label {
					t.Errorf("%s: texts %q, want %q first", n.PathString(), g.texts, label)
				}
				active := snap != nil && snap.Active(n)
				if hasClass(g, "active") != active {
					t.Errorf("%s: class %q, active %v", n.PathString(), g.class, active)
				}
				if n.Type == interp.Atomic || n.Type == interp.Final {
					filled := strings.Contains(strings.Join(g.fills, " "), "#bfdbfe")
					if filled != active {
						t.Errorf("%s: fills %q, active %v", n.PathString(), g.fills, active)
					}
				}
			}
			all := strings.Join(texts, "\n")
			for _, want := range edgeLabels(t, m, o) {
				if !strings.Contains(all, want) {
					t.Errorf("no text %q in the SVG", want)
				}
			}
			if c.instance != "" && (groups["context"] == nil || !strings.Contains(all, "context")) {
				t.Error("no context note")
			}
		})
	}
}

// edgeLabels reads the transitions' labels back from the DOT text.
func edgeLabels(t *testing.T, m *interp.Machine, o graph.Options) []string {
	var out []string
	for _, line := range strings.Split(graph.DOT(m, o), "\n") {
		if !strings.Contains(line, " -> ") {
			continue
		}
		i := strings.Index(line, `label="`)
		if i < 0 {
			continue
		}
		s := line[i+len(`label=`):]
		s = s[:strings.LastIndex(s, `"`)+1]
		var label string
		// DOT's escapes are JSON's, for what a label holds.
		if err := json.Unmarshal([]byte(s), &label); err != nil {
			t.Fatalf("label %s: %v", s, err)
		}
		for _, l := range strings.Split(label, "\n") { // a line per transition
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// TestInvoiceInReview checks what the README shows: the invoice with an
// instance in review, the transitions labelled with their tools.
func TestInvoiceInReview(t *testing.T) {
	m := load(t, "../machines/invoice.json")
	o, _ := options(t, m, "", invoiceInReview, invoiceTools)
	dot := graph.DOT(m, o)
	review := graph.ID(m.NodeByID("invoice.review"))
	for _, want := range []string{
		review + ` [id="` + review + `" class="state atomic active"`,
		`label=" SUBMIT / invoice_submit "`,
		`label=" APPROVE [withinLimit] / invoice_approve "`,
		`peripheries=2`,
		`total</font></td><td align="left">1500</td>`,
	} {
		if !strings.Contains(dot, want) {
			t.Errorf("DOT lacks %q:\n%s", want, dot)
		}
	}
	mmd := graph.Mermaid(m, o)
	if !strings.Contains(mmd, "class "+review+" active") || !strings.Contains(mmd, "s1 --> s2 : SUBMIT / invoice_submit") {
		t.Errorf("Mermaid:\n%s", mmd)
	}
}

func TestSVGCancelled(t *testing.T) {
	m := load(t, "../machines/invoice.json")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := graph.SVG(ctx, m, graph.Options{}); err != context.Canceled {
		t.Fatalf("err = %v", err)
	}
	// The layout is free again.
	if _, err := graph.SVG(context.Background(), m, graph.Options{}); err != nil {
		t.Fatal(err)
	}
}

// TestSVGConcurrent draws from several goroutines at once: the calls take
// turns on the one Graphviz module.
func TestSVGConcurrent(t *testing.T) {
	m := load(t, conformance+"parallel/nested-parallel-value.json")
	want, err := graph.SVG(context.Background(), m, graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			got, err := graph.SVG(context.Background(), m, graph.Options{})
			if err == nil && !bytes.Equal(got, want) {
				err = fmt.Errorf("a concurrent drawing differs")
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func BenchmarkSVG(b *testing.B) {
	m := load(b, "../machines/invoice.json")
	o, _ := options(b, m, "", invoiceInReview, invoiceTools)
	for b.Loop() {
		if _, err := graph.SVG(context.Background(), m, o); err != nil {
			b.Fatal(err)
		}
	}
}

func ExampleMermaid() {
	m, _, err := xstate.ParseJSON("light.json", []byte(`{
		"id": "light",
		"initial": "green",
		"states": {
			"green": { "on": { "TIMER": "yellow" } },
			"yellow": { "after": { "3000": "red" } },
			"red": { "on": { "TIMER": { "target": "green", "guard": "clear" } } }
		}
	}`))
	if err != nil {
		panic(err)
	}
	fmt.Print(graph.Mermaid(m, graph.Options{Tools: map[string]string{"TIMER": "light_timer"}}))
	// Output:
	// stateDiagram-v2
	//   state "light" as s0
	//   state s0 {
	//     [*] --> s1
	//     state "green" as s1
	//     state "yellow" as s2
	//     state "red" as s3
	//     s1 --> s2 : TIMER / light_timer
	//     s2 --> s3 : after 3000ms
	//     s3 --> s1 : TIMER [clear] / light_timer
	//   }
}
