package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/stategate/stategate/graph"
	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
	"github.com/stategate/stategate/xstate/js"
)

type graphCmd struct {
	File   string `arg:"" help:"The machine file (JSON, or a JavaScript or TypeScript module)."`
	Format string `enum:"svg,dot,mermaid" default:"svg" help:"svg (laid out by Graphviz), dot (Graphviz's text) or mermaid (stateDiagram-v2, for Markdown)."`
	Output string `short:"o" placeholder:"FILE" help:"Write the drawing to FILE rather than to stdout."`
	Data   string `placeholder:"DIR" help:"The store's folder (read only, as state show reads it), for --handle."`
	Store  string `placeholder:"URL" help:"The PostgreSQL database of the store (as serve --store names it), for --handle, in place of --data."`
	Handle string `placeholder:"H" help:"Draw this instance of the machine: its active states highlighted, its context beside (needs --data or --store)."`
	Title  string `help:"A title over the drawing (default: none, or the instance's handle)."`
}

func (c *graphCmd) Run(stdout io.Writer) error {
	if c.Data != "" && c.Store != "" {
		return errors.New("--data and --store name two stores: give one")
	}
	if (c.Data == "" && c.Store == "") != (c.Handle == "") {
		return errors.New("--handle goes with --data or --store: the instance's handle, and the store's folder or database")
	}
	loader := &xstate.Loader{Modules: &js.Host{}}
	m, id, tools := (*interp.Machine)(nil), "", map[string]string{}
	w, _, err := workflow.Load(loader, c.File, "")
	if err == nil {
		m, id = w.Machine, w.ID
		for _, t := range w.Tools {
			tools[t.Event] = t.Name
		}
	} else {
		// A machine the gate would refuse (its implementations missing,
		// say) is still drawn, without its tools.
		var werr error
		if m, _, werr = loader.Load(c.File); werr != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "stategate: %s: drawn without tool names, as the gate would not serve it:\n%v\n", c.File, err)
		id = m.ID
		if id == "" || id == "(machine)" {
			id = strings.TrimSuffix(filepath.Base(c.File), filepath.Ext(c.File))
		}
	}
	o := graph.Options{Tools: tools, Title: c.Title}
	if c.Handle != "" {
		if err := c.instance(m, id, &o); err != nil {
			return err
		}
	}
	var out []byte
	switch c.Format {
	case "dot":
		out = []byte(graph.DOT(m, o))
	case "mermaid":
		out = []byte(graph.Mermaid(m, o))
	default:
		if out, err = graph.SVG(context.Background(), m, o); err != nil {
			return fmt.Errorf("%s: %w", c.File, err)
		}
	}
	if c.Output != "" {
		return os.WriteFile(c.Output, out, 0o644)
	}
	_, err = stdout.Write(out)
	return err
}

// instance sets the options to draw the stored instance: its active
// states and its context.
func (c *graphCmd) instance(m *interp.Machine, id string, o *graph.Options) error {
	st, err := openFor(c.Data, c.Store, false)
	if err != nil {
		return err
	}
	defer st.Close()
	rec, _, err := st.Load(context.Background(), store.Key{Machine: id, Handle: c.Handle})
	if errors.Is(err, store.ErrNotFound) {
		where := c.Data
		if c.Store != "" {
			where = "the --store database"
		}
		return fmt.Errorf("no instance %q of machine %s in %s", c.Handle, id, where)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", id, c.Handle, err)
	}
	if rec.IsReset() {
		return fmt.Errorf("%s %s: the instance was reset: it starts afresh when next used", id, c.Handle)
	}
	var p interp.Persisted
	if err := json.Unmarshal(rec.Snapshot, &p); err != nil {
		return fmt.Errorf("%s %s: %w", id, c.Handle, err)
	}
	// As the gate loads it: a state the machine lost moves to the nearest
	// surviving ancestor's initial state.
	if pruned, cut := m.Prune(p.Value); cut {
		fmt.Fprintf(os.Stderr, "stategate: %s %s: its state is no longer in the machine; drawn where the gate would move it\n", id, c.Handle)
		p.Value = pruned
	}
	snap, err := m.Restore(&p)
	if err != nil {
		return fmt.Errorf("%s %s: %w", id, c.Handle, err)
	}
	var raw struct {
		Context json.RawMessage `json:"context"`
	}
	_ = json.Unmarshal(rec.Snapshot, &raw) // read above
	o.Active = snap.Active
	if len(raw.Context) > 0 {
		o.Context = raw.Context // in its stored key order
	}
	if o.Title == "" {
		o.Title = id + ", instance " + c.Handle
	}
	return nil
}
