package gate_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
	"github.com/stategate/stategate/xstate/js"
)

// modernServer serves the bundled machines and the test machines over
// HTTP, from a folder a test may change (then lib.Reload).
func modernServer(t *testing.T) (url, dir string, lib *workflow.Library, st *store.Memory) {
	t.Helper()
	dir = t.TempDir()
	for _, f := range []string{"invoice.json", "invoice.impl.ts", "payment.ts", "db-migration.mjs"} {
		data, err := os.ReadFile(filepath.Join("..", "machines", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for f, src := range testMachines {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st = store.NewMemory()
	g := gate.New(gate.Options{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	lib = workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Loader: &xstate.Loader{Modules: &js.Host{}}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Serve: g.Reloaded})
	if err := lib.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := g.HTTPHandler(gate.HTTPOptions{})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)
	return srv.URL + "/mcp", dir, lib, st
}

// connectModern connects a client that speaks revision 2026-07-28 (mcp-go's
// default: it probes with server/discover).
func connectModern(t *testing.T, c *client.Client) *mcptest.Client {
	t.Helper()
	return mcptest.Start(t, c, mcptest.Options{Version: mcp.ProtocolVersion20260728, Name: "modern"})
}

func modernHTTP(t *testing.T, url string) *mcptest.Client {
	t.Helper()
	return mcptest.HTTP(t, url, mcptest.Options{Version: mcp.ProtocolVersion20260728, Name: "modern"})
}

// listing is a tool list as text, to compare lists whole.
func listing(t *testing.T, c *mcptest.Client) string {
	t.Helper()
	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(res.Tools)
	return string(data)
}

// walkModern walks an invoice as a client of revision 2026-07-28: the
// list is every tool, each taking the handle, and it does not change as
// the instance moves; the results say what is allowed next.
func walkModern(t *testing.T, c *mcptest.Client) {
	t.Helper()
	ctx := context.Background()
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if res.TTLMs == nil || *res.TTLMs <= 0 || res.CacheScope == "" {
		t.Errorf("no cache hints on the list: ttlMs %v, cacheScope %q", res.TTLMs, res.CacheScope)
	}
	before := listing(t, c)
	tools := c.Tools()
	for _, want := range []string{"invoice_submit", "invoice_approve", "invoice_request_changes", "invoice_status", "invoice_reset", "invoice_start", "order_add", "lamp_on"} {
		if _, ok := tools[want]; !ok {
			t.Errorf("%s not listed: %v", want, mcptest.Names(tools))
		}
	}
	approve := tools["invoice_approve"]
	if !slices.Contains(approve.InputSchema.Required, "workflow_id") || !strings.Contains(approve.Description, "Available when the invoice workflow is in") {
		t.Errorf("invoice_approve as listed: %+v", approve)
	}
	if !slices.Contains(tools["order_add"].InputSchema.Required, "order_id") {
		t.Errorf("order_add does not take its handle key: %+v", tools["order_add"].InputSchema)
	}
	// A handle the server did not make is refused, naming the start tool.
	if text, sc, isErr := c.Call("invoice_submit", map[string]any{"workflow_id": "default"}); !isErr || sc["error"] != "INVALID_ARGUMENTS" || !strings.Contains(text, "invoice_start") {
		t.Errorf("a handle not made by the server: %s %v", text, sc)
	}
	_, sc, isErr := c.Call("invoice_start", nil)
	handle, _ := sc["handle"].(string)
	if isErr || !strings.HasPrefix(handle, "wf-") || len(handle) < 3+26 || sc["state"] != "draft" {
		t.Fatalf("invoice_start: %v", sc)
	}
	id := map[string]any{"workflow_id": handle}
	// Not allowed yet: refused with the state and the tools allowed now.
	text, sc, isErr := c.Call("invoice_approve", id)
	if !isErr || sc["error"] != "FORBIDDEN" || !strings.Contains(text, "invoice_submit") {
		t.Errorf("approve in draft: %s %v", text, sc)
	}
	text, sc, isErr = c.Call("invoice_submit", id)
	if isErr || sc["state"] != "review" || !strings.Contains(text, "invoice_approve") {
		t.Fatalf("submit: %s %v", text, sc)
	}
	text, sc, isErr = c.Call("invoice_approve", id)
	if isErr || sc["state"] != "approved" {
		t.Fatalf("approve: %s %v", text, sc)
	}
	// The list did not change, and nobody was told it did.
	if after := listing(t, c); after != before {
		t.Errorf("the list changed with the calls:\nbefore %s\nafter  %s", before, after)
	}
	c.NoChange()
}

func TestModernHTTP(t *testing.T) {
	url, _, _, st := modernServer(t)
	c := modernHTTP(t, url)
	walkModern(t, c)
	// The audit trail records the revision of each call.
	keys, _ := st.List(context.Background())
	var seen bool
	for _, k := range keys {
		if k.Machine != "invoice" {
			continue
		}
		trail, _ := st.Audit(context.Background(), k, 0)
		for _, e := range trail {
			seen = true
			if e.Protocol != mcp.ProtocolVersion20260728 {
				t.Errorf("audit entry %+v: protocol %q", e, e.Protocol)
			}
		}
	}
	if !seen {
		t.Error("no audit entry")
	}
}

// TestModernAndLegacyTogether: a client of each revision on one server;
// the older one still has its per-session list and list_changed.
func TestModernAndLegacyTogether(t *testing.T) {
	url, _, _, _ := modernServer(t)
	modern := modernHTTP(t, url)
	legacy := connect(t, url)
	if _, ok := legacy.Tools()["invoice_approve"]; ok {
		t.Fatal("invoice_approve listed to a legacy session in draft")
	}
	if _, ok := legacy.Tools()["invoice_start"]; ok {
		t.Error("the start tool listed to a legacy session")
	}
	if _, sc, isErr := legacy.Call("invoice_start", nil); !isErr || sc["error"] != "FORBIDDEN" {
		t.Errorf("invoice_start from a legacy session: %v", sc)
	}
	legacy.Call("invoice_submit", nil)
	legacy.AwaitChanged()
	if _, ok := legacy.Tools()["invoice_approve"]; !ok {
		t.Error("invoice_approve not listed to the legacy session in review")
	}
	walkModern(t, modern)
	// The modern client's instance is not the legacy session's.
	_, sc, _ := legacy.Call("invoice_status", nil)
	if sc["state"] != "review" {
		t.Errorf("the legacy session's invoice: %v", sc)
	}
}

// TestModernReloadIsAnnounced: a reload that changes the list reaches a
// client that listens (subscriptions/listen, toolsListChanged).
func TestModernReloadIsAnnounced(t *testing.T) {
	url, dir, lib, _ := modernServer(t)
	c := modernHTTP(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listening := make(chan error, 1)
	stop, err := c.ListenAsync(ctx, mcp.SubscriptionFilter{ToolsListChanged: true}, func(err error) { listening <- err })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	before := listing(t, c)
	// The listen stream may open after ListenAsync returns: reload until
	// a notification arrives (each reload adds a machine).
	deadline := time.After(time.Minute)
	for i := 0; ; i++ {
		src := strings.ReplaceAll(testMachines["lamp.json"], `"id": "lamp"`, `"id": "bulb`+string(rune('a'+i))+`"`)
		if err := os.WriteFile(filepath.Join(dir, "bulb"+string(rune('a'+i))+".json"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := lib.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-c.Changed():
		case err := <-listening:
			t.Fatalf("listen: %v", err)
		case <-time.After(100 * time.Millisecond):
			continue
		case <-deadline:
			t.Fatal("no list_changed after reloads")
		}
		break
	}
	after := listing(t, c)
	if after == before || !strings.Contains(after, "bulba_on") {
		t.Errorf("the list after the reload lacks the new machine: %s", after)
	}
}

// TestModernStdio: over stdio, a client of revision 2026-07-28 gets the
// same list whatever its calls do (mcp-go answers server/discover there).
func TestModernStdio(t *testing.T) {
	bin := buildBinary(t)
	dir, _ := filepath.Abs(filepath.Join("..", "machines"))
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	c, err := client.NewStdioMCPClient(bin, env, "serve", "--machines", dir, "--data", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mc := connectModern(t, c)
	before := listing(t, mc)
	_, sc, _ := mc.Call("invoice_start", nil)
	id := map[string]any{"workflow_id": sc["handle"]}
	if _, sc, isErr := mc.Call("invoice_submit", id); isErr || sc["state"] != "review" {
		t.Fatalf("submit: %v", sc)
	}
	if after := listing(t, mc); after != before {
		t.Errorf("the list changed with a call:\nbefore %s\nafter  %s", before, after)
	}
	mc.NoChange()
}

// TestModernNegotiation: a client that asks for a revision the server
// does not know is told the ones it serves, and settles on 2026-07-28;
// one pinned to 2025-11-25 gets that, with its session.
func TestModernNegotiation(t *testing.T) {
	url, _, _, _ := modernServer(t)
	quiet := transport.WithHTTPLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	c, err := client.NewStreamableHttpClient(url, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2099-01-01"
	init.Params.ClientInfo = mcp.Implementation{Name: "future", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	if v := c.ProtocolVersion(); v != mcp.ProtocolVersion20260728 {
		t.Errorf("a client of a future revision settled on %q", v)
	}
	d, err := c.Discover(ctx, mcp.DiscoverRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{mcp.ProtocolVersion20260728, mcp.ProtocolVersion20251125} {
		if !slices.Contains(d.SupportedVersions, v) {
			t.Errorf("server/discover does not advertise %s: %v", v, d.SupportedVersions)
		}
	}
	if d.Capabilities.Tools == nil || !d.Capabilities.Tools.ListChanged {
		t.Errorf("server/discover: tools capability %+v", d.Capabilities.Tools)
	}
	legacy := connect(t, url)
	if v := legacy.ProtocolVersion(); v != mcp.ProtocolVersion20251125 {
		t.Errorf("a client pinned to 2025-11-25 got %q", v)
	}
	if legacy.GetSessionId() == "" {
		t.Error("no session for a 2025-11-25 client")
	}
}

// TestDiscoverProbeFallsBack: a probe with server/discover that does not
// speak 2026-07-28 (no such version in its _meta) is answered as a server
// of the earlier revisions answers a request without a session (404), on
// which a probing client falls back to initialize, which works.
func TestDiscoverProbeFallsBack(t *testing.T) {
	url, _, _, _ := modernServer(t)
	res := rawPost(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`, nil)
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("a probe without 2026-07-28: %s, want 404", res.Status)
	}
	if id, v := rawSession(t, url, mcp.ProtocolVersion20251125); id == "" || v != mcp.ProtocolVersion20251125 {
		t.Errorf("initialize after the probe: %q %q", id, v)
	}
}

// TestModernTimer: an instance a client of revision 2026-07-28 started
// has its timers fired as any other, and nobody is told of a list change.
func TestModernTimer(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kettle.json"), []byte(kettle), 0o644); err != nil {
		t.Fatal(err)
	}
	c := modernHTTP(t, serveStore(t, dir, store.NewMemory()))
	_, sc, _ := c.Call("kettle_start", nil)
	id := map[string]any{"workflow_id": sc["handle"]}
	if _, sc, isErr := c.Call("kettle_boil", id); isErr || sc["state"] != "heating" {
		t.Fatalf("boil: %v", sc)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, sc, _ := c.Call("kettle_status", id)
		if sc["state"] == "hot" {
			if timers, _ := sc["timers"].([]any); len(timers) != 1 {
				t.Errorf("timers after the first fired: %v", sc["timers"])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the after timer never moved the kettle: %v", sc)
		}
		time.Sleep(20 * time.Millisecond) // polling the status tool: a client of this revision is told nothing
	}
	c.NoChange()
}

// TestModernHandlesAreMinted: a handle of the start tool's shape that it
// did not make is refused at once; one it made works, also on another run
// of the server on the same store; one of the form before handles were
// tagged is taken only for an instance the store holds.
func TestModernHandlesAreMinted(t *testing.T) {
	st := store.NewMemory()
	serve := func() *mcptest.Client {
		g := gate.New(gate.Options{Store: st, Logger: quietLog()})
		if err := g.SetWorkflows([]*workflow.Workflow{lampWorkflow(t)}); err != nil {
			t.Fatal(err)
		}
		h := g.HTTPHandler(gate.HTTPOptions{})
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		t.Cleanup(h.Close)
		return modernHTTP(t, srv.URL+"/mcp")
	}
	c := serve()
	_, sc, isErr := c.Call("lamp_start", nil)
	minted, _ := sc["handle"].(string)
	if isErr || !strings.HasPrefix(minted, "wf-") || len(minted) != 3+26+16 {
		t.Fatalf("lamp_start: %v", sc)
	}
	refused := func(c *mcptest.Client, h, why string) {
		t.Helper()
		if _, sc, isErr := c.Call("lamp_on", map[string]any{"workflow_id": h}); !isErr || sc["error"] != "INVALID_ARGUMENTS" {
			t.Errorf("%s: %v", why, sc)
		}
	}
	forged := minted[:len(minted)-1] + map[bool]string{true: "b", false: "a"}[minted[len(minted)-1] == 'a']
	refused(c, forged, "a minted handle with a wrong tag")
	refused(c, "wf-"+strings.Repeat("a", 26+16), "a forged handle of the right shape")
	refused(c, "wf-"+strings.Repeat("b", 26), "a handle of the old form that the store does not hold")
	if _, sc, isErr := c.Call("lamp_on", map[string]any{"workflow_id": minted}); isErr || sc["state"] != "on" {
		t.Fatalf("lamp_on with the minted handle: %v", sc)
	}
	// An instance of the old form, stored by an earlier version.
	legacy := "wf-" + strings.Repeat("c", 26)
	if _, err := st.Save(context.Background(), store.Key{Machine: "lamp", Handle: legacy}, store.Record{Snapshot: []byte(`{"status":"active","value":"off","context":{},"children":{},"historyValue":{}}`)}, 0); err != nil {
		t.Fatal(err)
	}
	// Another run on the same store: the secret is the store's.
	c2 := serve()
	if _, sc, isErr := c2.Call("lamp_status", map[string]any{"workflow_id": minted}); isErr || sc["state"] != "on" {
		t.Errorf("the minted handle on another run: %v", sc)
	}
	if _, sc, isErr := c2.Call("lamp_on", map[string]any{"workflow_id": legacy}); isErr || sc["state"] != "on" {
		t.Errorf("a stored handle of the old form: %v", sc)
	}
	refused(c2, forged, "the forged handle on another run")
}

// lampWorkflow is testMachines' lamp, made in memory.
func lampWorkflow(t *testing.T) *workflow.Workflow {
	t.Helper()
	m, _, err := (&xstate.Loader{}).Parse("lamp.json", []byte(testMachines["lamp.json"]))
	if err != nil {
		t.Fatal(err)
	}
	w, err := workflow.New(m, workflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return w
}
