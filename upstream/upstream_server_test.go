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
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
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
// add_tool, pid, meta, lists, storm, and crash and flood over stdio.
func testServer(stdio bool) *mcpserver.MCPServer {
	var lists atomic.Int64 // the tools/list requests it was sent
	hooks := &mcpserver.Hooks{}
	hooks.AddBeforeListTools(func(context.Context, any, *mcp.ListToolsRequest) { lists.Add(1) })
	s := mcpserver.NewMCPServer("test-upstream", "1.0.0", mcpserver.WithToolCapabilities(true), mcpserver.WithLogging(), mcpserver.WithHooks(hooks))
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
		tag := req.GetString("tag", "")
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
					"progressToken": token, "progress": i, "message": tag, "_meta": map[string]any{"upstream": "private"},
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
	// meta: the _meta it was sent, as JSON.
	s.AddTool(mcp.NewTool("meta"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		b, _ := json.Marshal(req.Params.Meta)
		return mcp.NewToolResultText(string(b)), nil
	})
	// lists: how many tools/list it was sent.
	s.AddTool(mcp.NewTool("lists"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(fmt.Sprint(lists.Load())), nil
	})
	// storm: n list_changed (every one sent: mcp-go drops a notification
	// when its queue is full), after adding a tool when add.
	s.AddTool(mcp.NewTool("storm"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.GetBool("add", false) {
			s.AddTool(mcp.NewTool("stormed"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("stormed"), nil
			})
		}
		for i := int(req.GetFloat("n", 1000)); i > 0; {
			err := s.SendNotificationToClient(ctx, string(mcp.MethodNotificationToolsListChanged), nil)
			switch {
			case errors.Is(err, mcpserver.ErrNotificationChannelBlocked):
				runtime.Gosched()
			case err != nil:
				return nil, err
			default:
				i--
			}
		}
		return mcp.NewToolResultText("stormed"), nil
	})
	if stdio {
		// flood: one line of the given bytes without a newline, straight
		// to stdout, the bytes written so far in the marker file after
		// each write, then nothing until cancelled.
		s.AddTool(mcp.NewTool("flood"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			total := int(req.GetFloat("bytes", 64<<20))
			marker := req.GetString("marker", "")
			chunk := bytes.Repeat([]byte("x"), 64<<10)
			_, _ = os.Stdout.WriteString(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"`)
			for written := 0; written < total; {
				n, err := os.Stdout.Write(chunk)
				written += n
				_ = os.WriteFile(marker, []byte(fmt.Sprint(written)), 0o644)
				if err != nil {
					break
				}
			}
			<-ctx.Done()
			return nil, ctx.Err()
		})
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
	auth      int // requests with an Authorization header
}

func (h *httpUpstream) auths() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.auth
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
		if r.Header.Get("Authorization") != "" {
			h.mu.Lock()
			h.auth++
			h.mu.Unlock()
		}
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
