package gate_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
	"github.com/stategate/stategate/xstate/js"
)

// Machines that start with an input (XState's createActor(m, {input})):
// an order (one per session) whose context is made of it, refusing the
// customer "nobody", and a shipment named by its handle key.
var inputMachines = map[string]string{
	"order.ts": `import { setup } from 'xstate';
export const machine = setup({}).createMachine({
  id: 'order',
  meta: { input: { type: 'object', description: 'Who orders, and how many items.',
    properties: { customer: { type: 'string' }, items: { type: 'integer', minimum: 1 } }, required: ['customer', 'items'] } },
  context: ({ input }) => {
    if (input.customer === 'nobody') throw new Error('nobody may not order');
    return { customer: input.customer, total: input.items * 10 };
  },
  initial: 'open',
  states: { open: { on: { PAY: 'paid' } }, paid: { type: 'final' } },
});`,
	"shipment.ts": `import { setup } from 'xstate';
export const machine = setup({}).createMachine({
  id: 'shipment',
  meta: { handleKey: 'shipment_id', input: { type: 'object', properties: { to: { type: 'string' } }, required: ['to'] } },
  context: ({ input }) => ({ to: input.to }),
  initial: 'packed',
  states: { packed: { on: { DISPATCH: 'sent' } }, sent: {} },
});`,
}

// inputServer serves the input machines over HTTP on a store.
func inputServer(t *testing.T, st store.Store) string {
	t.Helper()
	dir := t.TempDir()
	for f, src := range inputMachines {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	g := gate.New(gate.Options{Store: st, Logger: quietLog()})
	if err := workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Loader: &xstate.Loader{Modules: &js.Host{}}, Logger: quietLog(), Serve: g.Reloaded}).Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := g.HTTPHandler(gate.HTTPOptions{})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)
	return srv.URL + "/mcp"
}

// TestInputStartsAnInstance: a session's instance of a machine with
// meta.input lists only its start and status tools until it is started;
// another tool is refused naming the start tool; the start validates its
// input, gives it to the machine's context, and is refused once started;
// the session is told its list changed; a reset starts it afresh with the
// same input, kept in the store; a machine that throws on its input
// stores nothing.
func TestInputStartsAnInstance(t *testing.T) {
	st := store.NewMemory()
	c := mcptest.HTTP(t, inputServer(t, st), mcptest.Options{Listen: true})
	tools := c.Tools()
	if got := mcptest.Names(tools); !slices.Contains(got, "order_start") || slices.Contains(got, "order_pay") || !slices.Contains(got, "shipment_start") {
		t.Fatalf("before the start: %v", got)
	}
	var schema map[string]any
	raw, _ := json.Marshal(tools["order_start"].InputSchema)
	_ = json.Unmarshal(raw, &schema)
	if req := schema["required"]; !slices.Equal(anyStrings(req), []string{"customer", "items"}) || !strings.Contains(tools["order_start"].Description, "Who orders") {
		t.Errorf("order_start as listed: %s %s", raw, tools["order_start"].Description)
	}
	text, sc, isErr := c.Call("order_pay", nil)
	if !isErr || sc["error"] != "FORBIDDEN" || !strings.Contains(text, "not started") || !strings.Contains(text, "order_start") ||
		!slices.Equal(anyStrings(sc["allowed"]), []string{"order_start", "order_status"}) {
		t.Errorf("pay before the start: %s %v", text, sc)
	}
	if _, sc, _ := c.Call("order_status", nil); sc["status"] != "not started" || sc["state"] != nil {
		t.Errorf("status before the start: %v", sc)
	}
	if text, sc, isErr := c.Call("order_start", map[string]any{"customer": "ACME"}); !isErr || sc["error"] != "INVALID_ARGUMENTS" || !strings.Contains(text, "items") {
		t.Errorf("a start without items: %s", text)
	}
	if text, _, isErr := c.Call("order_start", map[string]any{"customer": "nobody", "items": 1}); !isErr || !strings.Contains(text, "nobody may not order") || !strings.Contains(text, "Nothing was stored") {
		t.Errorf("a start the machine refuses: %s", text)
	}
	if keys, _ := st.List(context.Background()); len(keys) != 0 {
		t.Errorf("refused starts stored %v", keys)
	}
	c.Drain()
	text, sc, isErr = c.Call("order_start", map[string]any{"customer": "ACME", "items": 3})
	if isErr || sc["state"] != "open" || sc["context"].(map[string]any)["total"] != 30.0 || !strings.Contains(text, "order_pay") {
		t.Fatalf("the start: %s %v", text, sc)
	}
	c.AwaitChanged()
	if _, ok := c.Tools()["order_pay"]; !ok {
		t.Errorf("order_pay not listed once started: %v", mcptest.Names(c.Tools()))
	}
	if text, sc, isErr := c.Call("order_start", map[string]any{"customer": "ACME", "items": 3}); !isErr || sc["error"] != "FORBIDDEN" || !strings.Contains(text, "started already") {
		t.Errorf("a second start: %s", text)
	}
	c.Result("order_pay", nil)
	if _, sc, isErr := c.Call("order_reset", nil); isErr || sc["state"] != "open" || sc["context"].(map[string]any)["customer"] != "ACME" {
		t.Errorf("the reset: %v", sc)
	}
	keys, _ := st.List(context.Background())
	if len(keys) != 1 {
		t.Fatalf("stored: %v", keys)
	}
	rec, _, err := st.Load(context.Background(), keys[0])
	if err != nil || string(rec.Input) != `{"customer":"ACME","items":3}` {
		t.Errorf("the stored input: %s %v", rec.Input, err)
	}
	trail, _ := st.Audit(context.Background(), keys[0], 0)
	if len(trail) == 0 || trail[0].Tool != "order_start" || trail[0].From != nil || trail[0].Event["customer"] != "ACME" {
		t.Errorf("the trail's first entry: %+v", trail)
	}
}

// TestInputByHandle: a workflow with a handle key and meta.input lists
// its start tool always (another instance may be started); the start
// takes the handle key's argument beside the input, which the machine
// does not see; an instance not started refuses the other tools.
func TestInputByHandle(t *testing.T) {
	c := mcptest.HTTP(t, inputServer(t, store.NewMemory()), mcptest.Options{})
	s1 := map[string]any{"shipment_id": "s1"}
	if text, sc, isErr := c.Call("shipment_dispatch", s1); !isErr || sc["error"] != "FORBIDDEN" || !strings.Contains(text, "shipment_start") {
		t.Errorf("dispatch before the start: %s", text)
	}
	_, sc, isErr := c.Call("shipment_start", map[string]any{"shipment_id": "s1", "to": "Oslo"})
	if isErr || sc["state"] != "packed" || sc["handle"] != "s1" {
		t.Fatalf("the start: %v", sc)
	}
	if ctx := sc["context"].(map[string]any); ctx["to"] != "Oslo" || ctx["shipment_id"] != nil {
		t.Errorf("the context: %v", ctx)
	}
	if got := mcptest.Names(c.Tools()); !slices.Contains(got, "shipment_start") || !slices.Contains(got, "shipment_dispatch") {
		t.Errorf("once s1 is started: %v", got)
	}
	if _, sc, _ := c.Call("shipment_status", map[string]any{"shipment_id": "s2"}); sc["status"] != "not started" {
		t.Errorf("s2: %v", sc)
	}
	if _, sc, isErr := c.Call("shipment_dispatch", s1); isErr || sc["state"] != "sent" {
		t.Errorf("dispatch: %v", sc)
	}
}

// TestInputModern: under revision 2026-07-28 the start tool takes the
// input alone (no handle: it makes one) and the instance it makes has it.
func TestInputModern(t *testing.T) {
	c := modernHTTP(t, inputServer(t, store.NewMemory()))
	tools := c.Tools()
	raw, _ := json.Marshal(tools["shipment_start"].InputSchema)
	if strings.Contains(string(raw), "shipment_id") || !strings.Contains(string(raw), `"to"`) {
		t.Errorf("shipment_start under 2026-07-28: %s", raw)
	}
	if _, sc, isErr := c.Call("order_start", map[string]any{"items": 2}); !isErr || sc["error"] != "INVALID_ARGUMENTS" {
		t.Errorf("a start without its customer: %v", sc)
	}
	_, sc, isErr := c.Call("order_start", map[string]any{"customer": "ACME", "items": 2})
	handle, _ := sc["handle"].(string)
	if isErr || !strings.HasPrefix(handle, "wf-") || sc["context"].(map[string]any)["total"] != 20.0 {
		t.Fatalf("the start: %v", sc)
	}
	if _, sc, isErr := c.Call("order_pay", map[string]any{"workflow_id": handle}); isErr || sc["state"] != "paid" {
		t.Errorf("pay: %v", sc)
	}
	_, sc, _ = c.Call("shipment_start", map[string]any{"to": "Oslo"})
	if h, _ := sc["handle"].(string); h == "" || strings.HasPrefix(h, "wf-") {
		t.Errorf("a shipment's start: %v", sc)
	}
}
