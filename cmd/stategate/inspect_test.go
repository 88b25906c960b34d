package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/stategate/stategate/auth/authtest"
	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/internal/mcptest"
)

// besideStdio starts serve over stdio as a desktop client does, with
// flags, and connects an MCP session to it; it returns the session and
// the inspector's address as serve logged it (stderr).
func besideStdio(t *testing.T, flags ...string) (*mcptest.Client, string) {
	t.Helper()
	args := append([]string{"serve", "--memory", "--machines", "../../machines", "--upstreams", "none"}, flags...)
	pr, pw := io.Pipe()
	tr := transport.NewStdioWithOptions(os.Args[0], []string{"STATEGATE_RUN_MAIN=1"}, args, transport.WithCommandStderrWriter(pw))
	urls := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(pr)
		for lines.Scan() {
			if _, u, ok := strings.Cut(lines.Text(), `msg=inspector url=`); ok {
				u, _, _ = strings.Cut(u, " ")
				urls <- u
			}
		}
		close(urls)
	}()
	t.Cleanup(func() { pw.Close() })
	c := mcptest.Start(t, client.NewClient(tr), mcptest.Options{Name: "desktop"})
	u, ok := <-urls
	if !ok {
		t.Fatal("serve --inspect did not log the inspector's address")
	}
	return c, u
}

// do makes a request, not following redirects.
func do(t *testing.T, method, target string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, target, nil)
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
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// TestInspectBesideStdio runs serve over stdio with --inspect and
// --token-file, as a desktop client starts it: the inspector's port
// takes the token (and the cookie it makes of ?token=), refuses a
// foreign Host or Origin and serves no /mcp; the status tool links to the
// instance's page, whose event stream tells of the agent's next call,
// after which the page shows it; when the client closes stdin, the
// server exits and the port closes.
func TestInspectBesideStdio(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, base := besideStdio(t, "--inspect", "127.0.0.1:0", "--token-file", tokenFile)
	if !strings.HasPrefix(base, "http://127.0.0.1:") || !strings.HasSuffix(base, "/inspect") {
		t.Fatalf("the inspector is at %q", base)
	}
	origin := strings.TrimSuffix(base, "/inspect")
	bearer := map[string]string{"Authorization": "Bearer s3cret"}

	// The checks of --http's port.
	if res, b := do(t, "GET", base, nil); res.StatusCode != http.StatusUnauthorized || !strings.Contains(b, "?token=TOKEN") {
		t.Errorf("without the token: %s %q, want 401 saying how a browser signs in", res.Status, b)
	}
	if res, _ := do(t, "GET", base, map[string]string{"Authorization": "Bearer wrong"}); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("with a wrong token: %s, want 401", res.Status)
	}
	if res, _ := do(t, "GET", base, map[string]string{"Authorization": "Bearer s3cret", "Host": "evil.example"}); res.StatusCode != http.StatusForbidden {
		t.Errorf("with a foreign Host: %s, want 403", res.Status)
	}
	if res, _ := do(t, "GET", base, map[string]string{"Authorization": "Bearer s3cret", "Origin": "http://evil.example"}); res.StatusCode != http.StatusForbidden {
		t.Errorf("with a foreign Origin: %s, want 403", res.Status)
	}
	if res, _ := do(t, "POST", origin+"/mcp", bearer); res.StatusCode != http.StatusNotFound && res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /mcp on the inspector's port: %s, want none served", res.Status)
	}
	res, _ := do(t, "GET", base+"?token=s3cret", nil)
	var cookie *http.Cookie
	for _, ck := range res.Cookies() {
		if strings.HasPrefix(ck.Name, gate.TokenCookiePrefix) {
			cookie = ck
		}
	}
	if res.StatusCode != http.StatusSeeOther || cookie == nil {
		t.Fatalf("?token=: %s, cookie %v; want 303 and the cookie", res.Status, cookie)
	}
	browser := map[string]string{"Cookie": cookie.String()}
	if res, b := do(t, "GET", base, browser); res.StatusCode != http.StatusOK || !strings.Contains(b, "invoice.json") {
		t.Fatalf("the index with the cookie: %s", res.Status)
	}

	// The status tool over stdio links to the shared instance's page.
	_, sc, _ := c.Call("invoice_status", nil)
	link, _ := sc["inspect"].(string)
	if link != base+"/invoice/default" {
		t.Fatalf("the status links %q, want %s/invoice/default", link, base)
	}

	// The page's event stream, open before the call: its first bytes
	// come once it follows the changes.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/_/events", nil)
	req.Header.Set("Cookie", cookie.String())
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK || stream.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("the event stream: %s %s", stream.Status, stream.Header.Get("Content-Type"))
	}
	events := bufio.NewReader(stream.Body)
	if line, err := events.ReadString('\n'); err != nil || !strings.HasPrefix(line, "retry: ") {
		t.Fatalf("the event stream begins %q, %v", line, err)
	}
	c.Call("invoice_add_line", map[string]any{"description": "Design", "amount": 100})
	for {
		line, err := events.ReadString('\n')
		if err != nil {
			t.Fatalf("the event stream ended before it told of the call: %v", err)
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var m struct{ Kind, Workflow, Handle string }
		if json.Unmarshal([]byte(data), &m) == nil && m.Kind == "instance" && m.Workflow == "invoice" && m.Handle == "default" {
			break
		}
	}
	res, page := do(t, "GET", link+"?fragment=1", browser)
	if res.StatusCode != http.StatusOK || !strings.Contains(page, `<td class="tool"><code>invoice_add_line</code></td>`) || !strings.Contains(page, `<tr data-tool="invoice_submit">`) {
		t.Fatalf("after the call the page does not show it, or the tools it allows now: %s\n%s", res.Status, page)
	}
	if !strings.Contains(page, "(the agent is ") || !strings.Contains(page, " (stdio))") {
		t.Errorf("the page does not say the agent is stdio's user")
	}

	// The client goes: the server exits, and the port closes.
	cancel()
	if err := c.Close(); err != nil {
		t.Fatalf("closing the client: %v", err)
	}
	if conn, err := net.Dial("tcp", strings.TrimPrefix(origin, "http://")); err == nil {
		conn.Close()
		t.Errorf("the inspector's port is open after the server exited")
	}
}

// TestInspectFlags: --inspect is refused with --http (whose port serves
// the inspector already), a busy port is an error naming the flag that
// leaves no store behind, and --auth-issuer's JWTs guard the inspector
// beside stdio, whose principal keeps --roles.
func TestInspectFlags(t *testing.T) {
	if _, err := (&serveCmd{HTTP: "0", Inspect: "0"}).listenInspect(); err == nil || !strings.Contains(err.Error(), "--inspect is for a stdio server: with --http the inspector is served at http://127.0.0.1:0/inspect already") {
		t.Errorf("--inspect with --http: %v", err)
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	data := filepath.Join(t.TempDir(), "state")
	addr := busy.Addr().String()
	if _, stderr, code := runMain(t, "serve", "--machines", "../../machines", "--data", data, "--inspect", addr); code != 1 || !strings.Contains(stderr, "stategate: --inspect "+addr+": listen tcp "+addr) {
		t.Errorf("a busy port: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("a store was made at %s (%v)", data, err)
	}

	iss := authtest.NewIssuer(t, "https://issuer.example/realms/ops")
	jwt := AuthFlags{AuthIssuer: iss.URL, AuthAudience: "https://stategate.example/mcp", AuthJWKS: iss.WriteJWKS(t, t.TempDir()), InspectRole: "operator", Roles: []string{"approver"}}
	c := serveCmd{Inspect: "0", AuthFlags: jwt}
	pr, err := c.principals(context.Background(), slog.New(slog.DiscardHandler))
	if err != nil || pr.verifier == nil || pr.resetRole != "operator" || !slices.Equal(pr.stdio.Roles, []string{"approver"}) {
		t.Errorf("JWTs beside stdio: %+v %v", pr, err)
	}
	if _, err := (&serveCmd{AuthFlags: jwt}).principals(context.Background(), slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "--auth-issuer needs --http or --inspect") {
		t.Errorf("JWTs over stdio alone: %v", err)
	}
}

// TestNextStepsMentionTheInspector: the next steps serve and init print
// say how to watch a desktop client's workflows.
func TestNextStepsMentionTheInspector(t *testing.T) {
	if s := nextSteps("/m", false); !strings.Contains(s, `add "--inspect", "127.0.0.1:3001" to the args and open http://127.0.0.1:3001/inspect`) {
		t.Errorf("the next steps:\n%s", s)
	}
}

// TestInspectBesideStdioWithJWTs: with --auth-issuer, the inspector
// beside stdio wants an issuer's JWT, and says who it names; the MCP
// calls over stdio are still the local user's.
func TestInspectBesideStdioWithJWTs(t *testing.T) {
	iss := authtest.NewIssuer(t, "https://issuer.example/realms/ops")
	jwks := iss.WriteJWKS(t, t.TempDir())
	c, base := besideStdio(t, "--inspect", "0", "--auth-issuer", iss.URL, "--auth-audience", "https://stategate.example/mcp", "--auth-jwks", jwks, "--roles", "clerk")
	if res, _ := do(t, "GET", base, nil); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a JWT: %s, want 401", res.Status)
	}
	tok := iss.Token(t, jose.ES256, iss.Claims("alice", "https://stategate.example/mcp"))
	if res, page := do(t, "GET", base, map[string]string{"Authorization": "Bearer " + tok}); res.StatusCode != http.StatusOK || !strings.Contains(page, "alice (jwt)") {
		t.Errorf("with a JWT: %s, want 200 saying who it is", res.Status)
	}
	_, sc, _ := c.Call("invoice_add_line", map[string]any{"description": "Design", "amount": 100})
	if sc["state"] != "draft" {
		t.Fatalf("a call over stdio: %v", sc)
	}
}
