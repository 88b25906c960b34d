package workflow_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
)

// greeter takes its input in its entry action (a Go implementation: the
// input reaches the actions of the machine's start, as in XState).
const greeter = `{"id":"greeter","initial":"ready","context":{},
  "meta":{"input":{"type":"object","properties":{"who":{"type":"string","minLength":1}},"required":["who"]}},
  "entry":"takeInput",
  "states":{"ready":{"on":{"GREET":"done"}},"done":{"type":"final"}}}`

func greeterWorkflow(t *testing.T, src string) (*workflow.Workflow, error) {
	t.Helper()
	reg := xstate.NewRegistry().Assign("takeInput", func(a interp.Args, _ any) (map[string]any, error) {
		in, _ := a.Event.Data["input"].(map[string]any) // {type: "xstate.init", input}
		return map[string]any{"who": in["who"]}, nil
	})
	m, _, err := (&xstate.Loader{Registry: reg}).Parse("greeter.json", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return workflow.New(m, workflow.Options{})
}

// TestInputLifecycle: an instance of a machine with meta.input is not
// started until Hold.Start gives it a valid input; nothing else stores it
// (an event, Send); the input reaches the machine and is stored with the
// instance; a second start is refused; a reset starts it afresh with the
// same input.
func TestInputLifecycle(t *testing.T) {
	w, err := greeterWorkflow(t, greeter)
	if err != nil {
		t.Fatal(err)
	}
	if !w.NeedsInput() || w.Initial() != nil {
		t.Fatalf("NeedsInput %v, Initial %v", w.NeedsInput(), w.Initial())
	}
	st := store.NewMemory()
	x := instances(t, workflow.InstancesOptions{Store: st}, w)
	ctx := context.Background()
	in, err := x.Load(ctx, w, "g1")
	if err != nil || !in.NotStarted {
		t.Fatalf("before the start: %+v %v", in, err)
	}
	if _, err := x.Send(ctx, "greeter", "g1", interp.Event{Type: "GREET"}); !errors.Is(err, workflow.ErrNotStarted) || !strings.Contains(err.Error(), "greeter_start") {
		t.Errorf("Send before the start: %v", err)
	}
	h, err := x.Hold(ctx, w, "g1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Start(ctx, map[string]any{"who": ""}, store.AuditEntry{Tool: "greeter_start"}); err == nil || !strings.Contains(err.Error(), "who") {
		t.Errorf("a start with an empty name: %v", err)
	}
	in, err = h.Start(ctx, map[string]any{"who": "Ada"}, store.AuditEntry{Tool: "greeter_start"})
	if err != nil || in.NotStarted || in.Snapshot.Context.(map[string]any)["who"] != "Ada" || string(in.Input) != `{"who":"Ada"}` {
		t.Fatalf("the start: %+v %v", in, err)
	}
	if _, err := h.Start(ctx, map[string]any{"who": "Bob"}, store.AuditEntry{Tool: "greeter_start"}); !errors.Is(err, workflow.ErrStarted) {
		t.Errorf("a second start: %v", err)
	}
	h.Release()
	if _, err := x.Send(ctx, "greeter", "g1", interp.Event{Type: "GREET"}); err != nil {
		t.Fatal(err)
	}
	if err := x.Reset(ctx, "greeter", "g1", ""); err != nil {
		t.Fatal(err)
	}
	// Read again from the store: a new Instances on it.
	y := instances(t, workflow.InstancesOptions{Store: st}, w)
	in, err = y.Load(ctx, w, "g1")
	if err != nil || in.NotStarted || in.Snapshot.Context.(map[string]any)["who"] != "Ada" || workflow.StateString(in.Snapshot) != "ready" {
		t.Errorf("after the reset: %+v %v", in, err)
	}
}

// TestInputSchemaChecked: meta.input must be an object's schema, and may
// not name the handle key.
func TestInputSchemaChecked(t *testing.T) {
	for _, c := range []struct{ meta, want string }{
		{`{"input":{"type":"string"}}`, `type must be "object"`},
		{`{"input":"who"}`, "JSON Schema"},
		{`{"handleKey":"who","input":{"type":"object","properties":{"who":{"type":"string"}}}}`, `handle key "who"`},
		{`{"input":{"type":"object","properties":{"n":{"type":"nonsense"}}}}`, "meta.input"},
	} {
		src := strings.Replace(greeter, `"meta":{"input":{"type":"object","properties":{"who":{"type":"string","minLength":1}},"required":["who"]}}`, `"meta":`+c.meta, 1)
		if _, err := greeterWorkflow(t, src); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("meta %s: %v, want %q", c.meta, err, c.want)
		}
	}
}

// TestCheckWarnsOfAnUndeclaredInput: check warns of a machine that does
// not start without an input and declares none (its instances would all
// start failed), naming the start tool and meta.input; one that declares
// it is not warned of.
func TestCheckWarnsOfAnUndeclaredInput(t *testing.T) {
	reg := xstate.NewRegistry().Assign("takeInput", func(a interp.Args, _ any) (map[string]any, error) {
		in, ok := a.Event.Data["input"].(map[string]any)
		if !ok {
			return nil, errors.New("no input")
		}
		return map[string]any{"who": in["who"]}, nil
	})
	undeclared := strings.Replace(greeter, `"meta":{"input":{"type":"object","properties":{"who":{"type":"string","minLength":1}},"required":["who"]}},`, "", 1)
	for name, c := range map[string]struct {
		src  string
		warn bool
	}{"declared": {greeter, false}, "undeclared": {undeclared, true}} {
		dir := t.TempDir()
		file := filepath.Join(dir, "greeter.json")
		if err := os.WriteFile(file, []byte(c.src), 0o644); err != nil {
			t.Fatal(err)
		}
		rep, err := workflow.Check(&xstate.Loader{Registry: reg}, []string{file}, "")
		if err != nil || rep.Failed() {
			t.Fatalf("%s: %v %v", name, rep.Lines(), err)
		}
		said := strings.Join(rep.Lines(), "\n")
		if warned := strings.Contains(said, "does not start without an input (no input)") && strings.Contains(said, "meta.input") && strings.Contains(said, "greeter_start"); warned != c.warn {
			t.Errorf("%s: warned %v:\n%s", name, warned, said)
		}
	}
}

// TestInputAcrossReplicas: an instance started with its input on one
// replica is seen started on another, which resets it afresh with the
// same input; a second start on the other replica is refused.
func TestInputAcrossReplicas(t *testing.T) {
	w, err := greeterWorkflow(t, greeter)
	if err != nil {
		t.Fatal(err)
	}
	mem := store.NewMemory()
	ctx := context.Background()
	a, _ := replica(t, mem, "a", workflow.InstancesOptions{}, w)
	b, _ := replica(t, mem, "b", workflow.InstancesOptions{}, w)
	if in, err := b.Load(ctx, w, "g1"); err != nil || !in.NotStarted {
		t.Fatalf("b before the start: %+v %v", in, err)
	}
	h, err := a.Hold(ctx, w, "g1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Start(ctx, map[string]any{"who": "Ada"}, store.AuditEntry{Tool: "greeter_start"}); err != nil {
		t.Fatal(err)
	}
	h.Release()
	hb, err := b.Hold(ctx, w, "g1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hb.Start(ctx, map[string]any{"who": "Bob"}, store.AuditEntry{Tool: "greeter_start"}); !errors.Is(err, workflow.ErrStarted) {
		t.Errorf("a second start on b: %v", err)
	}
	hb.Release()
	if _, err := b.Send(ctx, "greeter", "g1", interp.Event{Type: "GREET"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Reset(ctx, "greeter", "g1", ""); err != nil {
		t.Fatal(err)
	}
	in, err := a.Current(ctx, w, "g1")
	if err != nil || in.NotStarted || in.Snapshot.Context.(map[string]any)["who"] != "Ada" || workflow.StateString(in.Snapshot) != "ready" {
		t.Errorf("a after b's reset: %+v %v", in, err)
	}
}
