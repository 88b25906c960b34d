package gate_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stategate/stategate/gate"
)

// benchSession starts an MCP session on the gate's HTTP handler, in
// process, and returns a function that posts a message in it.
func benchSession(b *testing.B) func(body string) *httptest.ResponseRecorder {
	_, g := setup(b)
	h := g.HTTPHandler(gate.HTTPOptions{})
	b.Cleanup(h.Close)
	post := func(session, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK && w.Code != http.StatusAccepted {
			b.Fatalf("%s: %d %s", body, w.Code, w.Body)
		}
		return w
	}
	sid := post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`).Header().Get("Mcp-Session-Id")
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return func(body string) *httptest.ResponseRecorder { return post(sid, body) }
}

// BenchmarkCall times the server's per-call path: a tools/call that moves
// the invoice machine (submit, then request changes) through the HTTP
// handler, as mcpload sends it, with the store, listing and the
// list_changed notification of a real call; no socket.
func BenchmarkCall(b *testing.B) {
	post := benchSession(b)
	tools := []string{"invoice_submit", "invoice_request_changes"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		w := post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"reason":"fix it"}}}`, i+1, tools[i%2]))
		if bytes.Contains(w.Body.Bytes(), []byte(`"isError":true`)) {
			b.Fatal(w.Body)
		}
		i++
	}
}

// BenchmarkList times a tools/list through the HTTP handler.
func BenchmarkList(b *testing.B) {
	post := benchSession(b)
	b.ReportAllocs()
	for b.Loop() {
		post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	}
}
