package gate

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"reflect"
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
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	g := New(Options{Logger: log})
	ms, errs := LoadDir(&xstate.Loader{}, "../machines", "", log)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := g.SetMachines(ms); err != nil {
		t.Fatal(err)
	}
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
