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
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/store"
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
	g = gate.New(gate.Options{Store: st, Logger: log})
	lib := gate.NewLibrary(g, &xstate.Loader{Modules: &js.Host{}}, dir, "")
	if err := lib.Reload(); err != nil {
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

// mcpClient is a session with the notifications it got.
type mcpClient struct {
	*client.Client
	t       *testing.T
	changed chan struct{}
}

func connect(t *testing.T, url string) *mcpClient {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// The session-based revisions' GET stream is what these tests look
	// at (the gate serves 2025-11-25 over HTTP).
	//lint:ignore SA1019 deprecated for 2026-07-28 only
	c, err := client.NewStreamableHttpClient(url, transport.WithContinuousListening(), transport.WithHTTPLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mc := watched(t, c)
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	req.Params.ClientInfo = mcp.Implementation{Name: "e2e", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return mc
}

// watched starts a client, its list_changed notifications signalled on
// changed.
func watched(t *testing.T, c *client.Client) *mcpClient {
	t.Helper()
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	mc := &mcpClient{Client: c, t: t, changed: make(chan struct{}, 100)}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/tools/list_changed" {
			// A full buffer must not block the client's reader (its
			// answers would wait behind it): the signal is there already.
			select {
			case mc.changed <- struct{}{}:
			default:
			}
		}
	})
	return mc
}

func (c *mcpClient) tools() map[string]mcp.Tool {
	c.t.Helper()
	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]mcp.Tool{}
	for _, tl := range res.Tools {
		out[tl.Name] = tl
	}
	return out
}

// call calls a tool and returns its result's text and structured content.
func (c *mcpClient) call(name string, args map[string]any) (text string, sc map[string]any, isError bool) {
	c.t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		c.t.Fatalf("call %s: %v", name, err)
	}
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(mcp.TextContent); ok {
			text = tc.Text
		}
	}
	data, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(data, &sc)
	return text, sc, res.IsError
}

// awaitChanged waits for a list_changed notification.
func (c *mcpClient) awaitChanged() {
	c.t.Helper()
	select {
	case <-c.changed:
	case <-time.After(5 * time.Second):
		c.t.Fatal("no notifications/tools/list_changed")
	}
}

// noChange checks that no list_changed arrives within a short while (an
// absence cannot be awaited).
func (c *mcpClient) noChange() {
	c.t.Helper()
	select {
	case <-c.changed:
		c.t.Fatal("unexpected notifications/tools/list_changed")
	case <-time.After(300 * time.Millisecond):
	}
}

// awaitState waits, notification by notification, until a status tool
// reports a state (notifications of earlier calls may still arrive).
func (c *mcpClient) awaitState(statusTool, want string) map[string]any {
	c.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		_, sc, _ := c.call(statusTool, nil)
		if sc["state"] == want {
			return sc
		}
		select {
		case <-c.changed:
		case <-deadline:
			c.t.Fatalf("%s never reported state %s; last %v", statusTool, want, sc)
		}
	}
}

// awaitTools waits, notification by notification, until the tool list
// satisfies ok.
func (c *mcpClient) awaitTools(what string, ok func(map[string]mcp.Tool) bool) {
	c.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		tools := c.tools()
		if ok(tools) {
			return
		}
		select {
		case <-c.changed:
		case <-deadline:
			c.t.Fatalf("the tool list never showed %s: %v", what, names(tools))
		}
	}
}

func (c *mcpClient) drain() {
	for {
		select {
		case <-c.changed:
		default:
			return
		}
	}
}

func names(m map[string]mcp.Tool) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func TestListFollowsState(t *testing.T) {
	url, _ := setup(t)
	a := connect(t, url)
	if caps := a.GetServerCapabilities(); caps.Tools == nil || !caps.Tools.ListChanged {
		t.Fatalf("tools.listChanged not advertised: %+v", caps.Tools)
	}
	tools := a.tools()
	for _, want := range []string{"invoice_add_line", "invoice_submit", "invoice_status", "payment_authorize", "lamp_on", "order_status"} {
		if _, ok := tools[want]; !ok {
			t.Errorf("%s not listed; listed: %v", want, names(tools))
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

	a.drain()
	text, sc, isErr := a.call("invoice_submit", nil)
	if isErr || sc["state"] != "review" || !strings.Contains(text, "review") {
		t.Fatalf("submit: %v %s %v", isErr, text, sc)
	}
	if !slices.Contains(anyStrings(sc["tools"]), "invoice_approve") {
		t.Fatalf("tools after submit: %v", sc["tools"])
	}
	a.awaitChanged()
	tools = a.tools()
	if _, ok := tools["invoice_approve"]; !ok {
		t.Fatalf("invoice_approve not listed in review: %v", names(tools))
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
	text, sc, isErr := a.call("invoice_approve", nil)
	if !isErr || !strings.HasPrefix(text, "FORBIDDEN") || sc["error"] != "FORBIDDEN" || sc["state"] != "draft" {
		t.Fatalf("approve in draft: %v %q %v", isErr, text, sc)
	}
	allowed := anyStrings(sc["allowed"])
	if !slices.Contains(allowed, "invoice_submit") || slices.Contains(allowed, "invoice_approve") {
		t.Fatalf("allowed: %v", allowed)
	}
	// The machine did not move.
	_, sc, _ = a.call("invoice_status", nil)
	if sc["state"] != "draft" {
		t.Fatalf("state after a forbidden call: %v", sc["state"])
	}
}

func TestRejectedWhenAPayloadGuardSaysNo(t *testing.T) {
	url, _ := setup(t)
	a := connect(t, url)
	// The guard reads the amount: the tool is listed and the call decides.
	if _, ok := a.tools()["payment_authorize"]; !ok {
		t.Fatal("payment_authorize not listed")
	}
	text, sc, isErr := a.call("payment_authorize", map[string]any{"amount": 5000})
	if !isErr || !strings.HasPrefix(text, "REJECTED") || sc["state"] != "pending" {
		t.Fatalf("authorize 5000: %v %q %v", isErr, text, sc)
	}
	_, sc, isErr = a.call("payment_authorize", map[string]any{"amount": 120})
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
	text, _, isErr := a.call("invoice_add_line", map[string]any{"description": "Widgets", "amount": "ten"})
	if !isErr || !strings.HasPrefix(text, "INVALID_ARGUMENTS") || !strings.Contains(text, "/amount") {
		t.Fatalf("bad amount: %v %q", isErr, text)
	}
	_, sc, _ := a.call("invoice_status", nil)
	if lines := sc["context"].(map[string]any)["lines"]; len(lines.([]any)) != 0 {
		t.Fatalf("a refused call changed the context: %v", sc["context"])
	}
}

func TestDoneListsReset(t *testing.T) {
	url, _ := setup(t)
	a := connect(t, url)
	a.call("lamp_on", nil)
	_, sc, _ := a.call("lamp_break", nil)
	if sc["status"] != "done" {
		t.Fatalf("lamp_break: %v", sc)
	}
	tools := a.tools()
	if _, ok := tools["lamp_reset"]; !ok {
		t.Fatalf("lamp_reset not listed once done: %v", names(tools))
	}
	for _, n := range []string{"lamp_on", "lamp_off", "lamp_break"} {
		if _, ok := tools[n]; ok {
			t.Fatalf("%s listed once done", n)
		}
	}
	_, sc, isErr := a.call("lamp_reset", nil)
	if isErr || sc["state"] != "off" || sc["status"] != "active" {
		t.Fatalf("reset: %v %v", isErr, sc)
	}
}

func TestHandleKeysAcrossSessions(t *testing.T) {
	url, _ := setup(t)
	a, b, c := connect(t, url), connect(t, url), connect(t, url)
	if _, ok := a.tools()["order_add"]; !ok {
		t.Fatal("order_add not listed")
	}
	if schema := a.tools()["order_add"].InputSchema; !slices.Equal(schema.Required, []string{"order_id"}) {
		t.Fatalf("order_add schema: %+v", schema)
	}
	text, _, isErr := a.call("order_add", nil)
	if !isErr || !strings.Contains(text, `"order_id"`) {
		t.Fatalf("a call without the handle: %v %q", isErr, text)
	}
	a.call("order_add", map[string]any{"order_id": "42"})
	_, sc, _ := b.call("order_status", map[string]any{"order_id": "42"})
	if items := sc["context"].(map[string]any)["items"]; items != 1.0 {
		t.Fatalf("b sees items=%v on order 42", items)
	}
	b.drain()
	c.drain()
	// A closes order 42: b, which used 42 last, sees its list change; c,
	// which never used an order, does not.
	a.call("order_close", map[string]any{"order_id": "42"})
	b.awaitChanged()
	c.noChange()
	if _, ok := b.tools()["order_reopen"]; !ok {
		t.Fatal("b does not list order_reopen for the closed order 42")
	}
	if _, ok := c.tools()["order_reopen"]; ok {
		t.Fatal("c lists order_reopen: it sees no order")
	}
}

func TestSessionsHaveTheirOwnInstances(t *testing.T) {
	url, _ := setup(t)
	a, b := connect(t, url), connect(t, url)
	b.drain()
	a.call("lamp_on", nil)
	b.noChange()
	if _, ok := b.tools()["lamp_on"]; !ok {
		t.Fatal("b's lamp moved with a's")
	}
}

func TestParallelCallsOnOneInstance(t *testing.T) {
	url, _ := setup(t)
	const n = 50
	clients := make([]*mcpClient, 5)
	for i := range clients {
		clients[i] = connect(t, url)
	}
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func(c *mcpClient) {
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
	_, sc, _ := clients[0].call("order_status", map[string]any{"order_id": "busy"})
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
	c.tools()
	afterList := g.Activity()
	if afterList <= before {
		t.Fatalf("a tool list left the activity at %d (was %d)", afterList, before)
	}
	c.call("invoice_status", nil)
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
	if _, _, isErr := c.call("looper_bump", nil); isErr {
		t.Fatal("looper_bump failed")
	}
	text, _, isErr := c.call("looper_spin", nil)
	if !isErr || !strings.Contains(text, "infinite loop") {
		t.Fatalf("looper_spin: isError %v, %q", isErr, text)
	}
	_, sc, _ := c.call("looper_status", nil)
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
	tools := a.tools()
	if ro := tools["invoice_status"].Annotations.ReadOnlyHint; ro == nil || !*ro {
		t.Errorf("invoice_status is not read-only: %+v", tools["invoice_status"].Annotations)
	}
	if ro := tools["invoice_submit"].Annotations.ReadOnlyHint; ro == nil || *ro {
		t.Errorf("invoice_submit is read-only: %+v", tools["invoice_submit"].Annotations)
	}
	if _, _, isErr := a.call("payment_authorize", map[string]any{"amount": 10}); isErr {
		t.Fatal("authorize failed")
	}
	void, ok := a.tools()["payment_void"]
	if !ok {
		t.Fatal("payment_void not listed after authorize")
	}
	if d := void.Annotations.DestructiveHint; void.Title != "Void the authorization" || d == nil || !*d {
		t.Errorf("payment_void: title %q, annotations %+v", void.Title, void.Annotations)
	}
	if d := a.tools()["payment_capture"].Annotations.DestructiveHint; d == nil || *d {
		t.Errorf("payment_capture is destructive")
	}
}

// callResult calls a tool and returns its whole result.
func (c *mcpClient) callResult(name string, args map[string]any) *mcp.CallToolResult {
	c.t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		c.t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// resultText joins a result's text contents.
func resultText(res *mcp.CallToolResult) string {
	var out []string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return strings.Join(out, "\n")
}
