package gate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
	"github.com/stategate/stategate/xstate/js"
)

// fakeMermaid stands in for graph.Mermaid (which the gate does not
// link): the machine's id, the tools it was given and the active states.
func fakeMermaid(m *interp.Machine, tools map[string]string, active func(*interp.StateNode) bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "stateDiagram-v2\n  %%%% %s\n", m.Root.Key)
	for _, n := range m.Nodes {
		if active != nil && active(n) && n.Parent != nil {
			fmt.Fprintf(&b, "  class %s active\n", n.PathString())
		}
	}
	for _, ev := range slices.Sorted(func(yield func(string) bool) {
		for k := range tools {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "  %%%% %s / %s\n", ev, tools[ev])
	}
	return b.String()
}

// resourceGate serves the test machines (and the bundled invoice) with
// diagrams, from a folder a test may change (then lib.Reload).
func resourceGate(t *testing.T, opts gate.Options) (g *gate.Gate, lib *workflow.Library, dir string) {
	t.Helper()
	dir = t.TempDir()
	for _, f := range []string{"invoice.json", "invoice.impl.ts"} {
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
	if opts.Store == nil {
		opts.Store = store.NewMemory()
	}
	opts.Logger, opts.Mermaid = quietLog(), fakeMermaid
	g = gate.New(opts)
	lib = workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Loader: &xstate.Loader{Modules: &js.Host{}}, Logger: quietLog(), Serve: g.Reloaded})
	if err := lib.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if errs := lib.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	return g, lib, dir
}

func resourceHTTP(t *testing.T) (url string, g *gate.Gate, lib *workflow.Library, dir string) {
	t.Helper()
	g, lib, dir = resourceGate(t, gate.Options{})
	h := g.HTTPHandler(gate.HTTPOptions{})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)
	return srv.URL + "/mcp", g, lib, dir
}

// uris lists the URIs of a session's resources/list.
func uris(t *testing.T, c *mcptest.Client) []string {
	t.Helper()
	res, err := c.ListResources(context.Background(), mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range res.Resources {
		if r.Name == "" || r.MIMEType == "" {
			t.Errorf("resource %s: name %q, mimeType %q", r.URI, r.Name, r.MIMEType)
		}
		out = append(out, r.URI)
	}
	return out
}

// read reads a resource: its text and MIME type.
func read(c *mcptest.Client, uri string) (text, mime string, err error) {
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	res, err := c.ReadResource(context.Background(), req)
	if err != nil {
		return "", "", err
	}
	if len(res.Contents) != 1 {
		return "", "", fmt.Errorf("%d contents", len(res.Contents))
	}
	tc, ok := res.Contents[0].(mcp.TextResourceContents)
	if !ok {
		return "", "", fmt.Errorf("contents %T", res.Contents[0])
	}
	if tc.URI != uri {
		return "", "", fmt.Errorf("contents of %s, not %s", tc.URI, uri)
	}
	return tc.Text, tc.MIMEType, nil
}

// readJSON reads a JSON resource.
func readJSON(t *testing.T, c *mcptest.Client, uri string) map[string]any {
	t.Helper()
	text, mime, err := read(c, uri)
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	if mime != "application/json" {
		t.Errorf("%s: mimeType %q", uri, mime)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("%s: %v\n%s", uri, err, text)
	}
	return v
}

// notReadable checks that reading a URI is MCP's "resource not found".
func notReadable(t *testing.T, c *mcptest.Client, uri string, code error) {
	t.Helper()
	if _, _, err := read(c, uri); !errors.Is(err, code) {
		t.Errorf("read %s: %v, want %v", uri, err, code)
	}
}

func subscribe(c *mcptest.Client, uri string) error {
	req := mcp.SubscribeRequest{}
	req.Params.URI = uri
	//lint:ignore SA1019 resources/subscribe is the revisions with sessions' (2026-07-28 has Listen instead).
	return c.Subscribe(context.Background(), req)
}

func instanceURI(workflow, handle string) string {
	return "stategate://workflow/" + workflow + "/instance/" + handle
}

// sessionHandle is the handle of a session's own instance, as its status
// tool says.
func sessionHandle(t *testing.T, c *mcptest.Client, statusTool string) string {
	t.Helper()
	_, sc, _ := c.Call(statusTool, nil)
	h, _ := sc["handle"].(string)
	if h == "" {
		t.Fatalf("%s: no handle: %v", statusTool, sc)
	}
	return h
}

// TestResourcesHTTP: over Streamable HTTP (2025-11-25), each session
// lists and reads the workflows' diagrams and its own instances, and no
// other session's; it is told when they change.
func TestResourcesHTTP(t *testing.T) {
	url, _, lib, dir := resourceHTTP(t)
	a := connect(t, url)
	b := connect(t, url)
	if caps := a.GetServerCapabilities(); caps.Resources == nil || !caps.Resources.Subscribe || !caps.Resources.ListChanged {
		t.Fatalf("resources capability %+v", caps.Resources)
	}
	ha, hb := sessionHandle(t, a, "lamp_status"), sessionHandle(t, b, "lamp_status")
	if ha == hb {
		t.Fatalf("two sessions share the handle %s", ha)
	}
	listA := uris(t, a)
	for _, want := range []string{
		"stategate://workflow/lamp/diagram", "stategate://workflow/invoice/diagram", "stategate://workflow/order/diagram",
		instanceURI("lamp", ha), instanceURI("lamp", ha) + "/trail", instanceURI("lamp", ha) + "/diagram", instanceURI("invoice", ha),
	} {
		if !slices.Contains(listA, want) {
			t.Errorf("%s not listed: %v", want, listA)
		}
	}
	for _, u := range append(listA, uris(t, b)...) {
		if strings.Contains(u, "/instance/") && strings.Contains(u, hb) == strings.Contains(u, ha) {
			t.Errorf("listed %s (sessions %s and %s)", u, ha, hb)
		}
		if strings.Contains(u, "/order/instance/") {
			t.Errorf("listed %s before the session used a handle of order", u)
		}
	}
	for _, u := range uris(t, b) {
		if strings.Contains(u, ha) {
			t.Errorf("b lists a's %s", u)
		}
	}

	// The workflow's diagram, and the instance's.
	text, mime, err := read(a, "stategate://workflow/lamp/diagram")
	if err != nil || mime != gate.MermaidMIME || !strings.Contains(text, "stateDiagram-v2") || !strings.Contains(text, "ON / lamp_on") || strings.Contains(text, "active") {
		t.Errorf("lamp diagram (%s, %v):\n%s", mime, err, text)
	}

	// a subscribes to its lamp; its call's answer tells it.
	mine := instanceURI("lamp", ha)
	if err := subscribe(a, mine); err != nil {
		t.Fatal(err)
	}
	if _, sc, isErr := a.Call("lamp_on", nil); isErr {
		t.Fatal(sc)
	}
	a.AwaitNotification(string(mcp.MethodNotificationResourceUpdated), func(n mcp.JSONRPCNotification) bool {
		return n.Params.AdditionalFields["uri"] == mine
	})
	if v := readJSON(t, a, mine); v["state"] != "on" || v["handle"] != ha || !slices.Contains(toStrings(v["tools"]), "lamp_off") {
		t.Errorf("a's lamp: %v", v)
	}
	if text, _, err := read(a, mine+"/diagram"); err != nil || !strings.Contains(text, "class on active") {
		t.Errorf("a's lamp drawn (%v):\n%s", err, text)
	}
	if v := readJSON(t, b, instanceURI("lamp", hb)); v["state"] != "off" {
		t.Errorf("b's lamp: %v", v)
	}

	// b may not read, nor subscribe to, a's instance: not found, as an
	// instance that does not exist.
	for _, u := range []string{mine, mine + "/trail", mine + "/diagram", instanceURI("lamp", "session-0000000000"), instanceURI("lamp", "default")} {
		notReadable(t, b, u, mcp.ErrResourceNotFound)
	}
	if err := subscribe(b, mine); !errors.Is(err, mcp.ErrResourceNotFound) {
		t.Errorf("b subscribed to a's lamp: %v", err)
	}
	for _, u := range []string{"test://watched-resource", "stategate://workflow/nosuch/diagram", "stategate://workflow/lamp/elsewhere"} {
		if err := subscribe(b, u); !errors.Is(err, mcp.ErrResourceNotFound) {
			t.Errorf("subscribe %s: %v", u, err)
		}
		notReadable(t, b, u, mcp.ErrResourceNotFound)
	}

	// A handle of a workflow with a handle key: read by whoever names it;
	// listed to the session that used it, which is told its list changed.
	a.Call("order_add", map[string]any{"order_id": "ORD 1/x"})
	a.AwaitNotification(string(mcp.MethodNotificationResourcesListChanged), nil)
	order := "stategate://workflow/order/instance/ORD%201%2Fx"
	if !slices.Contains(uris(t, a), order) {
		t.Errorf("%s not listed to a: %v", order, uris(t, a))
	}
	if slices.Contains(uris(t, b), order) {
		t.Errorf("%s listed to b", order)
	}
	if v := readJSON(t, b, order); v["handle"] != "ORD 1/x" || v["context"].(map[string]any)["items"] != float64(1) {
		t.Errorf("b reads the order: %v", v)
	}
	// b subscribes to it; a's call tells b, on b's stream.
	if err := subscribe(b, order+"/trail"); err != nil {
		t.Fatal(err)
	}
	a.Call("order_add", map[string]any{"order_id": "ORD 1/x"})
	b.AwaitNotification(string(mcp.MethodNotificationResourceUpdated), func(n mcp.JSONRPCNotification) bool {
		return n.Params.AdditionalFields["uri"] == order+"/trail"
	})
	tr := readJSON(t, b, order+"/trail")
	if es, _ := tr["entries"].([]any); len(es) != 2 || tr["earlier"] != false {
		t.Errorf("the order's trail: %v", tr)
	}

	// The trail holds the latest TrailEntries entries.
	for i := range gate.TrailEntries + 4 {
		if _, sc, isErr := a.Call([]string{"lamp_off", "lamp_on"}[i%2], nil); isErr {
			t.Fatal(sc)
		}
	}
	tr = readJSON(t, a, mine+"/trail")
	es, _ := tr["entries"].([]any)
	if len(es) != gate.TrailEntries || tr["earlier"] != true {
		t.Fatalf("trail of %d entries, earlier %v", len(es), tr["earlier"])
	}
	if last := es[len(es)-1].(map[string]any); last["tool"] != "lamp_on" {
		t.Errorf("the latest entry last: %v", last)
	}

	// Unsubscribed, a is told no more.
	unsub := mcp.UnsubscribeRequest{}
	unsub.Params.URI = mine
	//lint:ignore SA1019 resources/unsubscribe is the revisions with sessions'.
	if err := a.Unsubscribe(context.Background(), unsub); err != nil {
		t.Fatal(err)
	}
	before := len(a.Notifications(string(mcp.MethodNotificationResourceUpdated)))
	a.Call("lamp_off", nil)
	a.Call("lamp_status", nil) // the next answer would carry one that waited
	if n := len(a.Notifications(string(mcp.MethodNotificationResourceUpdated))); n != before {
		t.Errorf("%d resources/updated after unsubscribing", n-before)
	}

	// A reload that adds a workflow: every session is told the list
	// changed, and the diagram is listed.
	b.Drain()
	n0 := len(b.Notifications(string(mcp.MethodNotificationResourcesListChanged)))
	if err := os.WriteFile(filepath.Join(dir, "fan.json"), []byte(`{"id":"fan","initial":"off","states":{"off":{"on":{"SPIN":"on"}},"on":{}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := lib.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.AwaitNotification(string(mcp.MethodNotificationResourcesListChanged), func(mcp.JSONRPCNotification) bool {
		return len(b.Notifications(string(mcp.MethodNotificationResourcesListChanged))) > n0
	})
	if l := uris(t, b); !slices.Contains(l, "stategate://workflow/fan/diagram") || !slices.Contains(l, instanceURI("fan", hb)) {
		t.Errorf("after the reload: %v", l)
	}
}

func toStrings(v any) []string {
	var out []string
	xs, _ := v.([]any)
	for _, x := range xs {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// TestResourcesWithoutStream: a session with no stream open is told of a
// change its own call made in that call's answer, and of one another
// session made in the answer of its next request.
func TestResourcesWithoutStream(t *testing.T) {
	url, _, _, _ := resourceHTTP(t)
	a := connect(t, url)
	b := mcptest.HTTP(t, url, mcptest.Options{Name: "no-stream"})
	own := instanceURI("lamp", sessionHandle(t, b, "lamp_status"))
	if err := subscribe(b, own); err != nil {
		t.Fatal(err)
	}
	b.Call("lamp_on", nil)
	if n := b.Notifications(string(mcp.MethodNotificationResourceUpdated)); len(n) != 1 || n[0].Params.AdditionalFields["uri"] != own {
		t.Fatalf("the call's answer carried %v", n)
	}
	uri := instanceURI("order", "ORD-9")
	if err := subscribe(b, uri); err != nil {
		t.Fatal(err)
	}
	a.Call("order_add", map[string]any{"order_id": "ORD-9"})
	b.Call("lamp_status", nil) // its next request
	b.AwaitNotification(string(mcp.MethodNotificationResourceUpdated), func(n mcp.JSONRPCNotification) bool {
		return n.Params.AdditionalFields["uri"] == uri
	})
}

// TestResourcesModern: under 2026-07-28 the list is the same for every
// client (the diagrams), and an instance is read by the handle its start
// tool made; a handle it did not make is not found.
func TestResourcesModern(t *testing.T) {
	url, _, _, _ := resourceHTTP(t)
	a, b := modernHTTP(t, url), modernHTTP(t, url)
	la, lb := uris(t, a), uris(t, b)
	if !slices.Equal(la, lb) || !slices.Contains(la, "stategate://workflow/lamp/diagram") {
		t.Errorf("lists differ or lack the diagram:\n%v\n%v", la, lb)
	}
	for _, u := range la {
		if strings.Contains(u, "/instance/") {
			t.Errorf("listed %s under 2026-07-28", u)
		}
	}
	_, sc, _ := a.Call("lamp_start", nil)
	h, _ := sc["handle"].(string)
	a.Call("lamp_on", map[string]any{"workflow_id": h})
	if v := readJSON(t, b, instanceURI("lamp", h)); v["state"] != "on" {
		t.Errorf("the started lamp: %v", v)
	}
	forged := h[:len(h)-1] + "a"
	if strings.HasSuffix(h, "a") {
		forged = h[:len(h)-1] + "b"
	}
	for _, u := range []string{instanceURI("lamp", forged), instanceURI("lamp", "default"), instanceURI("lamp", "wf-x")} {
		notReadable(t, b, u, mcp.ErrInvalidParams)
	}
	if v := readJSON(t, b, instanceURI("order", "ORD-2")); v["state"] != "open" {
		t.Errorf("an order by its key: %v", v)
	}
}

// TestResourcesStdio: over stdio, the session lists and reads the shared
// instance, and is told when a resource it subscribed to changes.
func TestResourcesStdio(t *testing.T) {
	g, _, _ := resourceGate(t, gate.Options{SharedInstance: "default"})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	go func() {
		_ = g.ServeStdio(context.Background(), inR, outW)
		outW.Close()
		close(done)
	}()
	t.Cleanup(func() { inW.Close(); <-done })
	c := mcptest.Start(t, client.NewClient(transport.NewIO(outR, inW, io.NopCloser(strings.NewReader("")))), mcptest.Options{Name: "stdio"})
	uri := instanceURI("lamp", "default")
	if l := uris(t, c); !slices.Contains(l, uri) || !slices.Contains(l, "stategate://workflow/lamp/diagram") {
		t.Errorf("stdio lists %v", l)
	}
	if err := subscribe(c, uri); err != nil {
		t.Fatal(err)
	}
	c.Call("lamp_on", nil)
	c.AwaitNotification(string(mcp.MethodNotificationResourceUpdated), func(n mcp.JSONRPCNotification) bool {
		return n.Params.AdditionalFields["uri"] == uri
	})
	if v := readJSON(t, c, uri); v["state"] != "on" {
		t.Errorf("the lamp: %v", v)
	}
	notReadable(t, c, instanceURI("lamp", "session-0123"), mcp.ErrResourceNotFound)
}

// TestResourcesSubscriptionBound: a session subscribes to
// maxSubscriptions (64) resources at most; the same one again is no new
// one.
func TestResourcesSubscriptionBound(t *testing.T) {
	url, _, _, _ := resourceHTTP(t)
	c := mcptest.HTTP(t, url, mcptest.Options{Name: "many"})
	for i := range 64 {
		if err := subscribe(c, instanceURI("order", fmt.Sprintf("ORD-%d", i))); err != nil {
			t.Fatalf("subscription %d: %v", i, err)
		}
	}
	if err := subscribe(c, instanceURI("order", "ORD-0")); err != nil {
		t.Errorf("the same subscription again: %v", err)
	}
	if err := subscribe(c, instanceURI("order", "ORD-64")); !errors.Is(err, mcp.ErrInvalidParams) || !strings.Contains(err.Error(), "64") {
		t.Errorf("a 65th subscription: %v", err)
	}
}

// TestResourcesFollowRoles: an instance resource lists the tools the
// reader's principal may call, as its tool list does.
func TestResourcesFollowRoles(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join("..", "machines", "expense.ts"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "expense.ts"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	g := gate.New(gate.Options{Store: store.NewMemory(), Logger: quietLog(), Mermaid: fakeMermaid})
	if err := workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Loader: &xstate.Loader{Modules: &js.Host{}}, Logger: quietLog(), Serve: g.Reloaded}).Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := g.HTTPHandler(gate.HTTPOptions{})
	srv := httptest.NewServer(principals(h))
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)
	as := func(sub, roles string) *mcptest.Client {
		return mcptest.HTTP(t, srv.URL+"/mcp", mcptest.Options{Header: map[string]string{"X-Sub": sub, "X-Roles": roles}, Name: sub})
	}
	agent, approver := as("agent", ""), as("ann", "approver")
	if _, sc, isErr := agent.Call("expense_submit", map[string]any{"expense_id": "e1", "amount": 120, "payee": "ACME"}); isErr {
		t.Fatal(sc)
	}
	uri := instanceURI("expense", "e1")
	for c, want := range map[*mcptest.Client]bool{agent: false, approver: true} {
		v := readJSON(t, c, uri)
		if got := slices.Contains(toStrings(v["tools"]), "expense_approve"); got != want || v["state"] != "review" {
			t.Errorf("%s reads expense_approve %v (want %v): %v", c.GetSessionId(), got, want, v)
		}
	}
	tr := readJSON(t, approver, uri+"/trail")
	es, _ := tr["entries"].([]any)
	if len(es) != 1 || !strings.Contains(fmt.Sprint(es[0]), "agent") {
		t.Errorf("the trail names who submitted: %v", tr)
	}
}

// TestResourcesModernListen: under 2026-07-28, a listen stream that asks
// for resource subscriptions is acknowledged without them (they would
// never be told anything), with resourcesListChanged, which a reload
// then sends.
func TestResourcesModernListen(t *testing.T) {
	url, _, lib, dir := resourceHTTP(t)
	c := modernHTTP(t, url)
	stop, err := c.ListenAsync(context.Background(), mcp.SubscriptionFilter{ResourcesListChanged: true, ResourceSubscriptions: []string{"stategate://workflow/lamp/diagram"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ack := c.AwaitNotification(mcp.MethodNotificationSubscriptionsAcknowledged, nil)
	got, _ := json.Marshal(ack.Params.AdditionalFields["notifications"])
	if string(got) != `{"resourcesListChanged":true}` {
		t.Errorf("acknowledged %s", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "fan.json"), []byte(`{"id":"fan","initial":"off","states":{"off":{}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := lib.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.AwaitNotification(string(mcp.MethodNotificationResourcesListChanged), nil)
}

// TestResourcesReloadUpdates: a reload that changes a workflow's file
// tells the sessions subscribed to its diagram.
func TestResourcesReloadUpdates(t *testing.T) {
	url, _, lib, dir := resourceHTTP(t)
	c := connect(t, url)
	uri := "stategate://workflow/lamp/diagram"
	if err := subscribe(c, uri); err != nil {
		t.Fatal(err)
	}
	lamp := strings.Replace(testMachines["lamp.json"], `"BREAK": "broken"`, `"BREAK": "broken", "DIM": "on"`, 1)
	if err := os.WriteFile(filepath.Join(dir, "lamp.json"), []byte(lamp), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := lib.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.AwaitNotification(string(mcp.MethodNotificationResourceUpdated), func(n mcp.JSONRPCNotification) bool {
		return n.Params.AdditionalFields["uri"] == uri
	})
	if text, _, err := read(c, uri); err != nil || !strings.Contains(text, "DIM / lamp_dim") {
		t.Errorf("the reloaded diagram (%v):\n%s", err, text)
	}
}
