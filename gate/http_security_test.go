package gate_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
)

func hostOf(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// TestHostIsChecked: a request whose Host is not a name of the server
// (what a DNS-rebinding page sends, with or without an Origin) is refused.
func TestHostIsChecked(t *testing.T) {
	mcpURL, _ := serveHTTP(t, nil, gate.HTTPOptions{Hosts: []string{"Workflows.Example"}})
	_, port, _ := net.SplitHostPort(hostOf(t, mcpURL))
	init := strings.Replace(initBody, "%s", "2025-06-18", 1)
	for _, c := range []struct {
		host, origin string
		want         int
	}{
		{"evil.example:" + port, "http://evil.example:" + port, http.StatusForbidden},
		{"evil.example:" + port, "", http.StatusForbidden},
		{"127.0.0.1.evil.example:" + port, "", http.StatusForbidden},
		{"localhost:" + port, "", http.StatusOK},
		{"[::1]:" + port, "", http.StatusOK},
		{"workflows.example:" + port, "http://workflows.example:" + port, http.StatusOK},
		{"localhost:" + port, "http://evil.example", http.StatusForbidden},
	} {
		req, _ := http.NewRequest(http.MethodPost, mcpURL, strings.NewReader(init))
		req.Host = c.host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Errorf("Host %s, Origin %q: %s, want %d", c.host, c.origin, res.Status, c.want)
		}
		if res.StatusCode == http.StatusForbidden && res.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("Host %s: a refused request got a session", c.host)
		}
	}
}

func TestBearerToken(t *testing.T) {
	mcpURL, _ := serveHTTP(t, nil, gate.HTTPOptions{Token: "s3cret-token"})
	init := strings.Replace(initBody, "%s", "2025-06-18", 1)
	for auth, want := range map[string]int{
		"":                    http.StatusUnauthorized,
		"Bearer wrong":        http.StatusUnauthorized,
		"s3cret-token":        http.StatusUnauthorized,
		"Bearer s3cret-token": http.StatusOK,
	} {
		hdr := map[string]string{}
		if auth != "" {
			hdr["Authorization"] = auth
		}
		if res := rawPost(t, mcpURL, "", init, hdr); res.StatusCode != want {
			t.Errorf("Authorization %q: %s, want %d", auth, res.Status, want)
		}
	}
}

// rawCall calls a tool in a session and returns the whole answer's body.
func rawCall(t *testing.T, mcpURL, session, tool string, args map[string]any) string {
	t.Helper()
	a, _ := json.Marshal(args)
	res := rawPost(t, mcpURL, session, fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, tool, a), nil)
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s %s", tool, res.Status, body)
	}
	return string(body)
}

// TestSessionIDsAreNeverShown: a session's id is its client's credential;
// results, the audit trail and the store show an opaque name instead.
func TestSessionIDsAreNeverShown(t *testing.T) {
	st := store.NewMemory()
	mcpURL, _ := serveOn(t, st, testMachines, gate.HTTPOptions{})
	a, _ := rawSession(t, mcpURL, "2025-06-18")
	b, _ := rawSession(t, mcpURL, "2025-06-18")
	var seen strings.Builder
	seen.WriteString(rawCall(t, mcpURL, a, "lamp_on", nil))     // a's own instance
	seen.WriteString(rawCall(t, mcpURL, a, "lamp_status", nil)) // its audit trail
	seen.WriteString(rawCall(t, mcpURL, a, "order_add", map[string]any{"order_id": "o-1"}))
	seen.WriteString(rawCall(t, mcpURL, b, "order_status", map[string]any{"order_id": "o-1"})) // a's entry, seen by b
	if !strings.Contains(seen.String(), `session-`) {
		t.Fatalf("the answers name no session at all: %s", seen.String())
	}
	keys, _ := st.List(context.Background())
	for _, k := range keys {
		seen.WriteString(k.Handle)
		trail, _ := st.Audit(context.Background(), k, 0)
		data, _ := json.Marshal(trail)
		seen.Write(data)
	}
	for _, id := range []string{a, b} {
		if strings.Contains(seen.String(), id) {
			t.Errorf("session id %s is shown or stored: %s", id, seen.String())
		}
	}
}

// TestSessionsAreBounded: at the bound, with every session used
// recently, a new session is refused (503, with a Retry-After) and none
// is ended for it; a session with a stream is not ended either.
func TestSessionsAreBounded(t *testing.T) {
	mcpURL, _ := serveHTTP(t, nil, gate.HTTPOptions{MaxSessions: 2})
	s1, _ := rawSession(t, mcpURL, "2025-06-18")
	s2, _ := rawSession(t, mcpURL, "2025-06-18")
	rawCall(t, mcpURL, s1, "invoice_status", nil) // s2 is now the idlest, but recent
	res := rawPost(t, mcpURL, "", strings.Replace(initBody, "%s", "2025-06-18", 1), nil)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Errorf("a session over the bound when all were used recently: %s (Retry-After %q), want 503 with a Retry-After", res.Status, res.Header.Get("Retry-After"))
	}
	for _, s := range []string{s1, s2} {
		if res := rawPost(t, mcpURL, s, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil); res.StatusCode != http.StatusOK {
			t.Errorf("a recent session: %s, want 200", res.Status)
		}
	}
	openStream(t, mcpURL, s1)
	res = rawPost(t, mcpURL, "", strings.Replace(initBody, "%s", "2025-06-18", 1), nil)
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a session over the bound: %s, want 503", res.Status)
	}
}

// TestInitializeFloodEndsNoSession: a flood of initialize requests from
// one address (here loopback, which every local client shares) at the
// bound ends no session that was used recently: the flood is refused.
func TestInitializeFloodEndsNoSession(t *testing.T) {
	mcpURL, _ := serveHTTP(t, nil, gate.HTTPOptions{MaxSessions: 4})
	var live []string
	for range 4 {
		s, _ := rawSession(t, mcpURL, "2025-06-18")
		live = append(live, s)
	}
	victim := live[0] // the idlest: no request since it began
	refused := 0
	for range 70 {
		res := rawPost(t, mcpURL, "", strings.Replace(initBody, "%s", "2025-06-18", 1), nil)
		res.Body.Close()
		if res.StatusCode == http.StatusServiceUnavailable && res.Header.Get("Retry-After") != "" {
			refused++
		}
	}
	if refused != 70 {
		t.Errorf("%d of 70 initialize requests at the bound refused with a Retry-After, want all", refused)
	}
	for _, s := range live {
		if res := rawPost(t, mcpURL, s, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil); res.StatusCode != http.StatusOK {
			t.Errorf("session %s (victim %v): %s, want 200", s[:8], s == victim, res.Status)
		}
	}
}

// TestSessionBoundHoldsUnderConcurrency: initialize requests that arrive
// together take no more sessions than are left.
func TestSessionBoundHoldsUnderConcurrency(t *testing.T) {
	mcpURL, _ := serveHTTP(t, nil, gate.HTTPOptions{MaxSessions: 4})
	for range 3 {
		rawSession(t, mcpURL, "2025-06-18")
	}
	const n = 20
	codes := make(chan int, n)
	start := make(chan struct{})
	for range n {
		go func() {
			<-start
			req, _ := http.NewRequest(http.MethodPost, mcpURL, strings.NewReader(strings.Replace(initBody, "%s", "2025-06-18", 1)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				codes <- 0
				return
			}
			res.Body.Close()
			codes <- res.StatusCode
		}()
	}
	close(start)
	ok := 0
	for range n {
		if <-codes == http.StatusOK {
			ok++
		}
	}
	if ok != 1 {
		t.Errorf("%d of %d concurrent initialize requests got a session with one left, want 1", ok, n)
	}
}

// TestDeleteEndsTheStream: a session ended by DELETE ends its GET stream.
func TestDeleteEndsTheStream(t *testing.T) {
	mcpURL, _ := serveHTTP(t, nil, gate.HTTPOptions{})
	s, _ := rawSession(t, mcpURL, "2025-06-18")
	sc := openStream(t, mcpURL, s)
	ended := make(chan struct{})
	go func() {
		for sc.Scan() {
		}
		close(ended)
	}()
	req, _ := http.NewRequest(http.MethodDelete, mcpURL, nil)
	req.Header.Set("Mcp-Session-Id", s)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %s", res.Status)
	}
	select {
	case <-ended:
	case <-time.After(time.Minute):
		t.Error("the stream of a deleted session is still open after a minute")
	}
}

// openStream opens a session's GET stream and returns its reader.
func openStream(t *testing.T, mcpURL, session string) *bufio.Scanner {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, mcpURL, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET: %s", res.Status)
	}
	return bufio.NewScanner(res.Body)
}

// TestIdleSessionsEnd: a session with neither requests nor a stream ends
// after SessionIdle; one with a stream lives on.
func TestIdleSessionsEnd(t *testing.T) {
	mcpURL, _ := serveHTTP(t, nil, gate.HTTPOptions{SessionIdle: 1500 * time.Millisecond})
	idle, _ := rawSession(t, mcpURL, "2025-06-18")
	streaming, _ := rawSession(t, mcpURL, "2025-06-18")
	openStream(t, mcpURL, streaming)
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	// The sweeper has no signal to await: a few periods of it pass. No
	// request is made meanwhile (a request keeps a session alive).
	time.Sleep(3 * 1500 * time.Millisecond)
	if res := rawPost(t, mcpURL, streaming, ping, nil); res.StatusCode != http.StatusOK {
		t.Errorf("the session with a stream: %s, want 200", res.Status)
	}
	if res := rawPost(t, mcpURL, idle, ping, nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("a session idle for longer than SessionIdle: %s, want 404", res.Status)
	}
}

// TestTrickledBodyTimesOut: a body sent a byte at a time does not keep a
// connection open past BodyTimeout.
func TestTrickledBodyTimesOut(t *testing.T) {
	mcpURL, _ := serveHTTP(t, nil, gate.HTTPOptions{BodyTimeout: 300 * time.Millisecond})
	conn, err := net.Dial("tcp", hostOf(t, mcpURL))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", hostOf(t, mcpURL))
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a trickled body: %v", err)
	}
	if res.StatusCode != http.StatusRequestTimeout {
		t.Errorf("trickled body: %s, want 408", res.Status)
	}
}

// TestUnknownToolIsAnswered: a call to a tool nobody serves is the
// JSON-RPC error MCP says (-32602, "Unknown tool"), naming it, with the
// tools available now as its data: to a session, what it sees; to a
// client of 2026-07-28, every tool it is served; over stdio the same.
func TestUnknownToolIsAnswered(t *testing.T) {
	mcpURL, _ := setup(t)
	c := connect(t, mcpURL)
	if err := c.CallErr("invoice_aprove", nil); !errors.Is(err, mcp.ErrInvalidParams) || !strings.Contains(err.Error(), "invoice_aprove") {
		t.Fatalf("unknown tool through mcp-go's client: %v", err)
	}
	session, _ := rawSession(t, mcpURL, "2025-11-25")
	var msg struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				Tool    string   `json:"tool"`
				Allowed []string `json:"allowed"`
			} `json:"data"`
		} `json:"error"`
	}
	body := rawCall(t, mcpURL, session, "invoice_aprove", nil)
	if err := json.Unmarshal([]byte(lastJSON(body)), &msg); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	e := msg.Error
	if e.Code != -32602 || !strings.HasPrefix(e.Message, "Unknown tool: invoice_aprove") || e.Data.Tool != "invoice_aprove" ||
		!slices.Contains(e.Data.Allowed, "invoice_submit") || slices.Contains(e.Data.Allowed, "invoice_approve") || slices.Contains(e.Data.Allowed, "invoice_start") {
		t.Fatalf("unknown tool, to a session: %+v", e)
	}
	// A client of 2026-07-28: what it is served, start tools and all.
	modern := rawPost(t, mcpURL, "", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"invoice_aprove","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "invoice_aprove"})
	mbody, _ := io.ReadAll(modern.Body)
	if err := json.Unmarshal([]byte(lastJSON(string(mbody))), &msg); err != nil {
		t.Fatalf("%v: %s", err, mbody)
	}
	if e := msg.Error; e.Code != -32602 || !slices.Contains(e.Data.Allowed, "invoice_start") || !slices.Contains(e.Data.Allowed, "invoice_approve") {
		t.Fatalf("unknown tool, to a client of 2026-07-28: %+v", e)
	}
	if _, listed := c.Tools()["stategate.unknown-tool"]; listed {
		t.Error("a hidden tool is listed")
	}
}

// lastJSON is the last JSON message of an answer (a body, or the data of
// an event stream's last event).
func lastJSON(body string) string {
	body = strings.TrimSpace(body)
	if i := strings.LastIndex(body, "data: "); i >= 0 {
		return strings.TrimSpace(body[i+len("data: "):])
	}
	return body
}

// TestListChangedIsCoalesced: a session that makes no request and has no
// stream gets one list_changed for many changes of the instance it sees.
func TestListChangedIsCoalesced(t *testing.T) {
	mcpURL, _ := setup(t)
	mover, _ := rawSession(t, mcpURL, "2025-06-18")
	watcher, _ := rawSession(t, mcpURL, "2025-06-18")
	rawCall(t, mcpURL, watcher, "order_status", map[string]any{"order_id": "o-9"})
	for i := range 9 {
		tool := "order_close"
		if i%2 == 1 {
			tool = "order_reopen"
		}
		rawCall(t, mcpURL, mover, tool, map[string]any{"order_id": "o-9"})
	}
	res := rawPost(t, mcpURL, watcher, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil)
	n := 0
	for _, m := range responseMessages(t, res) {
		if m["method"] == "notifications/tools/list_changed" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the watcher got %d list_changed for 9 changes, want 1", n)
	}
}

// TestHandlesAreChecked: handles are bounded, printable text, refused
// with INVALID_ARGUMENTS naming the argument before anything is stored.
func TestHandlesAreChecked(t *testing.T) {
	st := store.NewMemory()
	mcpURL, _ := serveOn(t, st, testMachines, gate.HTTPOptions{})
	s, _ := rawSession(t, mcpURL, "2025-06-18")
	for _, c := range []struct {
		handle string
		ok     bool
	}{
		{strings.Repeat("x", 70000), false},
		{strings.Repeat("x", workflow.MaxHandle+1), false},
		{"a\x00evil", false},
		{"line\nbreak", false},
		{"", false},
		{strings.Repeat("é", workflow.MaxHandle/2), true},
		{"order 7/ß-✓", true},
	} {
		body := rawCall(t, mcpURL, s, "order_add", map[string]any{"order_id": c.handle})
		refused := strings.Contains(body, "INVALID_ARGUMENTS") && strings.Contains(body, `\"order_id\"`)
		if refused == c.ok {
			t.Errorf("handle %.20q: refused %v, want %v: %.300s", c.handle, refused, !c.ok, body)
		}
	}
	keys, _ := st.List(context.Background())
	if len(keys) != 2 {
		t.Errorf("stored %d instances, want the 2 valid ones: %v", len(keys), keys)
	}
}

// TestStatusReadsAsARead: the status tool says where the instance is, not
// that it moved.
func TestStatusReadsAsARead(t *testing.T) {
	mcpURL, _ := setup(t)
	c := connect(t, mcpURL)
	text, _, _ := c.Call("invoice_status", nil)
	if !strings.Contains(text, " is in state draft") || strings.Contains(text, "is now") {
		t.Errorf("status says %q", text)
	}
	text, _, _ = c.Call("invoice_submit", nil)
	if !strings.Contains(text, " is now in state review") {
		t.Errorf("submit says %q", text)
	}
}

// TestArgumentsAreBounded: arguments over MaxArguments are refused at the
// call, naming the limit; the instance does not move.
func TestArgumentsAreBounded(t *testing.T) {
	mcpURL, _ := setup(t)
	s, _ := rawSession(t, mcpURL, "2025-06-18")
	body := rawCall(t, mcpURL, s, "lamp_on", map[string]any{"pad": strings.Repeat("x", gate.MaxArguments)})
	if !strings.Contains(body, "INVALID_ARGUMENTS") || !strings.Contains(body, "the limit is") {
		t.Fatalf("oversized arguments: %.300s", body)
	}
	if body := rawCall(t, mcpURL, s, "lamp_status", nil); !strings.Contains(body, `"state":"off"`) {
		t.Errorf("the instance moved: %.300s", body)
	}
}

// TestModernRequirementsSaidAtOnce: a request of revision 2026-07-28 that
// lacks what the revision asks of it is told all of it in one JSON-RPC
// error, not one requirement at a time (nor "Mcp-Session-Id header is
// required").
func TestModernRequirementsSaidAtOnce(t *testing.T) {
	mcpURL, _ := setup(t)
	res := rawPost(t, mcpURL, "", `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}`, map[string]string{"MCP-Protocol-Version": "2026-07-28"})
	body, _ := io.ReadAll(res.Body)
	var msg struct {
		ID    int `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &msg); err != nil || res.StatusCode != http.StatusBadRequest {
		t.Fatalf("%s: %s (%v)", res.Status, body, err)
	}
	for _, want := range []string{"Mcp-Method header (tools/list)", "io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities"} {
		if !strings.Contains(msg.Error.Message, want) {
			t.Errorf("the error does not say %q is missing: %s", want, msg.Error.Message)
		}
	}
	if msg.Error.Code != -32602 || msg.ID != 3 || strings.Contains(msg.Error.Message, "Mcp-Session-Id") {
		t.Errorf("error: %+v", msg)
	}
}

// TestBadCursorIsSaidPlainly: a tools/list cursor this server did not
// give is refused with a message that says so, not base64's.
func TestBadCursorIsSaidPlainly(t *testing.T) {
	mcpURL, _ := setup(t)
	session, _ := rawSession(t, mcpURL, "2025-11-25")
	res := rawPost(t, mcpURL, session, `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"cursor":"not-a-cursor!"}}`, nil)
	body, _ := io.ReadAll(res.Body)
	if !strings.Contains(string(body), "the cursor is not one this server gave") || strings.Contains(string(body), "base64 data") {
		t.Errorf("a bad cursor: %s", body)
	}
}
