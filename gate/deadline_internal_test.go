package gate

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
	"github.com/stategate/stategate/xstate/js"
)

// spinner spins on an eventless transition after SPIN, while its guard
// holds; BUMP counts, to see that the instance is free again.
const spinner = `{"id":"spin","initial":"idle","context":{"n":0},"states":{
  "idle":{"on":{"SPIN":"a","BUMP":{"actions":"bump"}}},
  "a":{"always":{"guard":"slow","target":"b"}},
  "b":{"always":{"guard":"slow","target":"a"}}}}`

// jsSpinner is the same in JavaScript, its guard busy for 3 ms a call: the
// case of the issue, which ran five minutes before ErrLoop.
const jsSpinner = `import { createMachine, assign } from 'xstate';
const busy = () => { const end = Date.now() + 3; while (Date.now() < end) {} return true; };
export default createMachine({ id: 'jsspin', initial: 'idle', context: { n: 0 }, states: {
  idle: { on: { SPIN: 'a', BUMP: { actions: assign({ n: ({ context }) => context.n + 1 }) } } },
  a: { always: { guard: busy, target: 'b' } },
  b: { always: { guard: busy, target: 'a' } } } });
`

// deadlineGate serves the spinners with an event deadline; slow is what
// the Go guard does at each call.
func deadlineGate(t *testing.T, timeout time.Duration, slow func()) *Gate {
	t.Helper()
	dir := t.TempDir()
	for name, src := range map[string]string{"spin.json": spinner, "jsspin.mjs": jsSpinner} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	reg := xstate.NewRegistry().
		Guard("slow", func(interp.Args, any) (bool, error) { slow(); return true, nil }).
		Assign("bump", func(a interp.Args, _ any) (map[string]any, error) {
			return map[string]any{"n": a.Context.(map[string]any)["n"].(float64) + 1}, nil
		})
	g := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SharedInstance: DefaultInstance, EventTimeout: timeout})
	lib := workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Loader: &xstate.Loader{Registry: reg, Modules: &js.Host{}}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Serve: g.Reloaded})
	if err := lib.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if errs := lib.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	return g
}

// callTool calls a tool as a client would, and returns the result's text
// and structured content.
func callTool(t *testing.T, ctx context.Context, g *Gate, name string) (string, map[string]any, bool) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	res, err := g.handleCall(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var sc map[string]any
	_ = json.Unmarshal(res.RawStructuredContent, &sc)
	return res.Content[0].(mcp.TextContent).Text, sc, res.IsError
}

// TestEventDeadline checks that an event that does not settle within the
// event deadline is answered with an error that says so, the instance
// keeping its state, and that the instance is free at once for the next
// call: with a slow Go guard, and with the JavaScript guard of the issue.
func TestEventDeadline(t *testing.T) {
	g := deadlineGate(t, 150*time.Millisecond, func() { time.Sleep(time.Millisecond) })
	for _, m := range []string{"spin", "jsspin"} {
		start := time.Now()
		text, sc, isErr := callTool(t, context.Background(), g, m+"_spin")
		took := time.Since(start)
		if !isErr || sc["error"] != "ERROR" || !strings.Contains(text, "ran out of time") || !strings.Contains(text, "event deadline of 150ms") || !strings.Contains(text, "keeps its state idle") {
			t.Fatalf("%s_spin: %v %q %v", m, isErr, text, sc)
		}
		t.Logf("%s_spin answered after %v: %s", m, took.Round(time.Millisecond), text)
		if text, sc, isErr := callTool(t, context.Background(), g, m+"_bump"); isErr || sc["state"] != "idle" || sc["context"].(map[string]any)["n"] != 1.0 {
			t.Fatalf("%s_bump after the deadline: %v %q %v", m, isErr, text, sc)
		}
	}
}

// TestCancelledRequestStopsTheEvent checks that a request whose client
// went away (its context cancelled) stops the event it started, and
// releases the instance: the next call goes through, long before the
// event deadline, and finds the instance as it was.
func TestCancelledRequestStopsTheEvent(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls atomic.Int64
	g := deadlineGate(t, time.Hour, func() {
		if calls.Add(1) == 5 {
			cancel() // the client goes away while the event runs
		}
		time.Sleep(time.Millisecond)
	})
	text, _, isErr := callTool(t, ctx, g, "spin_spin")
	if !isErr || !strings.Contains(text, "context canceled") || !strings.Contains(text, "keeps its state idle") {
		t.Fatalf("spin_spin: %v %q", isErr, text)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if text, sc, isErr := callTool(t, context.Background(), g, "spin_bump"); isErr || sc["state"] != "idle" {
			t.Errorf("spin_bump after the cancel: %v %q %v", isErr, text, sc)
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the instance is still held after its request was cancelled")
	}
	if n := calls.Load(); n > 1000 {
		t.Errorf("the guard ran %d times after the cancel", n)
	}
}
