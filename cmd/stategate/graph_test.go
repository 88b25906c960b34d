package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/store/badger"
)

const invoiceFile = "../../machines/invoice.json"

// invoiceStore makes a store holding the invoice's instance 42 in review.
func invoiceStore(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	st, err := badger.Open(dir, badger.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	snap := `{"status":"active","value":"review","context":{"lines":[{"description":"Consulting","amount":1200}],"total":1200,"paid":0,"approvalLimit":5000,"revisions":0,"lastReason":null},"historyValue":{},"children":{}}`
	if _, err := st.Save(context.Background(), store.Key{Machine: "invoice", Handle: "42"}, store.Record{Snapshot: []byte(snap), MachineVersion: "v"}, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestGraphCommand(t *testing.T) {
	data := invoiceStore(t)
	for _, c := range []struct {
		name string
		cmd  graphCmd
		want []string // in the output
		err  string   // in the error
	}{
		{name: "svg", cmd: graphCmd{File: invoiceFile, Format: "svg"},
			want: []string{"<svg", `class="node state atomic"`, "SUBMIT / invoice_submit"}},
		{name: "dot", cmd: graphCmd{File: invoiceFile, Format: "dot"},
			want: []string{"digraph machine {", `label=" APPROVE [withinLimit] / invoice_approve "`, "peripheries=2"}},
		{name: "mermaid", cmd: graphCmd{File: invoiceFile, Format: "mermaid", Title: "Invoice"},
			want: []string{"title: \"Invoice\"\n", "stateDiagram-v2\n", "s1 --> s2 : SUBMIT / invoice_submit\n", "s4 --> [*]\n"}},
		{name: "instance", cmd: graphCmd{File: invoiceFile, Format: "svg", Data: data, Handle: "42"},
			want: []string{`id="s2" class="node state atomic active"`, ">context<", ">1200<", "invoice, instance 42"}},
		{name: "instance mermaid", cmd: graphCmd{File: invoiceFile, Format: "mermaid", Data: data, Handle: "42"},
			want: []string{"class s2 active\n", "note right of s0\n", "total: 1200\n"}},
		{name: "bad file", cmd: graphCmd{File: filepath.Join(t.TempDir(), "nope.json"), Format: "svg"}, err: "nope.json"},
		{name: "broken machine", cmd: graphCmd{File: writeFile(t, "broken.json", `{"id":"m","initial":"a","states":{"a":{"on":{"GO":"nowhere"}}}}`), Format: "dot"}, err: "broken.json:1:46: state a:"},
		{name: "unknown handle", cmd: graphCmd{File: invoiceFile, Format: "dot", Data: data, Handle: "nobody"}, err: `no instance "nobody" of machine invoice in ` + data},
		{name: "handle without data", cmd: graphCmd{File: invoiceFile, Handle: "42"}, err: "--handle goes with --data or --store"},
		{name: "no store", cmd: graphCmd{File: invoiceFile, Data: filepath.Join(t.TempDir(), "none"), Handle: "42"}, err: "none"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			err := c.cmd.Run(&out)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// TestGraphCommandOutput checks -o, and that the store is only read.
func TestGraphCommandOutput(t *testing.T) {
	data := invoiceStore(t)
	before := snapshotFolder(t, data)
	file := filepath.Join(t.TempDir(), "invoice.svg")
	var out bytes.Buffer
	if err := (&graphCmd{File: invoiceFile, Format: "svg", Data: data, Handle: "42", Output: file}).Run(&out); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Errorf("stdout %q", out.String())
	}
	svg, err := os.ReadFile(file)
	if err != nil || !bytes.Contains(svg, []byte(`class="node state atomic active"`)) {
		t.Fatalf("%s: %v\n%s", file, err, svg)
	}
	sameFolder(t, before, snapshotFolder(t, data))
}

// TestGraphCommandLine runs the command as a user does: kong's flags, the
// drawing on stdout, an error on stderr with exit status 1.
func TestGraphCommandLine(t *testing.T) {
	stdout, stderr, code := runMain(t, "graph", invoiceFile, "--format", "mermaid")
	if code != 0 || !strings.HasPrefix(stdout, "stateDiagram-v2\n") || stderr != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	_, stderr, code = runMain(t, "graph", "nope.json")
	if code != 1 || !strings.Contains(stderr, "nope.json") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}
