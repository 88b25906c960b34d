package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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
	deadline := time.Now().Add(10 * time.Second)
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
	f.m = New(Options{
		Log: slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnChange: func() {
			select {
			case f.changes <- struct{}{}:
			default:
			}
		},
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
	case <-time.After(10 * time.Second):
		t.Fatal("OnChange was not called")
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
		case <-time.After(10 * time.Second):
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

func TestProgressAndLogRelay(t *testing.T) {
	transports(t, func(t *testing.T, f *fixture, _ *httpUpstream, _ Server) {
		var mu sync.Mutex
		var got []string
		sink := func(method string, params map[string]any) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, fmt.Sprintf("%s %v %v", method, params["progressToken"], params["data"]))
		}
		req := callReq("slow", map[string]any{"ms": 100})
		req.Params.Meta = &mcp.Meta{ProgressToken: 42}
		if _, err := f.m.Call(WithNotify(context.Background(), sink), "up", req); err != nil {
			t.Fatal(err)
		}
		// another call's token is not ours
		other := callReq("slow", map[string]any{"ms": 60})
		other.Params.Meta = &mcp.Meta{ProgressToken: "other"}
		if _, err := f.m.Call(context.Background(), "up", other); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		all := strings.Join(got, "\n")
		mu.Unlock()
		if !strings.Contains(all, "notifications/progress 42") || strings.Contains(all, "other") {
			t.Fatalf("progress: %s", all)
		}

		// A log message goes to the calls in progress on the server. (The
		// one the log call itself sends may come after its result: mcp-go's
		// stdio server writes notifications from a goroutine of its own.)
		logged := make(chan struct{})
		var once sync.Once
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ctx = WithNotify(ctx, func(method string, params map[string]any) {
			if method == "notifications/message" && params["data"] == "hello from upstream" && params["level"] == "warning" {
				once.Do(func() { close(logged) })
			}
		})
		done := make(chan error, 1)
		go func() {
			_, err := f.m.Call(ctx, "up", callReq("slow", map[string]any{"ms": 20000}))
			done <- err
		}()
		deadline := time.After(10 * time.Second)
	loop:
		for {
			if _, err := f.m.Call(context.Background(), "up", callReq("log", nil)); err != nil {
				t.Fatal(err)
			}
			select {
			case <-logged:
				break loop
			case <-deadline:
				t.Fatal("no log message relayed to the call in progress")
			case <-time.After(20 * time.Millisecond): // the slow call may not have started yet
			}
		}
		cancel()
		<-done
		eventually(t, "the upstream's log message in the log", func() bool {
			return strings.Contains(f.log.String(), `level=WARN msg="upstream log" upstream=up logger=test data="hello from upstream"`)
		})
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

func TestWatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "upstreams.json")
	entry := func(s Server) map[string]any {
		return map[string]any{"command": s.Command, "args": s.Args, "env": s.Env}
	}
	write := func(data []byte) { // as editors do: a new file renamed over the old
		tmp := filepath.Join(dir, ".tmp")
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	writeServers := func(servers ...Server) {
		m := map[string]any{}
		for _, s := range servers {
			m[s.Name] = entry(s)
		}
		b, _ := json.Marshal(map[string]any{"mcpServers": m})
		write(b)
	}
	writeServers(stdioServer(t, "a"))
	c, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	f.m.Apply(context.Background(), c)
	ctx, cancel := context.WithCancel(context.Background())
	watching := make(chan error, 1)
	go func() { watching <- f.m.Watch(ctx, file) }()
	t.Cleanup(func() {
		cancel()
		<-watching
	})
	f.up(t, "a")
	pa := pidOf(t, f.m, "a")

	// the watcher may start after the first write below: write until seen
	eventually(t, "b from the edited file", func() bool {
		writeServers(stdioServer(t, "a"), stdioServer(t, "b"))
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			if _, ok := f.m.Tools("b"); ok {
				return true
			}
			time.Sleep(10 * time.Millisecond)
		}
		return false
	})
	f.up(t, "b")
	pb := pidOf(t, f.m, "b")

	write([]byte(`{"mcpServers": {"a": {"comand": "x"}}}`))
	eventually(t, "the broken file logged", func() bool {
		l := f.log.String()
		return strings.Contains(l, "upstreams file not applied") && strings.Contains(l, `unknown field \"comand\"`) &&
			strings.Contains(l, file)
	})
	if pidOf(t, f.m, "a") != pa || pidOf(t, f.m, "b") != pb || len(f.m.Servers()) != 2 {
		t.Fatal("a broken file changed the servers")
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
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
