package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// logBuf is a log the tests read.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// eventually polls cond, for at most 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type fixture struct {
	m       *Manager
	log     *logBuf
	changes chan struct{}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{log: &logBuf{}, changes: make(chan struct{}, 1000)}
	f.m = New(Options{Log: slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	f.m.Subscribe(func() {
		select {
		case f.changes <- struct{}{}:
		default:
		}
	})
	t.Cleanup(func() { _ = f.m.Close() })
	return f
}

// drain forgets the changes told so far.
func (f *fixture) drain() {
	for {
		select {
		case <-f.changes:
		default:
			return
		}
	}
}

func (f *fixture) awaitChange(t *testing.T) {
	t.Helper()
	select {
	case <-f.changes:
	case <-time.After(time.Minute):
		t.Fatal("no change was told")
	}
}

func (f *fixture) up(t *testing.T, name string) {
	t.Helper()
	eventually(t, name+" up", func() bool {
		for _, s := range f.m.Servers() {
			if s.Name == name {
				return s.Up
			}
		}
		return false
	})
}

func stdioServer(t *testing.T, name string, env ...string) Server {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := Server{Name: name, Command: exe, Args: []string{"-test.run=^$"}, Timeout: 10 * time.Second, Env: map[string]string{
		"STATEGATE_TEST_UPSTREAM": "1",
		"GORACE":                  strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0"), // a race-built child exits at once
	}}
	for i := 0; i+1 < len(env); i += 2 {
		s.Env[env[i]] = env[i+1]
	}
	return s
}

func httpServer(t *testing.T, name string) (Server, *httpUpstream) {
	h := startHTTPUpstream(t)
	return Server{Name: name, URL: h.URL, Timeout: 10 * time.Second}, h
}

func config(servers ...Server) *Config {
	c := &Config{Servers: map[string]Server{}}
	for _, s := range servers {
		c.Servers[s.Name] = s
	}
	return c
}

func callReq(tool string, args map[string]any) mcp.CallToolRequest {
	var r mcp.CallToolRequest
	r.Params.Name = tool
	r.Params.Arguments = args
	return r
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// transports runs a test against a stdio upstream and an HTTP one, each
// named "up".
func transports(t *testing.T, test func(t *testing.T, f *fixture, h *httpUpstream, cfg Server)) {
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		cfg := stdioServer(t, "up")
		f.m.Apply(context.Background(), config(cfg))
		f.up(t, "up")
		test(t, f, nil, cfg)
	})
	t.Run("http", func(t *testing.T) {
		t.Parallel()
		cfg, h := httpServer(t, "up")
		f := newFixture(t)
		f.m.Apply(context.Background(), config(cfg))
		f.up(t, "up")
		test(t, f, h, cfg)
	})
}

func TestCall(t *testing.T) {
	transports(t, func(t *testing.T, f *fixture, _ *httpUpstream, _ Server) {
		ctx := context.Background()
		if err := f.m.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		tools, ok := f.m.Tools("up")
		if !ok || !slices.ContainsFunc(tools, func(x mcp.Tool) bool { return x.Name == "echo" }) {
			t.Fatalf("tools %v %v", tools, ok)
		}
		if _, ok := f.m.Tools("nope"); ok {
			t.Fatal("tools of an unconfigured server")
		}

		res, err := f.m.Call(ctx, "up", callReq("echo", map[string]any{"a": 1.0, "b": "x"}))
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError || !strings.Contains(text(res), `"b":"x"`) {
			t.Fatalf("echo: %+v", res)
		}
		sc, _ := json.Marshal(res.StructuredContent)
		if string(sc) != `{"a":1,"b":"x"}` {
			t.Fatalf("structured %s", sc)
		}

		res, err = f.m.Call(ctx, "up", callReq("fail", nil))
		if err != nil || !res.IsError || text(res) != "it failed" {
			t.Fatalf("fail: %+v %v", res, err)
		}

		for _, tool := range []string{"rpcerr", "no_such_tool"} {
			_, err = f.m.Call(ctx, "up", callReq(tool, nil))
			var rpc *RPCError
			if !errors.As(err, &rpc) || rpc.Server != "up" || rpc.Code == 0 || errors.Is(err, ErrUnavailable) {
				t.Fatalf("%s: %v", tool, err)
			}
		}

		_, err = f.m.Call(ctx, "nope", callReq("echo", nil))
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "not configured") {
			t.Fatalf("unconfigured: %v", err)
		}

		// calls run in parallel
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := f.m.Call(ctx, "up", callReq("echo", map[string]any{"i": float64(i)}))
				if err == nil && !strings.Contains(text(res), fmt.Sprintf(`"i":%d`, i)) {
					err = fmt.Errorf("call %d got %q", i, text(res))
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestStatelessHTTP(t *testing.T) {
	t.Parallel()
	h := startHTTPUpstream(t, mcpserver.WithStateLess(true))
	f := newFixture(t)
	f.m.Apply(context.Background(), config(Server{Name: "sl", URL: h.URL, Timeout: 10 * time.Second}))
	f.up(t, "sl")
	res, err := f.m.Call(context.Background(), "sl", callReq("echo", map[string]any{"x": "y"}))
	if err != nil || !strings.Contains(text(res), `"x":"y"`) {
		t.Fatalf("%v %v", res, err)
	}
}

func TestTimeout(t *testing.T) {
	transports(t, func(t *testing.T, f *fixture, _ *httpUpstream, cfg Server) {
		cfg.Timeout = 200 * time.Millisecond
		f.m.Apply(context.Background(), config(cfg))
		f.up(t, "up")
		eventually(t, "the new timeout", func() bool {
			_, err := f.m.Call(context.Background(), "up", callReq("echo", nil))
			return err == nil
		})
		began := time.Now()
		_, err := f.m.Call(context.Background(), "up", callReq("slow", map[string]any{"ms": 5000}))
		if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v", err)
		}
		if !strings.Contains(err.Error(), `"up"`) || !strings.Contains(err.Error(), "200ms") {
			t.Fatalf("message %q", err)
		}
		if d := time.Since(began); d > 3*time.Second {
			t.Fatalf("took %v", d)
		}
	})
}

func TestCancelReachesUpstream(t *testing.T) {
	transports(t, func(t *testing.T, f *fixture, h *httpUpstream, _ Server) {
		marker := filepath.Join(t.TempDir(), "cancelled")
		ctx, cancel := context.WithCancel(context.Background())
		progressed := make(chan struct{}, 100)
		ctx = WithNotify(ctx, func(method string, params map[string]any) {
			progressed <- struct{}{}
		})
		req := callReq("slow", map[string]any{"ms": 20000, "marker": marker})
		req.Params.Meta = &mcp.Meta{ProgressToken: "c1"}
		errc := make(chan error, 1)
		go func() {
			_, err := f.m.Call(ctx, "up", req)
			errc <- err
		}()
		select { // the call runs upstream
		case <-progressed:
		case <-time.After(time.Minute):
			t.Fatal("no progress")
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
		eventually(t, "the upstream's cancellation marker", func() bool {
			_, err := os.Stat(marker)
			return err == nil
		})
		if h != nil {
			eventually(t, "notifications/cancelled over HTTP", func() bool { return h.cancels() > 0 })
		}
	})
}

// progressSink records the progress a call is relayed, and tells of each.
type progressSink struct {
	mu    sync.Mutex
	got   []map[string]any
	heard chan struct{}
}

func newSink() *progressSink { return &progressSink{heard: make(chan struct{}, 10000)} }

func (p *progressSink) notify(method string, params map[string]any) {
	p.mu.Lock()
	p.got = append(p.got, maps.Clone(params))
	p.got[len(p.got)-1]["method"] = method
	p.mu.Unlock()
	p.heard <- struct{}{}
}

func (p *progressSink) all() []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.got)
}

func (p *progressSink) await(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-p.heard:
		case <-time.After(time.Minute):
			t.Fatal("no progress relayed")
		}
	}
}

// TestProgressIsTheCallers: two calls in flight on one server with the
// same progress token (two clients, each numbering its tokens from 1)
// each hear their own progress only, under their token, and nothing of
// the server's _meta.
func TestProgressIsTheCallers(t *testing.T) {
	transports(t, func(t *testing.T, f *fixture, _ *httpUpstream, _ Server) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sinks := map[string]*progressSink{"A": newSink(), "B": newSink()}
		errs := make(chan error, 2)
		for tag, sink := range sinks {
			go func() {
				req := withToken(callReq("slow", map[string]any{"ms": 20000, "tag": tag}), 1.0)
				_, err := f.m.Call(WithNotify(ctx, sink.notify), "up", req)
				errs <- err
			}()
		}
		for _, sink := range sinks {
			sink.await(t, 1)
		}
		for _, sink := range sinks { // both in flight since
			sink.await(t, 3)
		}
		cancel()
		for range 2 {
			if err := <-errs; !errors.Is(err, context.Canceled) {
				t.Fatalf("call: %v", err)
			}
		}
		for tag, sink := range sinks {
			for _, p := range sink.all() {
				if p["method"] != "notifications/progress" || p["progressToken"] != 1.0 || p["message"] != tag || p["progress"] == nil {
					t.Fatalf("call %s was relayed %v", tag, p)
				}
				for k := range p {
					if !slices.Contains([]string{"method", "progressToken", "progress", "message"}, k) {
						t.Fatalf("call %s was relayed %q: %v", tag, k, p)
					}
				}
			}
		}
	})
}

// TestLogsGoToTheLogOnly: a server's log message reaches stategate's log,
// and no call in flight.
func TestLogsGoToTheLogOnly(t *testing.T) {
	transports(t, func(t *testing.T, f *fixture, h *httpUpstream, _ Server) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		slow := newSink()
		done := make(chan error, 1)
		go func() {
			_, err := f.m.Call(WithNotify(ctx, slow.notify), "up", withToken(callReq("slow", map[string]any{"ms": 20000}), "s"))
			done <- err
		}()
		slow.await(t, 1)
		logger := newSink()
		if _, err := f.m.Call(WithNotify(context.Background(), logger.notify), "up", withToken(callReq("log", nil), "l")); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the upstream's log message in the log", func() bool {
			return strings.Contains(f.log.String(), `level=WARN msg="upstream log" upstream=up logger=test data="hello from upstream"`)
		})
		slow.await(t, 1) // over stdio, after the log message
		cancel()
		<-done
		for _, p := range append(slow.all(), logger.all()...) {
			if p["method"] != "notifications/progress" {
				t.Fatalf("relayed %v", p)
			}
		}
	})
}

// TestMetaNotForwarded: a server is sent none of the caller's _meta (nor
// its HTTP headers) but the keys its entry forwards, and a progress token
// of stategate's own, a new one for each call.
func TestMetaNotForwarded(t *testing.T) {
	transports(t, func(t *testing.T, f *fixture, h *httpUpstream, cfg Server) {
		req := callReq("meta", nil)
		req.Params.Meta = &mcp.Meta{ProgressToken: 1.0, AdditionalFields: map[string]any{
			"io.modelcontextprotocol/clientInfo": map[string]any{"name": "other-client"},
			"traceparent":                        "00-abc-def-01",
		}}
		req.Header = http.Header{"Authorization": []string{"Bearer the-gate's-own"}}
		sent := func(ctx context.Context) map[string]any {
			t.Helper()
			res, err := f.m.Call(ctx, "up", req)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(text(res)), &m); err != nil {
				t.Fatalf("%q: %v", text(res), err)
			}
			return m
		}
		notify := WithNotify(context.Background(), func(string, map[string]any) {})
		first, second := sent(notify), sent(notify)
		tok, _ := first["progressToken"].(string)
		if len(first) != 1 || !strings.HasPrefix(tok, "stategate-") || second["progressToken"] == tok {
			t.Fatalf("sent %v, then %v", first, second)
		}
		if m := sent(context.Background()); m != nil { // no one to relay progress to
			t.Fatalf("sent %v without WithNotify", m)
		}
		if h != nil && h.auths() != 0 {
			t.Fatal("the caller's Authorization header was sent")
		}

		cfg.ForwardMeta = []string{"traceparent", "absent"}
		f.m.Apply(context.Background(), config(cfg))
		eventually(t, "traceparent forwarded", func() bool {
			res, err := f.m.Call(context.Background(), "up", req)
			return err == nil && text(res) == `{"traceparent":"00-abc-def-01"}`
		})
		if m := sent(notify); len(m) != 2 || m["traceparent"] != "00-abc-def-01" || m["progressToken"] == 1.0 {
			t.Fatalf("sent %v", m)
		}
	})
}

func TestListChanged(t *testing.T) {
	transports(t, func(t *testing.T, f *fixture, _ *httpUpstream, _ Server) {
		f.drain()
		if _, err := f.m.Call(context.Background(), "up", callReq("add_tool", map[string]any{"name": "extra"})); err != nil {
			t.Fatal(err)
		}
		f.awaitChange(t)
		eventually(t, "the new tool listed", func() bool {
			tools, _ := f.m.Tools("up")
			return slices.ContainsFunc(tools, func(x mcp.Tool) bool { return x.Name == "extra" })
		})
		res, err := f.m.Call(context.Background(), "up", callReq("extra", nil))
		if err != nil || text(res) != "extra" {
			t.Fatalf("%v %v", res, err)
		}
	})
}

// TestListChangedStorm: a burst of list_changed from a server is one
// re-list of its tools once it has settled, and one change told if the list
// changed, none if it did not. The test ends the bursts itself (the quiet
// time is too long to), once every list_changed was heard; a last change
// (a tool added, one list_changed) shows that nothing else was told.
func TestListChangedStorm(t *testing.T) {
	for _, add := range []bool{true, false} {
		t.Run(fmt.Sprintf("changed=%v", add), func(t *testing.T) {
			t.Parallel()
			heard := make(chan struct{}, 10000)
			settle := make(chan struct{})
			relisted := make(chan bool, 100)
			f := newFixture(t)
			f.m.quiet, f.m.most = time.Hour, time.Hour
			f.m.hooks = &testHooks{
				heard:    func() { heard <- struct{}{} },
				settle:   settle,
				relisted: func(changed bool) { relisted <- changed },
			}
			f.m.Apply(context.Background(), config(stdioServer(t, "up")))
			f.up(t, "up")
			lists := func() int {
				n, err := strconv.Atoi(callText(t, f.m, "up", "lists", nil))
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			before := lists()
			f.drain()
			burst := func(n int, args map[string]any, tool string) {
				t.Helper()
				callText(t, f.m, "up", tool, args)
				for range n {
					select {
					case <-heard:
					case <-time.After(time.Minute):
						t.Fatal("a list_changed was not heard")
					}
				}
				select {
				case settle <- struct{}{}:
				case <-time.After(time.Minute):
					t.Fatal("not settling")
				}
			}
			relist := func() bool {
				t.Helper()
				select {
				case c := <-relisted:
					return c
				case <-time.After(time.Minute):
					t.Fatal("no re-list")
				}
				return false
			}

			const n = 2000
			heardN := n
			if add {
				heardN++ // mcp-go's own, for the tool added
			}
			burst(heardN, map[string]any{"n": n, "add": add}, "storm")
			if changed := relist(); changed != add {
				t.Fatalf("the re-list after the burst: changed %v", changed)
			}
			if add {
				f.awaitChange(t)
				if tools, _ := f.m.Tools("up"); !slices.ContainsFunc(tools, func(x mcp.Tool) bool { return x.Name == "stormed" }) {
					t.Fatal("the tool added is not listed")
				}
			}
			if got := lists(); got != before+1 {
				t.Fatalf("%d re-lists for a burst of %d list_changed, want 1", got-before, heardN)
			}

			burst(1, map[string]any{"name": "last"}, "add_tool")
			if !relist() {
				t.Fatal("the last change: not changed")
			}
			f.awaitChange(t)
			if got := lists(); got != before+2 {
				t.Fatalf("%d re-lists in all, want 2", got-before)
			}
			select {
			case <-f.changes:
				t.Fatal("a change told once more")
			case <-heard:
				t.Fatal("a list_changed more than were sent")
			case c := <-relisted:
				t.Fatalf("a re-list more (changed %v)", c)
			default:
			}
		})
	}
}

// TestListChangedSettles: with the real quiet time, a burst ends in a
// re-list that brings the tool added.
func TestListChangedSettles(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.m.Apply(context.Background(), config(stdioServer(t, "up")))
	f.up(t, "up")
	f.drain()
	callText(t, f.m, "up", "storm", map[string]any{"n": 500, "add": true})
	f.awaitChange(t)
	eventually(t, "the tool added listed", func() bool {
		tools, _ := f.m.Tools("up")
		return slices.ContainsFunc(tools, func(x mcp.Tool) bool { return x.Name == "stormed" })
	})
}

func callText(t *testing.T, m *Manager, server, tool string, args map[string]any) string {
	t.Helper()
	res, err := m.Call(context.Background(), server, callReq(tool, args))
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("%s: %s", tool, text(res))
	}
	return text(res)
}

func pidOf(t *testing.T, m *Manager, server string) string {
	t.Helper()
	res, err := m.Call(context.Background(), server, callReq("pid", nil))
	if err != nil {
		t.Fatal(err)
	}
	return text(res)
}

func TestCrashRestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.m.Apply(context.Background(), config(stdioServer(t, "up")))
	f.up(t, "up")
	pid := pidOf(t, f.m, "up")
	f.drain()
	_, err := f.m.Call(context.Background(), "up", callReq("crash", nil))
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("crash: %v", err)
	}
	eventually(t, "down", func() bool { return !f.m.Servers()[0].Up })
	_, err = f.m.Call(context.Background(), "up", callReq("echo", nil))
	if st := f.m.Servers()[0]; !st.Up {
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), `"up"`) {
			t.Fatalf("while down: %v", err)
		}
		if !strings.Contains(st.Err, "exit status 3") || len(st.Tools) == 0 {
			t.Fatalf("status while down: %+v", st)
		}
	}
	f.awaitChange(t)
	f.up(t, "up")
	if again := pidOf(t, f.m, "up"); again == pid {
		t.Fatalf("same pid %s after restart", pid)
	}
	if tools, _ := f.m.Tools("up"); len(tools) == 0 {
		t.Fatal("no tools after restart")
	}
}

func TestApplyRestartsOnlyChanged(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, b := stdioServer(t, "a"), stdioServer(t, "b")
	f.m.Apply(context.Background(), config(a, b))
	if err := f.m.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.up(t, "a")
	f.up(t, "b")
	pa, pb := pidOf(t, f.m, "a"), pidOf(t, f.m, "b")

	b2 := stdioServer(t, "b", "X", "2")
	c := stdioServer(t, "c")
	f.m.Apply(context.Background(), config(stdioServer(t, "a"), b2, c)) // a equal, b changed, c new
	f.up(t, "c")
	f.up(t, "b")
	if got := pidOf(t, f.m, "a"); got != pa {
		t.Fatalf("a restarted: %s -> %s", pa, got)
	}
	if got := pidOf(t, f.m, "b"); got == pb {
		t.Fatal("b not restarted")
	}

	f.m.Apply(context.Background(), config(b2)) // a and c removed
	if names := f.m.Servers(); len(names) != 1 || names[0].Name != "b" {
		t.Fatalf("servers %+v", names)
	}
	if _, err := f.m.Call(context.Background(), "a", callReq("echo", nil)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("removed a: %v", err)
	}
}

func TestApplyFile(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "upstreams.json")
	write := func(data string) {
		if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeServers := func(servers ...Server) {
		m := map[string]any{}
		for _, s := range servers {
			m[s.Name] = map[string]any{"command": s.Command, "args": s.Args, "env": s.Env}
		}
		b, _ := json.Marshal(map[string]any{"mcpServers": m})
		write(string(b))
	}
	ctx := context.Background()
	writeServers(stdioServer(t, "a"))
	if err := f.m.ApplyFile(ctx, file); err != nil {
		t.Fatal(err)
	}
	f.up(t, "a")
	pa := pidOf(t, f.m, "a")

	writeServers(stdioServer(t, "a"), stdioServer(t, "b"))
	if err := f.m.ApplyFile(ctx, file); err != nil {
		t.Fatal(err)
	}
	f.up(t, "b")
	pb := pidOf(t, f.m, "b")
	if pidOf(t, f.m, "a") != pa {
		t.Fatal("a restarted, its entry unchanged")
	}

	for _, bad := range []struct{ data, want string }{
		{`{"mcpServers": {"a": {"comand": "x"}}}`, `unknown field "comand"`},
		{`{"mcpServers": `, "not a JSON object"},
	} {
		write(bad.data)
		err := f.m.ApplyFile(ctx, file)
		if err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), file) {
			t.Fatalf("%s: %v", bad.data, err)
		}
		if l := f.log.String(); !strings.Contains(l, "upstreams file not applied") || !strings.Contains(l, file) {
			t.Fatalf("not logged: %s", l)
		}
		if pidOf(t, f.m, "a") != pa || pidOf(t, f.m, "b") != pb || len(f.m.Servers()) != 2 {
			t.Fatal("a broken file changed the servers")
		}
	}
	if err := f.m.ApplyFile(ctx, filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
	if len(f.m.Servers()) != 2 {
		t.Fatal("a missing file changed the servers")
	}
}

func TestStderrLogged(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.m.Apply(context.Background(), config(stdioServer(t, "loud")))
	f.up(t, "loud")
	pid := pidOf(t, f.m, "loud")
	eventually(t, "the child's stderr in the log", func() bool {
		return strings.Contains(f.log.String(), `msg="upstream stderr" upstream=loud line="test upstream starting pid=`+pid+`"`)
	})
}

func TestHTTPUnreachableRetries(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.m.Apply(context.Background(), config(Server{Name: "gone", URL: "http://127.0.0.1:1/mcp", Timeout: time.Second}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.m.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	st := f.m.Servers()[0]
	if st.Up || !strings.Contains(st.Err, "retrying") {
		t.Fatalf("status %+v", st)
	}
	_, err := f.m.Call(ctx, "gone", callReq("echo", nil))
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), `"gone"`) {
		t.Fatalf("err %v", err)
	}
}

func withToken(r mcp.CallToolRequest, token any) mcp.CallToolRequest {
	r.Params.Meta = &mcp.Meta{ProgressToken: token}
	return r
}
