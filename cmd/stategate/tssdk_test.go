package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/stategate/stategate/auth/authtest"
)

// tsSDK returns node and the folder of testdata/tssdk with the official
// TypeScript SDK installed (npm ci, on first use), or skips.
func tsSDK(t *testing.T) (node, dir string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node")
	}
	dir, _ = filepath.Abs(filepath.Join("testdata", "tssdk"))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			t.Skip("no npm to install the TypeScript SDK")
		}
		install := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--silent")
		install.Dir = dir
		if out, err := install.CombinedOutput(); err != nil {
			t.Skipf("cannot install the TypeScript SDK (no npm registry?): %v\n%s", err, out)
		}
	}
	return node, dir
}

// serveProcess runs `stategate serve` (this test binary, as main) with
// args and returns the base URL it says it serves at (its log line), and
// a stop that interrupts it and waits for it to exit.
func serveProcess(t *testing.T, args ...string) (base string, stop func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"serve"}, args...)...)
	cmd.Env = append(os.Environ(), "STATEGATE_RUN_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Signal(os.Interrupt)
			_ = cmd.Wait()
		}
	}
	t.Cleanup(stop)
	lines := bufio.NewScanner(stderr)
	var seen []string
	for base == "" && lines.Scan() {
		seen = append(seen, lines.Text())
		if _, u, ok := strings.Cut(lines.Text(), `msg="serving MCP over Streamable HTTP" url=`); ok {
			u, _, _ = strings.Cut(u, " ")
			base = strings.TrimSuffix(u, "/mcp")
		}
	}
	if base == "" {
		t.Fatalf("serve did not say where it serves (%v):\n%s", lines.Err(), strings.Join(seen, "\n"))
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	return base, stop
}

// TestAuthorityWithTheTypeScriptSDK walks the bundled expense claim
// against a real `serve --http` with JWTs (keys made here, a JWKS file),
// as clients of the official TypeScript SDK: an agent's token (no roles)
// submits and can neither see nor call approve (FORBIDDEN naming the
// role), nor forge a principal; an approver cannot approve the claim she
// submitted (REJECTED by the four-eyes guard) while another can; the
// payer's human declines (DECLINED, nothing moves), then accepts (paid,
// asked "Pay 120 to ACME?"); a client that cannot ask its human is
// answered PENDING with the inspector's link, where an operator approves
// it. The trail (state history, after the server stops) names who did
// what and who confirmed.
func TestAuthorityWithTheTypeScriptSDK(t *testing.T) {
	node, dir := tsSDK(t)
	const issuer, audience = "https://issuer.example/realms/ops", "https://stategate.example/mcp"
	iss := authtest.NewIssuer(t, issuer)
	jwks := iss.WriteJWKS(t, t.TempDir())
	token := func(sub string, roles ...string) string {
		c := iss.Claims(sub, audience)
		if len(roles) > 0 {
			c["roles"] = roles
		}
		return iss.Token(t, jose.RS256, c)
	}
	tokens := map[string]string{"agent": token("agent"), "alice": token("alice", "approver"), "bob": token("bob", "approver"),
		"pat": token("pat", "payer"), "olivia": token("olivia", "operator")}
	machines := t.TempDir()
	src, err := os.ReadFile(filepath.Join("..", "..", "machines", "expense.ts"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(machines, "expense.ts"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	base, stop := serveProcess(t, "--machines", machines, "--data", data, "--upstreams", "none", "--http", "127.0.0.1:0",
		"--auth-issuer", issuer, "--auth-audience", audience, "--auth-jwks", jwks)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	walk := exec.CommandContext(ctx, node, filepath.Join(dir, "authority.mjs"), base+"/mcp")
	tj, _ := json.Marshal(tokens)
	walk.Env = append(os.Environ(), "TOKENS="+string(tj))
	var stderr bytes.Buffer
	walk.Stderr = &stderr
	out, err := walk.Output()
	if err != nil {
		t.Fatalf("the TypeScript walk failed: %v\n%s\n%s", err, out, stderr.Bytes())
	}
	type step struct {
		Step    string   `json:"step"`
		IsError bool     `json:"isError"`
		Code    string   `json:"code"`
		State   any      `json:"state"`
		Text    string   `json:"text"`
		Tools   []string `json:"tools"`
		Who     string   `json:"who"`
		Asked   []string `json:"asked"`
	}
	t.Logf("the walk:\n%s", out)
	steps := map[string]step{}
	for line := range strings.Lines(string(out)) {
		var s step
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("the walk printed %q: %v", line, err)
		}
		steps[s.Step] = s
	}
	want := func(name, code string, state any, text string) {
		t.Helper()
		s, ok := steps[name]
		switch {
		case !ok:
			t.Errorf("%s: not done", name)
		case s.Code != code || (code == "") == s.IsError:
			t.Errorf("%s: %s (isError %v), want %q: %s", name, s.Code, s.IsError, code, s.Text)
		case state != nil && s.State != state:
			t.Errorf("%s: in state %v, want %v", name, s.State, state)
		case !strings.Contains(s.Text, text):
			t.Errorf("%s: %q does not say %q", name, s.Text, text)
		}
	}
	want("agent submits e1", "", "review", "")
	if slices.Contains(steps["agent lists"].Tools, "expense_approve") {
		t.Errorf("expense_approve listed to the agent: %v", steps["agent lists"].Tools)
	}
	want("agent approves e1", "FORBIDDEN", nil, "needs the role approver")
	want("agent approves e1 as a forged approver", "FORBIDDEN", nil, "agent holds none")
	if who := steps["e3 submitted by"].Who; who != "agent" {
		t.Errorf("a forged principal reached the machine: e3 submitted by %q", who)
	}
	want("alice approves e2", "REJECTED", nil, "the guard notTheSubmitter said no")
	want("bob approves e2", "", "approved", "")
	want("bob approves e1", "", "approved", "")
	want("pat pays e1, declined", "DECLINED", nil, "declined expense_pay")
	want("pat pays e1, accepted", "", "paid", "")
	if asked := steps["pat was asked"].Asked; !slices.Equal(asked, []string{"Pay 120 to ACME?", "Pay 120 to ACME?"}) {
		t.Errorf("pat's humans were asked %q", asked)
	}
	want("pat pays e2 from a client that cannot ask", "PENDING", nil, base+"/inspect/expense/e2")

	// An operator approves e2's payment in the inspector.
	bearer := map[string]string{"Authorization": "Bearer " + tokens["olivia"]}
	page := httpDo(t, http.MethodGet, base+"/inspect/expense/e2", nil, bearer)
	m := regexp.MustCompile(`name="call" value="([^"]*)"><input type="hidden" name="csrf" value="([^"]*)">`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the operator's page has no approval form:\n%s", page)
	}
	form := url.Values{"workflow": {"expense"}, "handle": {"e2"}, "call": {html.UnescapeString(m[1])}, "csrf": {html.UnescapeString(m[2])},
		"decision": {"approve"}, "comment": {"called the payee"}}
	bearer["Origin"] = base
	httpDo(t, http.MethodPost, base+"/inspect/_/approve", form, bearer)

	stop()
	history := func(handle string) string {
		cmd := exec.Command(os.Args[0], "state", "history", "expense", handle, "--data", data)
		cmd.Env = append(os.Environ(), "STATEGATE_RUN_MAIN=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("state history %s: %v\n%s", handle, err, out)
		}
		return string(out)
	}
	h1 := history("e1")
	for _, s := range []string{"expense_submit", "by agent (jwt)", "expense_approve", "by bob (jwt)", "expense_pay", "by pat (jwt)", "confirmed by pat (elicitation): checked the invoice"} {
		if !strings.Contains(h1, s) {
			t.Errorf("e1's history does not say %q:\n%s", s, h1)
		}
	}
	h2 := history("e2")
	if !strings.Contains(h2, "confirmed by olivia (operator): called the payee") || !strings.Contains(h2, `"paid"`) {
		t.Errorf("e2's history does not name the operator, or was not paid:\n%s", h2)
	}
}

// httpDo makes a request (a form when given) and returns its body; it
// fails the test unless the answer is 2xx or 303.
func httpDo(t *testing.T, method, target string, form url.Values, hdr map[string]string) string {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 && res.StatusCode != http.StatusSeeOther {
		t.Fatalf("%s %s: %s %s", method, target, res.Status, b)
	}
	return string(b)
}
