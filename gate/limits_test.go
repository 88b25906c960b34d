package gate_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
)

// TestInstanceLimits: a workflow at its cap of instances creates no more,
// whichever way an instance would be made (the start tool of revision
// 2026-07-28, a handle key's first call, a session's first call): the
// call is refused with LIMIT, naming the cap and its flag, and nothing is
// stored; the instances stored go on.
func TestInstanceLimits(t *testing.T) {
	dir := t.TempDir()
	for f, src := range map[string]string{
		"lamp.json":  `{"id":"lamp","initial":"off","states":{"off":{"on":{"TOGGLE":"on"}},"on":{"on":{"TOGGLE":"off"}}}}`,
		"order.json": `{"id":"order","meta":{"handleKey":"order_id"},"initial":"open","states":{"open":{"on":{"ADD":"open"}}}}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st := store.NewMemory()
	x := workflow.NewInstances(workflow.InstancesOptions{Store: st, Logger: log, MaxInstances: 2, StartRate: -1})
	g := gate.New(gate.Options{Instances: x, Logger: log})
	lib := workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Loader: &xstate.Loader{}, Logger: log, Serve: g.Reloaded})
	if err := lib.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := g.HTTPHandler(gate.HTTPOptions{})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)
	url := srv.URL + "/mcp"
	limited := func(what, text string, sc map[string]any, isErr bool) {
		t.Helper()
		if !isErr || sc["error"] != "LIMIT" || !strings.HasPrefix(text, "LIMIT: ") || !strings.Contains(text, "--max-instances") {
			t.Fatalf("%s: %v %v %q, want LIMIT naming --max-instances", what, isErr, sc["error"], text)
		}
	}
	ok := func(what, text string, isErr bool) {
		t.Helper()
		if isErr {
			t.Fatalf("%s: %s", what, text)
		}
	}

	modern := modernHTTP(t, url)
	var handle string
	for range 2 {
		text, sc, isErr := modern.Call("lamp_start", nil)
		ok("lamp_start", text, isErr)
		handle, _ = sc["handle"].(string)
	}
	text, sc, isErr := modern.Call("lamp_start", nil)
	limited("a third lamp_start", text, sc, isErr)
	if text, _, isErr := modern.Call("lamp_toggle", map[string]any{"workflow_id": handle}); isErr {
		t.Fatalf("a stored instance: %s", text)
	}

	legacy := mcptest.HTTP(t, url, mcptest.Options{Name: "legacy"})
	text, sc, isErr = legacy.Call("lamp_toggle", nil) // its session's instance would be the third
	limited("a session's first call", text, sc, isErr)
	for _, id := range []string{"1", "2"} {
		text, _, isErr := legacy.Call("order_add", map[string]any{"order_id": id})
		ok("order_add", text, isErr)
	}
	text, sc, isErr = legacy.Call("order_add", map[string]any{"order_id": "3"})
	limited("a third handle's first call", text, sc, isErr)
	for _, m := range []string{"lamp", "order"} {
		if n, err := st.Count(context.Background(), m); err != nil || n != 2 {
			t.Fatalf("%s: %d instances stored, %v; want 2", m, n, err)
		}
	}
}
