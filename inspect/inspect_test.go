package inspect_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/inspect"
	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/internal/watch"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
	"github.com/stategate/stategate/xstate/js"
)

// server is a running stategate HTTP server, wired as `serve --http`
// wires it: the gate's /mcp and the inspector behind the same guard.
type server struct {
	URL      string // http://127.0.0.1:PORT
	Machines string // the machines folder (watched)
	Gate     *gate.Gate
	Store    store.Store
}

// start serves the bundled invoice (and the extra files) over HTTP with
// the inspector, watching the machines folder and running timers.
func start(t testing.TB, hopts gate.HTTPOptions, reset bool, extra map[string]string) *server {
	t.Helper()
	return startWith(t, hopts, inspect.Options{Reset: reset}, extra)
}

// startWith is start with the inspector's options (their Instances,
// Library, Logger and Principal are start's).
func startWith(t testing.TB, hopts gate.HTTPOptions, iopts inspect.Options, extra map[string]string) *server {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"invoice.json", "invoice.impl.ts"} {
		data, err := os.ReadFile(filepath.Join("..", "machines", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for f, src := range extra {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st := store.NewMemory()
	g := gate.New(gate.Options{Store: st, Logger: log, InspectLink: func(w, h string) string { return inspect.Link(base+inspect.Prefix, w, h) }})
	lib := workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Loader: &xstate.Loader{Modules: &js.Host{}}, Logger: log, Serve: g.Reloaded})
	wt, err := watch.NewTree(dir, 0, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := lib.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		wt.Run(ctx, func() { _ = lib.Reload(ctx) })
	}()
	t.Cleanup(func() { cancel(); <-watching; wt.Close() })
	go func() { _ = g.RunTimers(ctx) }()
	h := g.HTTPHandler(hopts)
	iopts.Instances, iopts.Library, iopts.Logger, iopts.Principal = g.Instances(), lib, log, gate.PrincipalFrom
	ins := inspect.New(iopts)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/", h.Guard(ins))
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(ins.Close) // before srv.Close: streams end
	t.Cleanup(h.Close)
	return &server{URL: base, Machines: dir, Gate: g, Store: st}
}

// agent is an MCP client of the server.
type agent struct{ *mcptest.Client }

func connect(t testing.TB, url string) *agent {
	t.Helper()
	return &agent{mcptest.HTTP(t, url+"/mcp", mcptest.Options{Name: "inspect-test"})}
}

// call calls a tool, which must succeed, and returns its structured
// content and text.
func (a *agent) call(name string, args map[string]any) (map[string]any, string) {
	a.T().Helper()
	res := a.Result(name, args)
	if res.IsError {
		a.T().Fatalf("%s: %s", name, mcptest.Text(res))
	}
	return mcptest.Structured(res), mcptest.Text(res)
}

// get makes a plain request with the headers given.
func get(t testing.TB, url string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func body(t testing.TB, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestForeignHostAndOriginAreRefused: the inspector's pages, its event
// stream and its reset are behind the checks of /mcp.
func TestForeignHostAndOriginAreRefused(t *testing.T) {
	s := start(t, gate.HTTPOptions{}, true, nil)
	for _, path := range []string{"/", "/inspect", "/inspect/invoice", "/inspect/_/events", "/inspect/_/static/inspector.js"} {
		if res := get(t, s.URL+path, map[string]string{"Host": "evil.example"}); res.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s with Host evil.example: %s, want 403", path, res.Status)
		}
		if res := get(t, s.URL+path, map[string]string{"Origin": "http://evil.example"}); res.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s with Origin evil.example: %s, want 403", path, res.Status)
		}
	}
	res := get(t, s.URL+"/inspect", nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /inspect: %s", res.Status)
	}
	if b := body(t, res); !strings.Contains(b, "No instances yet") {
		t.Errorf("the empty inspector does not say why it is empty:\n%s", b)
	}
	if res := get(t, s.URL+"/", nil); res.StatusCode != http.StatusFound || res.Header.Get("Location") != "/inspect" {
		t.Errorf("GET /: %s to %q, want a redirect to /inspect", res.Status, res.Header.Get("Location"))
	}
	// A cross-site form posting a reset.
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/inspect/_/reset", strings.NewReader("workflow=invoice&handle=x"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example")
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusForbidden {
		t.Errorf("a reset posted from another site: %s, want 403", r.Status)
	}
	if h := res.Header.Get("Content-Security-Policy"); !strings.Contains(h, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy %q", h)
	}
}

// TestTokenInTheQueryOnce: with a token, a browser opens the inspector
// once with ?token=, and a cookie carries it after.
func TestTokenInTheQueryOnce(t *testing.T) {
	s := start(t, gate.HTTPOptions{Token: "s3cret"}, false, nil)
	if res := get(t, s.URL+"/inspect", nil); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %s, want 401", res.Status)
	}
	if res := get(t, s.URL+"/inspect?token=wrong", nil); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("with a wrong token: %s, want 401", res.Status)
	}
	if res := get(t, s.URL+"/inspect?token=s3cret", map[string]string{"Host": "evil.example"}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("the token with a foreign Host: %s, want 403", res.Status)
	}
	res := get(t, s.URL+"/inspect/invoice?token=s3cret", nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/inspect/invoice" {
		t.Fatalf("with the token: %s to %q, want 303 to /inspect/invoice", res.Status, res.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if strings.HasPrefix(c.Name, gate.TokenCookiePrefix) {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || strings.Contains(cookie.Value, "s3cret") {
		t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, not the token itself", cookie)
	}
	if res := get(t, s.URL+"/inspect", map[string]string{"Cookie": cookie.String()}); res.StatusCode != http.StatusOK {
		t.Fatalf("with the cookie: %s", res.Status)
	}
	if res := get(t, s.URL+"/inspect", map[string]string{"Authorization": "Bearer s3cret"}); res.StatusCode != http.StatusOK {
		t.Fatalf("with the bearer header: %s", res.Status)
	}
	// The cookie is the inspector's: /mcp still wants the bearer token.
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Cookie", cookie.String())
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/mcp with the inspector's cookie: %s, want 401", r.Status)
	}
}

// TestStatusLinksToTheInspector: the status tool's result links to the
// instance's page.
func TestStatusLinksToTheInspector(t *testing.T) {
	s := start(t, gate.HTTPOptions{}, false, nil)
	a := connect(t, s.URL)
	sc, text := a.call("invoice_status", nil)
	link, _ := sc["inspect"].(string)
	if !strings.HasPrefix(link, s.URL+"/inspect/invoice/session-") || !strings.Contains(text, link) {
		t.Fatalf("status: inspect %q, text %q", link, text)
	}
	res := get(t, link, nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", link, res.Status)
	}
	if b := body(t, res); !strings.Contains(b, `id="current-state"`) || !strings.Contains(b, "draft") {
		t.Errorf("the instance's page does not show its state:\n%s", b)
	}
}
