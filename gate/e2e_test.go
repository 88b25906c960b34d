package gate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
	"github.com/stategate/stategate/xstate/js"
)

// testMachines are served besides the bundled examples.
var testMachines = map[string]string{
	"order.json": `{
  "id": "order",
  "meta": { "handleKey": "order_id" },
  "initial": "open",
  "context": { "items": 0 },
  "states": {
    "open": { "on": { "ADD": { "actions": "addItem" }, "CLOSE": "closed" } },
    "closed": { "on": { "REOPEN": "open" } }
  }
}`,
	"order.impl.mjs": `import { assign } from 'xstate';
export default { actions: { addItem: assign({ items: ({ context }) => context.items + 1 }) } };`,
	"lamp.json": `{
  "id": "lamp",
  "initial": "off",
  "states": {
    "off": { "on": { "ON": "on" } },
    "on": { "on": { "OFF": "off", "BREAK": "broken" } },
    "broken": { "type": "final" }
  }
}`,
}

// setup copies the bundled machines and the test machines into a folder
// and serves them over HTTP on loopback.
func setup(t testing.TB) (url string, g *gate.Gate) {
	t.Helper()
	return setupWith(t, testMachines)
}

// setupWith serves the bundled machines and the given ones.
func setupWith(t testing.TB, extra map[string]string) (url string, g *gate.Gate) {
	t.Helper()
	return serveHTTP(t, extra, gate.HTTPOptions{})
}

// serveHTTP serves the bundled machines and the given ones with HTTP
// options.
func serveHTTP(t testing.TB, extra map[string]string, opts gate.HTTPOptions) (url string, g *gate.Gate) {
	t.Helper()
	return serveOn(t, store.NewMemory(), extra, opts)
}

// serveOn serves the bundled machines and the given ones with a store and
// HTTP options.
func serveOn(t testing.TB, st store.Store, extra map[string]string, opts gate.HTTPOptions) (url string, g *gate.Gate) {
	t.Helper()
	return serveGate(t, gate.Options{Store: st}, extra, opts)
}

// serveGate serves the bundled machines and the given ones with a gate's
// options and HTTP options.
func serveGate(t testing.TB, o gate.Options, extra map[string]string, opts gate.HTTPOptions) (url string, g *gate.Gate) {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"invoice.json", "invoice.impl.ts", "payment.ts", "db-migration.mjs"} {
		data, err := os.ReadFile(filepath.Join("..", "machines", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for f, src := range extra {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	o.Logger = log
	g = gate.New(o)
	lib := workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Loader: &xstate.Loader{Modules: &js.Host{}}, Logger: log, Serve: g.Reloaded})
	if err := lib.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if errs := lib.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	h := g.HTTPHandler(opts)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close) // before srv.Close: streams end
	return srv.URL + "/mcp", g
}

// connect connects a session of revision 2025-11-25 with a GET stream
// (the gate serves 2025-11-25 over HTTP): notifications reach it as they
// are sent.
func connect(t *testing.T, url string) *mcptest.Client {
	t.Helper()
	return mcptest.HTTP(t, url, mcptest.Options{Listen: true, Name: "e2e"})
}

// watched starts a client made elsewhere, not initialized yet.
func watched(t *testing.T, c *client.Client) *mcptest.Client {
	t.Helper()
	return mcptest.Start(t, c, mcptest.Options{NoInit: true})
}

func TestListFollowsState(t *testing.T) {
	url, _ := setup(t)
	a := connect(t, url)
	if caps := a.GetServerCapabilities(); caps.Tools == nil || !caps.Tools.ListChanged {
		t.Fatalf("tools.listChanged not advertised: %+v", caps.Tools)
	}
	tools := a.Tools()
	for _, want := range []string{"invoice_add_line", "invoice_submit", "invoice_status", "payment_authorize", "lamp_on", "order_status"} {
		if _, ok := tools[want]; !ok {
			t.Errorf("%s not listed; listed: %v", want, mcptest.Names(tools))
		}
	}
	for _, hidden := range []string{"invoice_approve", "invoice_remove_line", "invoice_discharge", "payment_capture", "lamp_off", "lamp_reset", "migration_start"} {
		if _, ok := tools[hidden]; ok {
			t.Errorf("%s listed in the initial state", hidden)
		}
	}
	// Progressive disclosure: the compact description in the initial state.
	if d := tools["invoice_submit"].Description; d != "Submit for review." {
		t.Errorf("invoice_submit description %q", d)
	}

	a.Drain()
	text, sc, isErr := a.Call("invoice_submit", nil)
	if isErr || sc["state"] != "review" || !strings.Contains(text, "review") {
		t.Fatalf("submit: %v %s %v", isErr, text, sc)
	}
	if !slices.Contains(anyStrings(sc["tools"]), "invoice_approve") {
		t.Fatalf("tools after submit: %v", sc["tools"])
	}
	a.AwaitChanged()
	tools = a.Tools()
	if _, ok := tools["invoice_approve"]; !ok {
		t.Fatalf("invoice_approve not listed in review: %v", mcptest.Names(tools))
	}
	if _, ok := tools["invoice_submit"]; ok {
		t.Fatal("invoice_submit still listed in review")
	}
	if d := tools["invoice_request_changes"].Description; !strings.HasPrefix(d, "Send the invoice back") {
		t.Errorf("full description outside the initial state: %q", d)
	}
}

func anyStrings(v any) []string {
	var out []string
	if list, ok := v.([]any); ok {
		for _, x := range list {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

func TestForbiddenOnTheCallPath(t *testing.T) {
	url, _ := setup(t)
	a := connect(t, url)
	text, sc, isErr := a.Call("invoice_approve", nil)
	if !isErr || !strings.HasPrefix(text, "FORBIDDEN") || sc["error"] != "FORBIDDEN" || sc["state"] != "draft" {
		t.Fatalf("approve in draft: %v %q %v", isErr, text, sc)
	}
	allowed := anyStrings(sc["allowed"])
	if !slices.Contains(allowed, "invoice_submit") || slices.Contains(allowed, "invoice_approve") {
		t.Fatalf("allowed: %v", allowed)
	}
	// The machine did not move.
	_, sc, _ = a.Call("invoice_status", nil)
	if sc["state"] != "draft" {
		t.Fatalf("state after a forbidden call: %v", sc["state"])
	}
}

func TestRejectedWhenAPayloadGuardSaysNo(t *testing.T) {
	url, _ := setup(t)
	a := connect(t, url)
	// The guard reads the amount: the tool is listed and the call decides.
	if _, ok := a.Tools()["payment_authorize"]; !ok {
		t.Fatal("payment_authorize not listed")
	}
	text, sc, isErr := a.Call("payment_authorize", map[string]any{"amount": 5000})
	if !isErr || !strings.HasPrefix(text, "REJECTED") || sc["state"] != "pending" {
		t.Fatalf("authorize 5000: %v %q %v", isErr, text, sc)
	}
	_, sc, isErr = a.Call("payment_authorize", map[string]any{"amount": 120})
	if isErr || sc["state"] != "authorized" {
		t.Fatalf("authorize 120: %v %v", isErr, sc)
	}
	ctx, _ := sc["context"].(map[string]any)
	if ctx["authorized"] != 120.0 {
		t.Fatalf("context %v", ctx)
	}
}

func TestInvalidArguments(t *testing.T) {
	url, _ := setup(t)
	a := connect(t, url)
	text, _, isErr := a.Call("invoice_add_line", map[string]any{"description": "Widgets", "amount": "ten"})
	if !isErr || !strings.HasPrefix(text, "INVALID_ARGUMENTS") || !strings.Contains(text, "/amount") {
		t.Fatalf("bad amount: %v %q", isErr, text)
	}
	_, sc, _ := a.Call("invoice_status", nil)
	if lines := sc["context"].(map[string]any)["lines"]; len(lines.([]any)) != 0 {
		t.Fatalf("a refused call changed the context: %v", sc["context"])
	}
}

func TestDoneListsReset(t *testing.T) {
	url, _ := setup(t)
	a := connect(t, url)
	a.Call("lamp_on", nil)
	_, sc, _ := a.Call("lamp_break", nil)
	if sc["status"] != "done" {
		t.Fatalf("lamp_break: %v", sc)
	}
	tools := a.Tools()
	if _, ok := tools["lamp_reset"]; !ok {
		t.Fatalf("lamp_reset not listed once done: %v", mcptest.Names(tools))
	}
	for _, n := range []string{"lamp_on", "lamp_off", "lamp_break"} {
		if _, ok := tools[n]; ok {
			t.Fatalf("%s listed once done", n)
		}
	}
	_, sc, isErr := a.Call("lamp_reset", nil)
	if isErr || sc["state"] != "off" || sc["status"] != "active" {
		t.Fatalf("reset: %v %v", isErr, sc)
	}
}

func TestHandleKeysAcrossSessions(t *testing.T) {
	url, _ := setup(t)
	a, b, c := connect(t, url), connect(t, url), connect(t, url)
	if _, ok := a.Tools()["order_add"]; !ok {
		t.Fatal("order_add not listed")
	}
	if schema := a.Tools()["order_add"].InputSchema; !slices.Equal(schema.Required, []string{"order_id"}) {
		t.Fatalf("order_add schema: %+v", schema)
	}
	text, _, isErr := a.Call("order_add", nil)
	if !isErr || !strings.Contains(text, `"order_id"`) {
		t.Fatalf("a call without the handle: %v %q", isErr, text)
	}
	a.Call("order_add", map[string]any{"order_id": "42"})
	_, sc, _ := b.Call("order_status", map[string]any{"order_id": "42"})
	if items := sc["context"].(map[string]any)["items"]; items != 1.0 {
		t.Fatalf("b sees items=%v on order 42", items)
	}
	b.Drain()
	c.Drain()
	// A closes order 42: b, which used 42 last, sees its list change; c,
	// which never used an order, does not.
	a.Call("order_close", map[string]any{"order_id": "42"})
	b.AwaitChanged()
	c.NoChange()
	if _, ok := b.Tools()["order_reopen"]; !ok {
		t.Fatal("b does not list order_reopen for the closed order 42")
	}
	if _, ok := c.Tools()["order_reopen"]; ok {
		t.Fatal("c lists order_reopen: it sees no order")
	}
}

func TestSessionsHaveTheirOwnInstances(t *testing.T) {
	url, _ := setup(t)
	a, b := connect(t, url), connect(t, url)
	b.Drain()
	a.Call("lamp_on", nil)
	b.NoChange()
	if _, ok := b.Tools()["lamp_on"]; !ok {
		t.Fatal("b's lamp moved with a's")
	}
}

func TestParallelCallsOnOneInstance(t *testing.T) {
	url, _ := setup(t)
	const n = 50
	clients := make([]*mcptest.Client, 5)
	for i := range clients {
		clients[i] = connect(t, url)
	}
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func(c *mcptest.Client) {
			defer wg.Done()
			req := mcp.CallToolRequest{}
			req.Params.Name = "order_add"
			req.Params.Arguments = map[string]any{"order_id": "busy"}
			res, err := c.CallTool(context.Background(), req)
			if err != nil || res.IsError {
				errs <- fmt.Sprint(err, res)
			}
		}(clients[i%len(clients)])
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	_, sc, _ := clients[0].Call("order_status", map[string]any{"order_id": "busy"})
	if items := sc["context"].(map[string]any)["items"]; items != float64(n) {
		t.Fatalf("%d parallel calls gave items=%v", n, items)
	}
}

var jsonUnmarshal = json.Unmarshal

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestActivityCountsCallsAndLists checks the signal `serve` gives memory
// back on: it moves with every tool call and tool list, and not otherwise.
func TestActivityCountsCallsAndLists(t *testing.T) {
	url, g := setup(t)
	c := connect(t, url)
	before := g.Activity()
	c.Tools()
	afterList := g.Activity()
	if afterList <= before {
		t.Fatalf("a tool list left the activity at %d (was %d)", afterList, before)
	}
	c.Call("invoice_status", nil)
	afterCall := g.Activity()
	if afterCall <= afterList {
		t.Fatalf("a tool call left the activity at %d (was %d)", afterCall, afterList)
	}
	if g.Activity() != afterCall {
		t.Fatal("the activity moved with no request")
	}
}

// TestCallThatLoopsIsAnError checks that a call whose machine sends to
// itself without end (where XState hangs) is answered with the error, and
// that the instance keeps its state.
func TestCallThatLoopsIsAnError(t *testing.T) {
	url, _ := setupWith(t, map[string]string{"looper.mjs": `import { createMachine, sendTo, assign } from 'xstate';
export default createMachine({
  id: 'looper', initial: 'idle', context: { n: 0 },
  states: { idle: { on: {
    SPIN: { actions: sendTo(() => null, { type: 'SPIN' }) },
    BUMP: { actions: assign({ n: ({ context }) => context.n + 1 }) },
  } } },
});`})
	c := connect(t, url)
	if _, _, isErr := c.Call("looper_bump", nil); isErr {
		t.Fatal("looper_bump failed")
	}
	text, _, isErr := c.Call("looper_spin", nil)
	if !isErr || !strings.Contains(text, "infinite loop") {
		t.Fatalf("looper_spin: isError %v, %q", isErr, text)
	}
	_, sc, _ := c.Call("looper_status", nil)
	if sc["status"] != "active" || sc["context"].(map[string]any)["n"] != 1.0 {
		t.Fatalf("after the loop: %v", sc)
	}
}

// TestToolAnnotations checks what clients are told of tools besides
// their names: the status tool is read-only, event tools are not, and a
// transition's meta.tool.title and annotations reach the listing (the
// bundled payment machine marks VOID destructive).
func TestToolAnnotations(t *testing.T) {
	url, _ := setup(t)
	a := connect(t, url)
	tools := a.Tools()
	if ro := tools["invoice_status"].Annotations.ReadOnlyHint; ro == nil || !*ro {
		t.Errorf("invoice_status is not read-only: %+v", tools["invoice_status"].Annotations)
	}
	if ro := tools["invoice_submit"].Annotations.ReadOnlyHint; ro == nil || *ro {
		t.Errorf("invoice_submit is read-only: %+v", tools["invoice_submit"].Annotations)
	}
	if _, _, isErr := a.Call("payment_authorize", map[string]any{"amount": 10}); isErr {
		t.Fatal("authorize failed")
	}
	void, ok := a.Tools()["payment_void"]
	if !ok {
		t.Fatal("payment_void not listed after authorize")
	}
	if d := void.Annotations.DestructiveHint; void.Title != "Void the authorization" || d == nil || !*d {
		t.Errorf("payment_void: title %q, annotations %+v", void.Title, void.Annotations)
	}
	if d := a.Tools()["payment_capture"].Annotations.DestructiveHint; d == nil || *d {
		t.Errorf("payment_capture is destructive")
	}
}
