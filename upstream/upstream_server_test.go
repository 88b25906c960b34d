package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// The test binary is its own stdio upstream: run with
// STATEGATE_TEST_UPSTREAM=1, it serves testServer on stdin and stdout.
func TestMain(m *testing.M) {
	if os.Getenv("STATEGATE_TEST_UPSTREAM") == "1" {
		fmt.Fprintf(os.Stderr, "test upstream starting pid=%d\n", os.Getpid())
		if err := mcpserver.ServeStdio(testServer(true)); err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testServer is the upstream of the tests: echo, fail, rpcerr, slow, log,
// add_tool, pid, and crash over stdio.
func testServer(stdio bool) *mcpserver.MCPServer {
	s := mcpserver.NewMCPServer("test-upstream", "1.0.0", mcpserver.WithToolCapabilities(true), mcpserver.WithLogging())
	s.AddTool(mcp.NewTool("echo", mcp.WithDescription("returns its arguments")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			args := req.GetArguments()
			b, _ := json.Marshal(args)
			return mcp.NewToolResultStructured(args, string(b)), nil
		})
	s.AddTool(mcp.NewTool("fail"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultError("it failed"), nil
	})
	s.AddTool(mcp.NewTool("rpcerr"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, errors.New("boom")
	})
	s.AddTool(mcp.NewTool("pid"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(fmt.Sprint(os.Getpid())), nil
	})
	s.AddTool(mcp.NewTool("slow"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ms := req.GetFloat("ms", 10000)
		marker := req.GetString("marker", os.Getenv("STATEGATE_TEST_MARKER"))
		var token any
		if req.Params.Meta != nil {
			token = req.Params.Meta.ProgressToken
		}
		end := time.NewTimer(time.Duration(ms) * time.Millisecond)
		defer end.Stop()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 1; ; i++ {
			if token != nil {
				_ = s.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
					"progressToken": token, "progress": i,
				})
			}
			select {
			case <-ctx.Done():
				if marker != "" {
					_ = os.WriteFile(marker, []byte("cancelled"), 0o644)
				}
				return nil, ctx.Err()
			case <-end.C:
				return mcp.NewToolResultText("done"), nil
			case <-tick.C:
			}
		}
	})
	s.AddTool(mcp.NewTool("log"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		_ = s.SendNotificationToClient(ctx, "notifications/message", map[string]any{
			"level": "warning", "logger": "test", "data": "hello from upstream",
		})
		return mcp.NewToolResultText("logged"), nil
	})
	s.AddTool(mcp.NewTool("add_tool"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		name := req.GetString("name", "extra")
		s.AddTool(mcp.NewTool(name), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(name), nil
		})
		return mcp.NewToolResultText("added"), nil
	})
	if stdio {
		s.AddTool(mcp.NewTool("crash"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			os.Exit(3)
			return nil, nil
		})
	}
	return s
}

// httpUpstream serves testServer over Streamable HTTP, and counts the
// notifications/cancelled it is sent.
type httpUpstream struct {
	URL string

	mu        sync.Mutex
	cancelled int
}

func (h *httpUpstream) cancels() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cancelled
}

func startHTTPUpstream(t *testing.T, opts ...mcpserver.StreamableHTTPOption) *httpUpstream {
	t.Helper()
	h := &httpUpstream{}
	mcpHTTP := mcpserver.NewStreamableHTTPServer(testServer(false), opts...)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if strings.Contains(string(body), `"notifications/cancelled"`) {
				h.mu.Lock()
				h.cancelled++
				h.mu.Unlock()
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		mcpHTTP.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	h.URL = ts.URL + "/mcp"
	return h
}
