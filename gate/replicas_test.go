package gate_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/store"
)

// TestReplicasTellSessions: two gates on one shared store are two
// replicas. A session on b that sees an order is told (list_changed) when
// a session on a moves it, and its next list shows what the order allows
// now; a session that sees another order is not told.
func TestReplicasTellSessions(t *testing.T) {
	mem := store.NewMemory()
	urlA, _ := serveOn(t, mem.Replica("a"), testMachines, gate.HTTPOptions{Route: "a"})
	urlB, _ := serveOn(t, mem.Replica("b"), testMachines, gate.HTTPOptions{Route: "b"})
	onA, onB, other := connect(t, urlA), connect(t, urlB), connect(t, urlB)
	if id := onB.GetSessionId(); !strings.HasPrefix(id, "b.") || gate.RouteOf(id) != "b" {
		t.Fatalf("b issued the session id %q", id)
	}
	onB.Call("order_add", map[string]any{"order_id": "o1"})
	onB.Settle()
	other.Call("order_add", map[string]any{"order_id": "o2"})
	other.Settle()
	if _, ok := onB.Tools()["order_reopen"]; ok {
		t.Fatal("order_reopen listed while the order is open")
	}
	if _, sc, isErr := onA.Call("order_close", map[string]any{"order_id": "o1"}); isErr {
		t.Fatalf("order_close on a: %v", sc)
	}
	onB.AwaitChanged()
	onB.AwaitTools("order_reopen once a closed the order", func(tools map[string]mcp.Tool) bool {
		_, reopen := tools["order_reopen"]
		_, add := tools["order_add"]
		return reopen && !add
	})
	other.NoChange()
	// b's call sees a's close: its add is refused, the order as a left it.
	if text, sc, isErr := onB.Call("order_add", map[string]any{"order_id": "o1"}); !isErr || sc["error"] != "FORBIDDEN" {
		t.Fatalf("order_add on b after a closed the order: %s", text)
	}
	if _, sc, isErr := onB.Call("order_reopen", map[string]any{"order_id": "o1"}); isErr || sc["state"] != "open" {
		t.Fatalf("order_reopen on b: %v", sc)
	}
	if _, v, _ := mem.Load(context.Background(), store.Key{Machine: "order", Handle: "o1"}); v != 3 {
		t.Fatalf("the order at version %d, want 3 (add, close, reopen)", v)
	}
}

// TestRoutes: a route prefixes the session ids; CheckRoute refuses a name
// a proxy's rule could not match as it is.
func TestRoutes(t *testing.T) {
	for _, bad := range []string{"", "a.b", "a b", "é", strings.Repeat("x", gate.MaxRoute+1)} {
		if err := gate.CheckRoute(bad); err == nil {
			t.Errorf("CheckRoute(%q) passed", bad)
		}
	}
	for _, good := range []string{"a", "replica-2", "EU_west_1"} {
		if err := gate.CheckRoute(good); err != nil {
			t.Errorf("CheckRoute(%q): %v", good, err)
		}
	}
	if gate.RouteOf("0123abcd") != "" || gate.RouteOf("r1.0123abcd") != "r1" {
		t.Error("RouteOf")
	}
	url, _ := serveHTTP(t, testMachines, gate.HTTPOptions{Route: "r1"})
	c := connect(t, url)
	if id := c.GetSessionId(); !strings.HasPrefix(id, "r1.") || len(id) != len("r1.")+32 {
		t.Fatalf("session id %q", id)
	}
	if _, sc, isErr := c.Call("lamp_on", nil); isErr {
		t.Fatalf("a call of a routed session: %v", sc)
	}
}

// flaky is a replica whose database can be made unreachable.
type flaky struct {
	*store.MemoryReplica
	down atomic.Bool
}

func (f *flaky) LoadIfChanged(ctx context.Context, k store.Key, have uint64) (store.Loaded, error) {
	if f.down.Load() {
		return store.Loaded{}, errors.Join(store.ErrUnavailable, errors.New("connection refused"))
	}
	return f.MemoryReplica.LoadIfChanged(ctx, k, have)
}

func (f *flaky) Save(ctx context.Context, k store.Key, rec store.Record, version uint64) (uint64, error) {
	if f.down.Load() {
		return 0, errors.Join(store.ErrUnavailable, errors.New("connection refused"))
	}
	return f.MemoryReplica.Save(ctx, k, rec, version)
}

// TestReplicasRetryable: a call on a replica whose database cannot be
// reached is answered UNAVAILABLE, and one on an instance another
// replica's bound call holds BUSY: nothing moved, and the same call goes
// through once the cause is gone.
func TestReplicasRetryable(t *testing.T) {
	mem := store.NewMemory()
	f := &flaky{MemoryReplica: mem.Replica("b")}
	// (Its event deadline is what a call waits for another replica's.)
	url, _ := serveGate(t, gate.Options{Store: f, EventTimeout: 200 * time.Millisecond}, testMachines, gate.HTTPOptions{})
	c := connect(t, url)
	if text, sc, isErr := c.Call("order_add", map[string]any{"order_id": "o1"}); isErr {
		t.Fatalf("order_add: %v %s", sc, text)
	}
	f.down.Store(true)
	text, sc, isErr := c.Call("order_add", map[string]any{"order_id": "o1"})
	if !isErr || sc["error"] != "UNAVAILABLE" || sc["retry"] != true || !strings.Contains(text, "nothing moved") {
		t.Fatalf("a call with the database down: %s %v", text, sc)
	}
	f.down.Store(false)
	if _, sc, isErr := c.Call("order_add", map[string]any{"order_id": "o1"}); isErr || sc["context"].(map[string]any)["items"] != float64(2) {
		t.Fatalf("order_add once the database is back: %v", sc)
	}

	// Replica a's bound call holds o1: its intent is open, a alive.
	_, ga := serveOn(t, mem.Replica("a"), testMachines, gate.HTTPOptions{})
	a := ga.Instances()
	h, err := a.Hold(context.Background(), a.Workflow("order"), "o1")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if _, err := h.Save(context.Background(), store.AuditEntry{Tool: "pay", Intent: &store.Intent{Event: "CLOSE"}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), mcptest.Wait)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = "order_close", map[string]any{"order_id": "o1"}
	start := time.Now()
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if sc := mcptest.Structured(res); !res.IsError || sc["error"] != "BUSY" || sc["retry"] != true {
		t.Fatalf("a call on an instance another replica's call holds, after %v: %s", time.Since(start), mcptest.Text(res))
	}
	if _, v, _ := mem.Load(context.Background(), store.Key{Machine: "order", Handle: "o1"}); v != 3 {
		t.Fatalf("o1 at version %d, want 3 (two adds, the intent)", v)
	}
}
