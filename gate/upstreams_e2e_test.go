package gate_test

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
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/internal/watch"
	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/upstream"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
)

// These tests put stategate (a gate with an *upstream.Manager, wired as
// `stategate serve` wires them) between mcp-go's client and real MCP
// servers written with mcp-go: the test binary itself over stdio, or an
// httptest server over Streamable HTTP.

// upstreamEnv, when set, makes the test binary an upstream server over
// stdio: "up" (the tools of testUpstream), "pub" (pubUpstream) or "kill"
// (killUpstream). upstreamDownEnv names a file whose presence makes it
// exit at once (a server that cannot start).
const (
	upstreamEnv     = "STATEGATE_TEST_UPSTREAM"
	upstreamDownEnv = "STATEGATE_TEST_DOWN"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(upstreamEnv); mode != "" {
		os.Exit(serveTestUpstream(mode))
	}
	os.Exit(m.Run())
}

func serveTestUpstream(mode string) int {
	if f := os.Getenv(upstreamDownEnv); f != "" {
		if _, err := os.Stat(f); err == nil {
			fmt.Fprintln(os.Stderr, "test upstream: down, as", f, "says")
			return 4
		}
	}
	var s *mcpserver.MCPServer
	switch mode {
	case "up":
		s = testUpstream(true)
	case "pub":
		s = pubUpstream()
	case "kill":
		s = killUpstream()
	default:
		fmt.Fprintln(os.Stderr, "test upstream: unknown mode", mode)
		return 2
	}
	if err := mcpserver.ServeStdio(s); err != nil {
		fmt.Fprintln(os.Stderr, "test upstream:", err)
		return 1
	}
	return 0
}

// testUpstream is the upstream the workflows gate: echo (its arguments,
// as text and structured content), check (structured {passed}), fail (an
// error result), rpcerr (a JSON-RPC error), slow (progress notifications
// until it ends or its context does, when it writes its marker file),
// pid, and over stdio crash (the process exits).
func testUpstream(stdio bool) *mcpserver.MCPServer {
	s := mcpserver.NewMCPServer("test-upstream", "1.0.0", mcpserver.WithToolCapabilities(true))
	s.AddTool(mcp.NewTool("echo", mcp.WithDescription("Returns its arguments.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			args := req.GetArguments()
			b, _ := json.Marshal(args)
			return mcp.NewToolResultStructured(args, string(b)), nil
		})
	s.AddTool(mcp.NewTool("check", mcp.WithDescription("Runs the checks."), mcp.WithBoolean("pass")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultStructuredOnly(map[string]any{"passed": req.GetBool("pass", false)}), nil
		})
	s.AddTool(mcp.NewTool("fail", mcp.WithDescription("Fails.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("it failed"), nil
		})
	s.AddTool(mcp.NewTool("rpcerr", mcp.WithDescription("Answers a JSON-RPC error.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, errors.New("boom")
		})
	s.AddTool(mcp.NewTool("pid", mcp.WithDescription("Says its process id.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(fmt.Sprint(os.Getpid())), nil
		})
	s.AddTool(mcp.NewTool("slow", mcp.WithDescription("Takes its time."), mcp.WithNumber("ms"), mcp.WithString("marker")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var token any
			if req.Params.Meta != nil {
				token = req.Params.Meta.ProgressToken
			}
			end := time.NewTimer(time.Duration(req.GetFloat("ms", 10000)) * time.Millisecond)
			defer end.Stop()
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for i := 1; ; i++ {
				if token != nil {
					_ = s.SendNotificationToClient(ctx, "notifications/progress", map[string]any{"progressToken": token, "progress": i})
				}
				select {
				case <-ctx.Done():
					if marker := req.GetString("marker", ""); marker != "" {
						_ = os.WriteFile(marker, []byte(context.Cause(ctx).Error()), 0o644)
					}
					return nil, ctx.Err()
				case <-end.C:
					return mcp.NewToolResultText("done"), nil
				case <-tick.C:
				}
			}
		})
	if stdio {
		s.AddTool(mcp.NewTool("crash", mcp.WithDescription("Exits.")),
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				os.Exit(3)
				return nil, nil
			})
	}
	return s
}

// pubUpstream is a server whose tools are exposed always.
func pubUpstream() *mcpserver.MCPServer {
	s := mcpserver.NewMCPServer("pub-upstream", "1.0.0", mcpserver.WithToolCapabilities(true))
	s.AddTool(mcp.NewTool("ping", mcp.WithDescription("Answers pong.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("pong"), nil
		})
	return s
}

// killUpstream's effect does its side effect (writes its path), then
// kills its parent (stategate) before it answers.
func killUpstream() *mcpserver.MCPServer {
	s := mcpserver.NewMCPServer("kill-upstream", "1.0.0", mcpserver.WithToolCapabilities(true))
	s.AddTool(mcp.NewTool("effect", mcp.WithDescription("Pays, then kills stategate before it answers."),
		mcp.WithString("path", mcp.Required()), mcp.WithNumber("amount")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if err := os.WriteFile(req.GetString("path", ""), []byte(fmt.Sprint(req.GetFloat("amount", 0))), 0o644); err != nil {
				return nil, err
			}
			if p, err := os.FindProcess(os.Getppid()); err == nil {
				_ = p.Kill()
			}
			<-ctx.Done() // stdin closes with stategate
			return nil, ctx.Err()
		})
	return s
}

// stdioEntry is an upstreams file's entry that runs the test binary as
// the upstream of a mode.
func stdioEntry(t *testing.T, mode string, env ...string) map[string]any {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := map[string]string{
		upstreamEnv: mode,
		"GORACE":    strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0"), // a race-built child exits at once
	}
	for i := 0; i+1 < len(env); i += 2 {
		e[env[i]] = env[i+1]
	}
	return map[string]any{"command": exe, "args": []string{"-test.run=^$"}, "env": e, "timeout": 10}
}

// httpEntry serves an upstream over Streamable HTTP (httptest) and
// returns its upstreams file's entry.
func httpEntry(t *testing.T, s *mcpserver.MCPServer) map[string]any {
	t.Helper()
	ts := httptest.NewServer(mcpserver.NewStreamableHTTPServer(s))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return map[string]any{"url": ts.URL + "/mcp", "timeout": 10}
}

// writeUpstreams writes an upstreams file as editors do (a new file
// renamed over the old one).
func writeUpstreams(t *testing.T, file string, servers map[string]map[string]any) {
	t.Helper()
	data, err := json.MarshalIndent(map[string]any{"mcpServers": servers}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}

// gatedUpstreams is stategate in process: a gate over a memory store,
// whose Upstreams are a Manager running an upstreams file's servers, and
// its Streamable HTTP endpoint.
type gatedUpstreams struct {
	m   *upstream.Manager
	g   *gate.Gate
	st  store.Store
	url string
	// cancels counts the notifications/cancelled that HTTP clients sent.
	cancels atomic.Int32
}

// gateUpstreams wires a gate and a Manager as `stategate serve` does
// (the gate subscribes to the Manager's changes), serves the workflows, starts
// the servers of the file and waits until each is up.
func gateUpstreams(t *testing.T, file string, ws ...*workflow.Workflow) *gatedUpstreams {
	t.Helper()
	cfg, err := upstream.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	log := quietLog()
	st := store.NewMemory()
	m := upstream.New(upstream.Options{Log: log})
	t.Cleanup(func() { _ = m.Close() })
	g := gate.New(gate.Options{Store: st, Upstreams: m, Logger: log})
	if err := g.SetWorkflows(ws); err != nil {
		t.Fatal(err)
	}
	m.Apply(context.Background(), cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	untilTrue(t, "the upstreams up", func() bool {
		for _, s := range m.Servers() {
			if !s.Up {
				return false
			}
		}
		return true
	})
	h := g.HTTPHandler(gate.HTTPOptions{})
	gu := &gatedUpstreams{m: m, g: g, st: st}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if strings.Contains(string(body), `"notifications/cancelled"`) {
				gu.cancels.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(h.Close)
	gu.url = ts.URL + "/mcp"
	return gu
}

// trail returns an instance's audit trail.
func (h *gatedUpstreams) trail(t *testing.T, machine, handle string) []store.AuditEntry {
	t.Helper()
	trail, err := h.st.Audit(context.Background(), store.Key{Machine: machine, Handle: handle}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return trail
}

// job gates the tools of three servers: up (testUpstream), tight (the
// same, with a short timeout) and pub (exposed always). In idle, echo is
// listed (meta.tools); send (up/echo) moves to sent if its size is small;
// check (up/check) branches on its output; fail, rpcerr, slow and
// slow_tight (tight/slow) send FAILED when they fail; finish (up/pid)
// is bound in sent. up's crash and pid are named by no state.
const jobMachine = `{
  "id": "job",
  "meta": { "handleKey": "job_id" },
  "initial": "idle",
  "context": { "output": null, "error": null },
  "states": {
    "idle": {
      "meta": { "tools": ["up/echo"] },
      "on": {
        "SEND": { "guard": "small", "target": "sent", "actions": "keepOutput",
          "meta": { "tool": { "upstream": "up/echo", "name": "send" } } },
        "CHECK": [
          { "guard": "passed", "target": "passed", "meta": { "tool": { "upstream": "up/check" } } },
          { "target": "failed" }
        ],
        "FAIL": { "target": "sent", "meta": { "tool": { "upstream": "up/fail", "onError": "FAILED" } } },
        "RPC": { "target": "sent", "meta": { "tool": { "upstream": "up/rpcerr", "onError": "FAILED" } } },
        "SLOW": { "target": "sent", "actions": "keepOutput", "meta": { "tool": { "upstream": "up/slow", "onError": "FAILED" } } },
        "TIGHT": { "target": "sent", "meta": { "tool": { "upstream": "tight/slow", "name": "slow_tight", "onError": "FAILED" } } },
        "FAILED": { "actions": "keepError" }
      }
    },
    "sent": {
      "on": { "FINISH": { "target": "done", "meta": { "tool": { "upstream": "up/pid", "name": "finish" } } } }
    },
    "passed": { "type": "final" },
    "failed": { "type": "final" },
    "done": { "type": "final" }
  }
}`

func jobWorkflow(t *testing.T) *workflow.Workflow {
	t.Helper()
	reg := xstate.NewRegistry().
		Assign("keepOutput", func(a interp.Args, _ any) (map[string]any, error) {
			return map[string]any{"output": a.Event.Data["output"]}, nil
		}).
		Assign("keepError", func(a interp.Args, _ any) (map[string]any, error) {
			return map[string]any{"error": a.Event.Data["error"]}, nil
		}).
		Guard("small", func(a interp.Args, _ any) (bool, error) {
			size, _ := a.Event.Get("size").(float64)
			return size < 10, nil
		}).
		Guard("passed", func(a interp.Args, _ any) (bool, error) {
			out, _ := a.Event.Get("output").(map[string]any)
			return out["passed"] == true, nil
		})
	m, _, err := (&xstate.Loader{Registry: reg}).Parse("job.json", []byte(jobMachine))
	if err != nil {
		t.Fatal(err)
	}
	w, err := workflow.New(m, workflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// svcMachine needs no implementations: ping_up (up/pid) moves a to b;
// crash (up/crash) moves nothing.
const svcMachine = `{
  "id": "svc",
  "meta": { "handleKey": "svc_id" },
  "initial": "a",
  "states": {
    "a": { "on": {
      "PING": { "target": "b", "meta": { "tool": { "upstream": "up/pid", "name": "ping_up" } } },
      "CRASH": { "target": "a", "meta": { "tool": { "upstream": "up/crash" } } }
    } },
    "b": { "type": "final" }
  }
}`

func svcWorkflow(t *testing.T) *workflow.Workflow {
	t.Helper()
	m, _, err := (&xstate.Loader{}).Parse("svc.json", []byte(svcMachine))
	if err != nil {
		t.Fatal(err)
	}
	w, err := workflow.New(m, workflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// untilTrue polls cond for at most 10 s.
func untilTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// progressSeen records the progress tokens of the notifications/progress
// a client receives.
type progressSeen chan string

func watchProgress(c *client.Client) progressSeen {
	seen := make(progressSeen, 1000)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationProgress) {
			select {
			case seen <- fmt.Sprint(n.Params.AdditionalFields["progressToken"]):
			default:
			}
		}
	})
	return seen
}

// await waits for a progress notification with a token.
func (p progressSeen) await(t *testing.T, token string) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case got := <-p:
			if got == token {
				return
			}
		case <-deadline:
			t.Fatalf("no notifications/progress with token %s reached the client", token)
		}
	}
}

// connectStdioClient serves the gate over stdio in process (gate.ServeStdio
// on pipes) and connects mcp-go's stdio client to it.
func connectStdioClient(t *testing.T, g *gate.Gate) *client.Client {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = g.ServeStdio(ctx, inR, outW)
		outW.Close()
		close(done)
	}()
	c := client.NewClient(transport.NewIO(outR, inW, nil))
	t.Cleanup(func() {
		c.Close() // closes inW: the gate's input ends, then its output
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Error("ServeStdio did not return when its input closed")
			cancel()
			outR.Close()
			<-done
		}
		cancel()
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "stdio-e2e", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return c
}

// statusOf calls a workflow's status tool for a handle.
func statusOf(c *mcptest.Client, machine, key, handle string) map[string]any {
	c.T().Helper()
	_, sc, isErr := c.Call(machine+"_status", map[string]any{key: handle})
	if isErr {
		c.T().Fatalf("%s_status %s: %v", machine, handle, sc)
	}
	return sc
}

func contextOf(sc map[string]any) map[string]any {
	ctx, _ := sc["context"].(map[string]any)
	return ctx
}

func metaOf(res *mcp.CallToolResult, key string) map[string]any {
	if res.Meta == nil {
		return nil
	}
	m, _ := plainJSON(res.Meta.AdditionalFields[key]).(map[string]any)
	return m
}

func plainJSON(v any) any {
	data, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(data, &out)
	return out
}

func structured(res *mcp.CallToolResult) map[string]any {
	m, _ := plainJSON(res.StructuredContent).(map[string]any)
	return m
}

func firstText(res *mcp.CallToolResult) string {
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(mcp.TextContent); ok {
			return tc.Text
		}
	}
	return ""
}

// TestRealUpstreams drives stategate with mcp-go's client in front of
// real mcp-go upstream servers, over stdio and over Streamable HTTP:
// listing by state, refusals, forwarding, events with the output, error
// events, deadlines, progress and cancellation.
func TestRealUpstreams(t *testing.T) {
	for _, tr := range []string{"stdio", "http"} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "upstreams.json")
			servers := map[string]map[string]any{}
			if tr == "stdio" {
				servers["up"] = stdioEntry(t, "up")
				servers["tight"] = stdioEntry(t, "up")
				servers["pub"] = stdioEntry(t, "pub")
			} else {
				servers["up"] = httpEntry(t, testUpstream(false))
				servers["tight"] = httpEntry(t, testUpstream(false))
				servers["pub"] = httpEntry(t, pubUpstream())
			}
			servers["tight"]["timeout"] = "1s" // it bounds the handshake too
			servers["pub"]["expose"] = "always"
			writeUpstreams(t, file, servers)
			h := gateUpstreams(t, file, jobWorkflow(t))
			c := connect(t, h.url)
			progress := watchProgress(c.Client)
			// The upstream tools are served once the Manager says the
			// servers are up (the Manager's changes).
			c.AwaitTools("the upstreams' tools", func(ts map[string]mcp.Tool) bool {
				_, pub := ts["ping"]
				return pub && ts["send"].Description == "Returns its arguments." && ts["slow_tight"].Description == "Takes its time."
			})

			t.Run("listing", func(t *testing.T) { realListing(t, c) })
			t.Run("forwarding", func(t *testing.T) { realForwarding(t, c) })
			t.Run("rejected", func(t *testing.T) { realRejected(t, h, c) })
			t.Run("output", func(t *testing.T) { realOutput(t, c) })
			t.Run("errors", func(t *testing.T) { realErrors(t, h, c) })
			t.Run("deadline", func(t *testing.T) { realDeadline(t, c) })
			t.Run("progress", func(t *testing.T) { realProgress(t, c, progress) })
			t.Run("cancel-http-client", func(t *testing.T) {
				// mcp-go's client sends no notifications/cancelled over
				// HTTP (client.cancelRequest): it ends the POST, whose
				// context net/http ends, and mcp-go's server with it the
				// handler's.
				realCancel(t, h, c, c.Client, progress, "cx-http")
				t.Logf("notifications/cancelled the HTTP client sent: %d", h.cancels.Load())
			})
			t.Run("cancel-stdio-client", func(t *testing.T) {
				sc := connectStdioClient(t, h.g)
				realCancel(t, h, c, sc, watchProgress(sc), "cx-stdio")
			})
		})
	}
}

// realListing: bound tools, a state's meta.tools and an exposed server's
// tools are listed in the initial state; tools no machine names are
// neither listed nor callable.
func realListing(t *testing.T, c *mcptest.Client) {
	c = c.For(t)
	tools := c.Tools()
	for _, want := range []string{"echo", "send", "check", "fail", "rpcerr", "slow", "slow_tight", "ping", "job_status"} {
		if _, ok := tools[want]; !ok {
			t.Errorf("%s not listed in idle: %v", want, mcptest.Names(tools))
		}
	}
	for _, hidden := range []string{"finish", "pid", "crash", "job_reset"} {
		if _, ok := tools[hidden]; ok {
			t.Errorf("%s listed in idle: %v", hidden, mcptest.Names(tools))
		}
	}
	// The upstream's definition, with the handle argument.
	check := tools["check"]
	if check.Description != "Runs the checks." || check.InputSchema.Properties["pass"] == nil || check.InputSchema.Properties["job_id"] == nil ||
		!slices.Contains(check.InputSchema.Required, "job_id") {
		t.Errorf("check as listed: %+v", check)
	}
	if echo := tools["echo"]; echo.Description != "Returns its arguments." || echo.InputSchema.Properties["job_id"] == nil {
		t.Errorf("echo (meta.tools) as listed: %+v", echo)
	}
	// Named by no state: unknown, and not forwarded (crash would end the
	// server, which the later subtests use).
	for _, name := range []string{"pid", "crash"} {
		if err := c.CallErr(name, map[string]any{"job_id": "u"}); !errors.Is(err, mcp.ErrInvalidParams) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// realForwarding: a bound tool's arguments reach the upstream without the
// handle argument, its result reaches the client with the gate's note,
// its event moves the machine with the output; the list follows; FORBIDDEN
// outside the states; an exposed tool passes through in any state.
func realForwarding(t *testing.T, c *mcptest.Client) {
	c = c.For(t)
	c.Drain()
	res := c.Result("send", map[string]any{"job_id": "fwd", "size": 3, "note": "hi"})
	if res.IsError {
		t.Fatalf("send: %+v", res)
	}
	// echo's text is the arguments it got: no job_id.
	if got := firstText(res); got != `{"note":"hi","size":3}` {
		t.Errorf("the upstream got %s", got)
	}
	if sc := structured(res); len(sc) != 2 || sc["note"] != "hi" || sc["size"] != 3.0 {
		t.Errorf("structured content: %v", sc)
	}
	if text := mcptest.Text(res); !strings.Contains(text, "now in state sent") || !strings.Contains(text, "finish") {
		t.Errorf("note: %q", text)
	}
	if wf := metaOf(res, "stategate/workflow"); wf["state"] != "sent" || wf["handle"] != "fwd" {
		t.Errorf("_meta note: %v", wf)
	}
	if out := contextOf(statusOf(c, "job", "job_id", "fwd"))["output"].(map[string]any); out["note"] != "hi" || out["size"] != 3.0 {
		t.Errorf("the event's output: %v", out)
	}
	c.AwaitTools("sent's tools", func(ts map[string]mcp.Tool) bool {
		_, finish := ts["finish"]
		_, send := ts["send"]
		_, echo := ts["echo"]
		_, ping := ts["ping"]
		return finish && !send && !echo && ping
	})
	// A state tool: forwarded without the handle; the instance stays.
	if text, _, isErr := c.Call("echo", map[string]any{"job_id": "st", "a": 1}); isErr || text != `{"a":1}` {
		t.Errorf("echo in idle: %q %v", text, isErr)
	}
	if sc := statusOf(c, "job", "job_id", "st"); sc["state"] != "idle" {
		t.Errorf("a state tool moved the instance: %v", sc["state"])
	}
	// Outside their states: FORBIDDEN, with the tools allowed now.
	for _, tc := range []struct {
		tool, handle, allowed string
	}{
		{"echo", "fwd", "finish"},
		{"send", "fwd", "finish"},
		{"finish", "st", "send"},
	} {
		_, sc, isErr := c.Call(tc.tool, map[string]any{"job_id": tc.handle, "size": 1})
		if !isErr || sc["error"] != "FORBIDDEN" || !slices.Contains(anyStrings(sc["allowed"]), tc.allowed) {
			t.Errorf("%s on %s: %v", tc.tool, tc.handle, sc)
		}
	}
	if sc := statusOf(c, "job", "job_id", "fwd"); sc["state"] != "sent" {
		t.Errorf("refused calls moved fwd: %v", sc["state"])
	}
	// An exposed server's tool, whatever the state.
	if text, _, isErr := c.Call("ping", nil); isErr || text != "pong" {
		t.Errorf("ping: %q %v", text, isErr)
	}
	if _, sc, isErr := c.Call("finish", map[string]any{"job_id": "fwd"}); isErr || sc != nil {
		t.Errorf("finish: %v %v", sc, isErr)
	}
	if sc := statusOf(c, "job", "job_id", "fwd"); sc["state"] != "done" {
		t.Errorf("after finish: %v", sc["state"])
	}
}

// realRejected: the guard refuses the event that follows the upstream
// call: the upstream was called (its result comes back), the instance did
// not move, and the intent is settled with a note.
func realRejected(t *testing.T, h *gatedUpstreams, c *mcptest.Client) {
	c = c.For(t)
	res := c.Result("send", map[string]any{"job_id": "big", "size": 50})
	if res.IsError || firstText(res) != `{"size":50}` {
		t.Fatalf("send size 50: %+v", res)
	}
	if text := mcptest.Text(res); !strings.Contains(text, "did not take SEND") || !strings.Contains(text, "stays in state idle") {
		t.Errorf("note: %q", text)
	}
	if wf := metaOf(res, "stategate/workflow"); wf["error"] == nil || wf["state"] != "idle" {
		t.Errorf("_meta note: %v", wf)
	}
	if sc := statusOf(c, "job", "job_id", "big"); sc["state"] != "idle" || contextOf(sc)["output"] != nil {
		t.Errorf("after the rejected event: %v", sc)
	}
	trail := h.trail(t, "job", "big")
	if len(trail) != 2 || trail[0].Intent == nil || trail[0].Intent.Event != "SEND" || trail[0].Intent.Arguments["size"] != 50.0 ||
		trail[1].Settles != trail[0].Version || !strings.Contains(trail[1].Note, "SEND was not taken") {
		t.Errorf("audit trail: %s", trailString(trail))
	}
	if u := store.Unsettled(trail); len(u) != 0 {
		t.Errorf("unsettled: %s", trailString(u))
	}
}

func trailString(trail []store.AuditEntry) string {
	data, _ := json.Marshal(trail)
	return string(data)
}

// realOutput: the event carries the result's structuredContent as output,
// on which the machine's guard branches.
func realOutput(t *testing.T, c *mcptest.Client) {
	c = c.For(t)
	for _, tc := range []struct {
		handle string
		pass   bool
		state  string
	}{{"pass", true, "passed"}, {"nopass", false, "failed"}} {
		res := c.Result("check", map[string]any{"job_id": tc.handle, "pass": tc.pass})
		if res.IsError || structured(res)["passed"] != tc.pass {
			t.Errorf("check %v: %+v", tc.pass, res)
		}
		if sc := statusOf(c, "job", "job_id", tc.handle); sc["state"] != tc.state || sc["status"] != "done" {
			t.Errorf("check %v: %v", tc.pass, sc)
		}
	}
}

// realErrors: an error result, and a JSON-RPC error, send the onError
// event with why.
func realErrors(t *testing.T, h *gatedUpstreams, c *mcptest.Client) {
	c = c.For(t)
	res := c.Result("fail", map[string]any{"job_id": "e1"})
	if !res.IsError || firstText(res) != "it failed" {
		t.Errorf("fail: %+v", res)
	}
	if sc := statusOf(c, "job", "job_id", "e1"); sc["state"] != "idle" || contextOf(sc)["error"] != "it failed" {
		t.Errorf("after an error result: %v", sc)
	}
	trail := h.trail(t, "job", "e1")
	if n := len(trail); n != 2 || trail[1].Settles != trail[0].Version || trail[1].Event["type"] != "FAILED" {
		t.Errorf("audit trail: %s", trailString(trail))
	}
	res = c.Result("rpcerr", map[string]any{"job_id": "e2"})
	if !res.IsError || !strings.Contains(mcptest.Text(res), "UPSTREAM_ERROR") || !strings.Contains(mcptest.Text(res), "boom") {
		t.Errorf("rpcerr: %+v", res)
	}
	if sc := statusOf(c, "job", "job_id", "e2"); sc["state"] != "idle" ||
		!strings.Contains(fmt.Sprint(contextOf(sc)["error"]), "UPSTREAM_ERROR") || !strings.Contains(fmt.Sprint(contextOf(sc)["error"]), "boom") {
		t.Errorf("after a JSON-RPC error: %v", sc)
	}
}

// realDeadline: a call past its server's timeout is UPSTREAM_TIMEOUT
// (naming the server), the error event is sent, and the upstream's
// handler sees its context end.
func realDeadline(t *testing.T, c *mcptest.Client) {
	c = c.For(t)
	marker := filepath.Join(t.TempDir(), "late")
	began := time.Now()
	res := c.Result("slow_tight", map[string]any{"job_id": "late", "ms": 5000, "marker": marker})
	took := time.Since(began)
	if !res.IsError || !strings.Contains(mcptest.Text(res), "UPSTREAM_TIMEOUT") || !strings.Contains(mcptest.Text(res), `"tight"`) ||
		structured(res)["server"] != "tight" {
		t.Errorf("slow_tight: %+v", res)
	}
	if took > 3*time.Second {
		t.Errorf("the 1s timeout took %v", took)
	}
	if sc := statusOf(c, "job", "job_id", "late"); sc["state"] != "idle" || !strings.Contains(fmt.Sprint(contextOf(sc)["error"]), "UPSTREAM_TIMEOUT") {
		t.Errorf("after the timeout: %v", sc)
	}
	untilTrue(t, "the upstream's handler to see its context end", func() bool { return fileExists(marker) })
}

// realProgress: the upstream's notifications/progress for the client's
// progress token reach the client.
func realProgress(t *testing.T, c *mcptest.Client, progress progressSeen) {
	c = c.For(t)
	req := mcp.CallToolRequest{}
	req.Params.Name = "slow"
	req.Params.Arguments = map[string]any{"job_id": "prog", "ms": 150}
	req.Params.Meta = &mcp.Meta{ProgressToken: "tok-prog"}
	res, err := c.CallTool(context.Background(), req)
	if err != nil || res.IsError {
		t.Fatalf("slow: %v %+v", err, res)
	}
	progress.await(t, "tok-prog")
	if sc := statusOf(c, "job", "job_id", "prog"); sc["state"] != "sent" || contextOf(sc)["output"] != "done" {
		t.Errorf("after slow: %v", sc)
	}
}

// realCancel: the client cancels a call under way (its context); the
// upstream's handler sees its context end, and the error event is sent.
func realCancel(t *testing.T, h *gatedUpstreams, c *mcptest.Client, caller *client.Client, progress progressSeen, handle string) {
	c = c.For(t)
	marker := filepath.Join(t.TempDir(), "cancelled")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "slow"
	req.Params.Arguments = map[string]any{"job_id": handle, "ms": 20000, "marker": marker}
	req.Params.Meta = &mcp.Meta{ProgressToken: "tok-" + handle}
	errc := make(chan error, 1)
	go func() {
		_, err := caller.CallTool(ctx, req)
		errc <- err
	}()
	progress.await(t, "tok-"+handle) // the upstream works on it
	cancel()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("a cancelled call returned no error")
		}
	case <-time.After(time.Minute):
		t.Fatal("the cancelled call did not return")
	}
	untilTrue(t, "the upstream's handler to see the cancellation", func() bool { return fileExists(marker) })
	untilTrue(t, "the error event of the cancelled call", func() bool {
		return strings.Contains(fmt.Sprint(contextOf(statusOf(c, "job", "job_id", handle))["error"]), "CANCELLED")
	})
	if sc := statusOf(c, "job", "job_id", handle); sc["state"] != "idle" {
		t.Errorf("after the cancelled call: %v", sc)
	}
	if u := store.Unsettled(h.trail(t, "job", handle)); len(u) != 0 {
		t.Errorf("unsettled: %s", trailString(u))
	}
}

// TestRealUpstreamCrashes: a stdio upstream that exits answers
// UPSTREAM_UNAVAILABLE (naming it) while it is down, its tools stay
// listed, and calls work again once the Manager restarted it.
func TestRealUpstreamCrashes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	down := filepath.Join(dir, "down") // while it exists, the server cannot start
	file := filepath.Join(dir, "upstreams.json")
	writeUpstreams(t, file, map[string]map[string]any{"up": stdioEntry(t, "up", upstreamDownEnv, down)})
	h := gateUpstreams(t, file, svcWorkflow(t))
	c := connect(t, h.url)
	c.AwaitTools("ping_up", func(ts map[string]mcp.Tool) bool { return ts["ping_up"].Description == "Says its process id." })
	pid, _, isErr := c.Call("ping_up", map[string]any{"svc_id": "s0"})
	if isErr {
		t.Fatalf("ping_up: %s", pid)
	}

	if err := os.WriteFile(down, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res := c.Result("crash", map[string]any{"svc_id": "s1"})
	if !res.IsError || !strings.Contains(mcptest.Text(res), "UPSTREAM_UNAVAILABLE") || !strings.Contains(mcptest.Text(res), `"up"`) {
		t.Errorf("crash: %+v", res)
	}
	untilTrue(t, "up down", func() bool { return !h.m.Servers()[0].Up })
	res = c.Result("ping_up", map[string]any{"svc_id": "s2"})
	if !res.IsError || !strings.Contains(mcptest.Text(res), "UPSTREAM_UNAVAILABLE") || !strings.Contains(mcptest.Text(res), `"up"`) ||
		structured(res)["server"] != "up" {
		t.Errorf("ping_up while up is down: %+v", res)
	}
	if _, ok := c.Tools()["ping_up"]; !ok {
		t.Error("ping_up not listed while up is down")
	}
	if sc := statusOf(c, "svc", "svc_id", "s2"); sc["state"] != "a" {
		t.Errorf("a failed call moved s2: %v", sc["state"])
	}
	if u := store.Unsettled(h.trail(t, "svc", "s2")); len(u) != 0 {
		t.Errorf("unsettled: %s", trailString(u))
	}

	if err := os.Remove(down); err != nil {
		t.Fatal(err)
	}
	untilTrue(t, "up back", func() bool { return h.m.Servers()[0].Up })
	again, _, isErr := c.Call("ping_up", map[string]any{"svc_id": "s2"})
	if isErr || again == pid {
		t.Errorf("ping_up after the restart: %q (was %q), isError %v", again, pid, isErr)
	}
	if sc := statusOf(c, "svc", "svc_id", "s2"); sc["state"] != "b" {
		t.Errorf("after the restart: %v", sc["state"])
	}
}

// TestRealUpstreamsFileWatched: with the upstreams file watched (as
// serve does), a server added to it brings its tools to the client's
// list, with a list_changed; one removed takes them away; an entry
// changed restarts its server.
func TestRealUpstreamsFileWatched(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "upstreams.json")
	up := stdioEntry(t, "up")
	writeUpstreams(t, file, map[string]map[string]any{"up": up})
	h := gateUpstreams(t, file, svcWorkflow(t))
	ctx, cancel := context.WithCancel(context.Background())
	watching := make(chan error, 1)
	go func() {
		watching <- watch.File(ctx, file, watch.Debounce, nil, func() { _ = h.m.ApplyFile(ctx, file) })
	}()
	t.Cleanup(func() {
		cancel()
		<-watching
	})
	c := connect(t, h.url)
	c.AwaitTools("ping_up", func(ts map[string]mcp.Tool) bool { return ts["ping_up"].Description == "Says its process id." })
	if _, ok := c.Tools()["ping"]; ok {
		t.Fatal("ping listed before pub is added")
	}
	c.Drain()

	// Add pub. The watcher may start after the first write: write until
	// a list_changed brings ping.
	pub := stdioEntry(t, "pub")
	pub["expose"] = "always"
	untilTrue(t, "ping listed after pub was added", func() bool {
		writeUpstreams(t, file, map[string]map[string]any{"up": up, "pub": pub})
		select {
		case <-c.Changed():
			_, ok := c.Tools()["ping"]
			return ok
		case <-time.After(time.Second):
			return false
		}
	})
	if text, _, isErr := c.Call("ping", nil); isErr || text != "pong" {
		t.Errorf("ping: %q %v", text, isErr)
	}

	// Change up's entry: it restarts (a new process), the tools stay.
	pid, _, _ := c.Call("ping_up", map[string]any{"svc_id": "p1"})
	up2 := stdioEntry(t, "up", "EXTRA", "1")
	writeUpstreams(t, file, map[string]map[string]any{"up": up2, "pub": pub})
	n := 1
	untilTrue(t, "up restarted", func() bool {
		n++
		res := c.Result("ping_up", map[string]any{"svc_id": fmt.Sprint("p", n)})
		return !res.IsError && firstText(res) != pid
	})

	// Remove pub: ping goes, with a list_changed.
	c.Drain()
	writeUpstreams(t, file, map[string]map[string]any{"up": up2})
	c.AwaitChanged()
	c.AwaitTools("ping gone", func(ts map[string]mcp.Tool) bool { _, ok := ts["ping"]; return !ok })
	if err := c.CallErr("ping", nil); !errors.Is(err, mcp.ErrInvalidParams) {
		t.Errorf("ping after pub was removed: %v", err)
	}
}
