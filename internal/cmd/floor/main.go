// Command floor serves the floors that `stategate serve` is measured
// against (scripts/compare-floors.sh): the invoice's tools with nothing
// behind them, each answering a short text at once, over Streamable HTTP
// at ADDR/mcp, in one of two ways:
//
//	floor -mode mcpgo ADDR   mcp-go's MCPServer and StreamableHTTPServer,
//	                         no gate, nothing stored: what mcp-go costs
//	floor -mode http ADDR    plain net/http answering the JSON-RPC
//	                         messages of a session itself: what HTTP and
//	                         JSON cost
//
// Neither checks anything; they are floors, not servers.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"

	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// tools are the invoice's, as stategate lists them in the cycle the
// load generator calls.
var tools = []string{"invoice_submit", "invoice_request_changes", "invoice_add_line", "invoice_status", "invoice_reset"}

func main() {
	mode := flag.String("mode", "mcpgo", "mcpgo or http")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: floor [-mode mcpgo|http] ADDR")
		os.Exit(2)
	}
	var h http.Handler
	switch *mode {
	case "mcpgo":
		h = mcpgoFloor()
	case "http":
		h = &httpFloor{}
	default:
		fmt.Fprintln(os.Stderr, "floor: -mode is mcpgo or http")
		os.Exit(2)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	if err := http.ListenAndServe(flag.Arg(0), mux); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// mcpgoFloor is mcp-go serving the tools, each answering a text.
func mcpgoFloor() http.Handler {
	srv := server.NewMCPServer("floor", "1", server.WithToolCapabilities(true))
	for _, name := range tools {
		srv.AddTool(mcp.NewTool(name, mcp.WithDescription("A floor: answers at once.")),
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("invoice is now in state review."), nil
			})
	}
	return server.NewStreamableHTTPServer(srv)
}

// httpFloor answers a session's messages with net/http and encoding/json
// alone: initialize (with a session id), notifications (202), tools/list
// and tools/call (a text), DELETE.
type httpFloor struct{ ids atomic.Uint64 }

func (f *httpFloor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodDelete {
		w.WriteHeader(http.StatusOK)
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if msg.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var result any
	switch msg.Method {
	case "initialize":
		w.Header().Set("Mcp-Session-Id", fmt.Sprintf("s%d", f.ids.Add(1)))
		result = map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{"listChanged": true}},
			"serverInfo": map[string]any{"name": "floor", "version": "1"}}
	case "tools/list":
		list := make([]any, len(tools))
		for i, name := range tools {
			list[i] = map[string]any{"name": name, "description": "A floor: answers at once.", "inputSchema": map[string]any{"type": "object"}}
		}
		result = map[string]any{"tools": list}
	case "tools/call":
		result = map[string]any{"content": []any{map[string]any{"type": "text", "text": "invoice is now in state review."}}}
	default:
		result = map[string]any{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": result})
}
