package gate

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"stategate/xstate"
)

func TestIdleSessionsEnd(t *testing.T) {
	g := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	tr := newHTTPTransport(g.srv, g.log, nil)
	defer tr.Close()
	ctx := context.Background()
	idle, err := tr.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	busy, _ := tr.open(ctx)
	streaming, _ := tr.open(ctx)
	streaming.streaming.Store(true)
	now := time.Now()
	old := now.Add(-2 * tr.idle).UnixNano()
	idle.lastSeen.Store(old)
	streaming.lastSeen.Store(old)
	tr.sweep(now)
	tr.mu.Lock()
	_, idleLives := tr.sessions[idle.id]
	_, busyLives := tr.sessions[busy.id]
	_, streamLives := tr.sessions[streaming.id]
	tr.mu.Unlock()
	if idleLives || !busyLives || !streamLives {
		t.Fatalf("after a sweep: idle lives %v (want false), busy %v, streaming %v (want true)", idleLives, busyLives, streamLives)
	}
	select {
	case <-idle.done:
	default:
		t.Fatal("the idle session's streams were not told to end")
	}
	g.sessMu.Lock()
	_, known := g.sessions[idle.id]
	g.sessMu.Unlock()
	if known {
		t.Fatal("the gate still knows the ended session")
	}
}

// TestAppendResultMatchesEncodingJSON checks the fast encoding of a call's
// answer against encoding/json's, and that other messages are left to it.
func TestAppendResultMatchesEncodingJSON(t *testing.T) {
	ok := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("moved <on> \"now\" ✓")}, RawStructuredContent: json.RawMessage(`{"state":"draft","tools":["a","b"]}`)}
	bad := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("FORBIDDEN: no")}, IsError: true, RawStructuredContent: json.RawMessage(`{"error":"FORBIDDEN"}`)}
	bare := mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("a"), mcp.NewTextContent("b")}}
	for _, msg := range []mcp.JSONRPCMessage{
		mcp.NewJSONRPCResultResponse(mcp.NewRequestId(int64(7)), ok),
		mcp.NewJSONRPCResultResponse(mcp.NewRequestId("req-1"), bad),
		mcp.NewJSONRPCResultResponse(mcp.NewRequestId(float64(3)), bare),
	} {
		fast, handled := appendResult(nil, msg)
		if !handled {
			t.Fatalf("%+v: not handled", msg)
		}
		sameAsEncodingJSON(t, fast, msg)
	}
	img := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewImageContent("AAAA", "image/png")}}
	for _, msg := range []mcp.JSONRPCMessage{
		mcp.NewJSONRPCResultResponse(mcp.NewRequestId(int64(1)), img),
		mcp.NewJSONRPCResultResponse(mcp.NewRequestId(int64(1)), mcp.ListToolsResult{}),
		mcp.JSONRPCNotification{JSONRPC: "2.0", Notification: mcp.Notification{Method: "notifications/tools/list_changed"}},
	} {
		if out, handled := appendResult(nil, msg); handled || len(out) > 0 {
			t.Errorf("%+v: handled by the fast path", msg)
		}
	}
}

// TestAppendToolListMatchesEncodingJSON checks the tool list written from
// the tools' stored encodings against encoding/json's.
func TestAppendToolListMatchesEncodingJSON(t *testing.T) {
	g := bundledGate(t)
	tools := g.listFor(context.Background(), nil) // compact descriptions: initial states
	if len(tools) == 0 {
		t.Fatal("no tools")
	}
	ref, _ := g.lookup(tools[0].Name)
	tools = append(tools, ref.full)
	msg := mcp.NewJSONRPCResultResponse(mcp.NewRequestId(int64(5)), mcp.ListToolsResult{Tools: tools})
	fast, ok := g.appendMessage(nil, msg)
	if !ok {
		t.Fatal("not handled")
	}
	sameAsEncodingJSON(t, fast, msg)
	// A tool the gate did not make is left to encoding/json.
	other := mcp.NewJSONRPCResultResponse(mcp.NewRequestId(int64(5)), mcp.ListToolsResult{Tools: []mcp.Tool{mcp.NewTool("x")}})
	if _, ok := g.appendMessage(nil, other); ok {
		t.Error("a foreign tool was handled by the fast path")
	}
}

// sameAsEncodingJSON checks that fast is the JSON encoding/json makes of
// msg (the same values; key order and escapes may differ).
func sameAsEncodingJSON(t *testing.T, fast []byte, msg any) {
	t.Helper()
	slow, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal(fast, &a); err != nil {
		t.Fatalf("fast encoding %s: %v", fast, err)
	}
	_ = json.Unmarshal(slow, &b)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("fast %s\n want %s", fast, slow)
	}
}

// TestFastPathAnswersAsMCPGo sends the same messages to two gates, one
// through the fast path (answer, falling back to mcp-go) and one through
// mcp-go's HandleMessage alone, and checks that every answer is the same:
// calls that move, calls refused, malformed arguments, handles, and the
// requests the fast path leaves to mcp-go.
func TestFastPathAnswersAsMCPGo(t *testing.T) {
	auditTime := regexp.MustCompile(`"time":"[^"]*",`)
	msgs := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"invoice_approve","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"invoice_submit"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":null}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"invoice_request_changes","arguments":{"reason":"fix it"}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"invoice_submit","arguments":[1,2]}}`,
		`{"jsonrpc":"2.0","id":7.5,"method":"tools/call","params":{"name":"invoice_status","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"payment_authorize","arguments":{"amount":"x"}}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"invoice_submit","arguments":{},"_meta":{"progressToken":"p"}}}`,
		`{"jsonrpc":"2.0","id":11,"method":"tools/list","params":{"cursor":"zz"}}`,
		`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"invoice_submit","arguments":"text"}}`,
		`{"jsonrpc":"2.0","id":13,"method":"tools/call","params":"nonsense"}`,
		`{"jsonrpc":"2.0","id":13.1,"method":"tools/call","params":{"name":5,"arguments":{}}}`,
		`{"jsonrpc":"2.0","id":13.2,"method":"tools/list","params":[1]}`,
		`{"jsonrpc":"1.0","id":14,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":15,"method":"ping"}`,
		// ids the fast path reads itself, and ones it leaves to encoding/json
		`{"jsonrpc":"2.0","id":-3,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":1e3,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"q\"uote\u00e9","method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"päivä","method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":12345678901234567890,"method":"tools/list"}`,
	}
	type side struct {
		g   *Gate
		ctx context.Context
	}
	newSide := func() side {
		g := bundledGate(t)
		s := &httpSession{id: "s1", notes: make(chan mcp.JSONRPCNotification, 64), done: make(chan struct{})}
		if err := g.srv.RegisterSession(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		return side{g, g.srv.WithContext(context.Background(), s)}
	}
	fast, slow := newSide(), newSide()
	answered := 0
	for _, m := range msgs {
		var req rpcRequest
		if err := parseRequest([]byte(m), &req); err != nil {
			t.Fatal(err)
		}
		got, ok := fast.g.answer(fast.ctx, &req)
		if ok {
			answered++
		} else {
			got = fast.g.srv.HandleMessage(fast.ctx, []byte(m))
		}
		want := slow.g.srv.HandleMessage(slow.ctx, []byte(m))
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		// The audit's times differ, nothing else may.
		gj, wj = auditTime.ReplaceAll(gj, nil), auditTime.ReplaceAll(wj, nil)
		if string(gj) != string(wj) {
			t.Errorf("%s\n fast path: %s\n    mcp-go: %s", m, gj, wj)
		}
	}
	if answered < 8 {
		t.Errorf("the fast path answered %d of %d messages; want at least 8", answered, len(msgs))
	}
}

// TestAppendNotificationMatchesEncodingJSON checks the fast encoding of
// list_changed, and that a notification with parameters is left alone.
func TestAppendNotificationMatchesEncodingJSON(t *testing.T) {
	n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: "notifications/tools/list_changed"}}
	fast, ok := appendNotification(nil, n)
	slow, _ := json.Marshal(n)
	if !ok || string(fast) != string(slow)+"\n" {
		t.Errorf("fast %q (handled %v), want %q", fast, ok, slow)
	}
	n.Params.AdditionalFields = map[string]any{"level": "info"}
	if out, ok := appendNotification(nil, n); ok || len(out) > 0 {
		t.Errorf("a notification with parameters was handled: %s", out)
	}
}

// bundledGate returns a gate serving the bundled machines, with a memory
// store.
func bundledGate(t *testing.T) *Gate {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	g := New(Options{Logger: log})
	lib := NewLibrary(g, &xstate.Loader{}, "../machines", "")
	if err := lib.Reload(); err != nil {
		t.Fatal(err)
	}
	if errs := lib.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	return g
}

// TestParseRequest checks that parameters of another shape only mark the
// request (mcp-go answers it), while a broken envelope is an error.
func TestParseRequest(t *testing.T) {
	for _, tc := range []struct {
		msg       string
		err, odd  bool
		method    string
		name, arg string
	}{
		{msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a_b","arguments":{"x":"y"}}}`, method: "tools/call", name: "a_b", arg: "y"},
		{msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}`, odd: true, method: "tools/call"},
		{msg: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":"x"}`, odd: true, method: "tools/list"},
		{msg: `{"jsonrpc":"2.0","id":1,"method":5}`, err: true},
		{msg: `{"jsonrpc":"2.0","id":1,"params":"x","method":5}`, err: true},
		{msg: `{"jsonrpc":"2.0","id":1,"method":"tools/list"`, err: true},
	} {
		var req rpcRequest
		err := parseRequest([]byte(tc.msg), &req)
		if (err != nil) != tc.err || (err == nil && (req.oddParams != tc.odd || req.Method != tc.method || req.Params.Name != tc.name)) {
			t.Errorf("%s: err %v, odd %v, method %q, name %q", tc.msg, err, req.oddParams, req.Method, req.Params.Name)
		}
		if tc.arg != "" {
			if args, _ := req.Params.Arguments.(map[string]any); args["x"] != tc.arg {
				t.Errorf("%s: arguments %v", tc.msg, req.Params.Arguments)
			}
		}
	}
}
