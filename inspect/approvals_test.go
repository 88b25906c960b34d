package inspect_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/stategate/stategate/auth"
	"github.com/stategate/stategate/auth/authtest"
	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/inspect"
	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/store"
)

// vault opens only with a keyholder's approval.
const vault = `{"id":"vault","initial":"closed","states":{
  "closed":{"on":{"OPEN":{"target":"open","meta":{"tool":{"approval":"keyholder","confirm":"Open the vault for {reason}?",
    "inputSchema":{"type":"object","properties":{"reason":{"type":"string"}},"required":["reason"]}}}}}},
  "open":{"on":{"CLOSE":"closed"}}}}`

var approvalForm = regexp.MustCompile(`(?s)<form class="approve".*?name="call" value="([^"]*)"><input type="hidden" name="csrf" value="([^"]*)">`)

// TestApprovalInTheInspector walks an operator's approval with real
// tokens: an agent's call waits (PENDING); the index lists it with who
// called; the agent itself, though it holds the role, and a viewer
// without it see the call and its arguments but no form, and are
// refused; a keyholder approves with a comment, the instance moves, the
// agent's session is told, and the trail names the agent and the
// keyholder; the same form again settles nothing. Another call is
// declined: nothing moves.
func TestApprovalInTheInspector(t *testing.T) {
	iss := authtest.NewIssuer(t, testIssuer)
	v, err := auth.New(context.Background(), auth.Options{Issuer: testIssuer, Audience: testAudience, JWKS: iss.WriteJWKS(t, t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	s := startWith(t, gate.HTTPOptions{Authenticator: v}, inspect.Options{}, map[string]string{"vault.json": vault})
	agentTok := iss.Token(t, jose.ES256, withRoles(iss.Claims("agent-7", testAudience), "roles", []string{"keyholder"}))
	agent := mcptest.HTTP(t, s.URL+"/mcp", mcptest.Options{Name: "agent", Listen: true, Header: map[string]string{"Authorization": "Bearer " + agentTok}})
	text, sc, isErr := agent.Call("vault_open", map[string]any{"reason": "the <audit>"})
	if !isErr || sc["error"] != "PENDING" {
		t.Fatalf("open: %s %v", text, sc)
	}
	handle, _ := sc["handle"].(string)
	page := s.URL + "/inspect/vault/" + url.PathEscape(handle)
	if link, _ := sc["inspect"].(string); link != page {
		t.Errorf("PENDING links %q, want %q", link, page)
	}

	cookie := func(tok string) map[string]string {
		return map[string]string{"Cookie": tokenCookie(t, s, tok).String()}
	}
	own := func(h map[string]string) map[string]string {
		return map[string]string{"Cookie": h["Cookie"], "Origin": s.URL, "Sec-Fetch-Site": "same-origin"}
	}
	kim := cookie(iss.Token(t, jose.RS256, withRoles(iss.Claims("kim", testAudience), "roles", []string{"keyholder"})))
	viewer := cookie(iss.Token(t, jose.RS256, iss.Claims("victor", testAudience)))
	self := cookie(agentTok)

	index := body(t, get(t, s.URL+"/inspect", viewer))
	if !strings.Contains(index, `id="approvals"`) || !strings.Contains(index, "agent-7 (jwt; roles keyholder)") || !strings.Contains(index, "vault_open") {
		t.Fatalf("the index lists no waiting call, or not who made it:\n%s", index)
	}
	for name, c := range map[string]struct {
		hdr  map[string]string
		says string
	}{
		"the viewer": {viewer, "victor needs the role keyholder"},
		"the caller": {self, "agent-7 called vault_open, and may not approve it too"},
	} {
		b := body(t, get(t, page, c.hdr))
		if approvalForm.MatchString(b) || !strings.Contains(b, html.EscapeString(c.says)) ||
			!strings.Contains(b, html.EscapeString(`"reason": "the <audit>"`)) || !strings.Contains(b, html.EscapeString("Open the vault for the <audit>?")) {
			t.Errorf("%s's page: want the call, its arguments, no form, and %q:\n%s", name, c.says, b)
		}
	}
	b := body(t, get(t, page, kim))
	m := approvalForm.FindStringSubmatch(b)
	if m == nil {
		t.Fatalf("the keyholder's page has no approval form:\n%s", b)
	}
	call, tok := html.UnescapeString(m[1]), html.UnescapeString(m[2])
	form := func(decision string) url.Values {
		return url.Values{"workflow": {"vault"}, "handle": {handle}, "call": {call}, "csrf": {tok}, "decision": {decision}, "comment": {"audit week"}}
	}
	for name, c := range map[string]struct {
		hdr  map[string]string
		want int
	}{
		"the viewer, with the keyholder's form":   {own(viewer), http.StatusForbidden},
		"the caller, with the keyholder's form":   {own(self), http.StatusForbidden},
		"the keyholder, from another site's page": {map[string]string{"Cookie": kim["Cookie"]}, http.StatusForbidden},
	} {
		if res := post(t, s.URL+"/inspect/_/approve", form("approve"), c.hdr); res.StatusCode != c.want {
			t.Errorf("%s: %s %s, want %d", name, res.Status, body(t, res), c.want)
		}
	}
	forged := form("approve")
	forged.Set("csrf", "forged")
	if res := post(t, s.URL+"/inspect/_/approve", forged, own(kim)); res.StatusCode != http.StatusForbidden {
		t.Errorf("a forged token: %s, want 403", res.Status)
	}
	if st := state(t, s, handle); st != "closed" {
		t.Fatalf("refused approvals moved the vault to %s", st)
	}

	agent.Drain()
	if res := post(t, s.URL+"/inspect/_/approve", form("approve"), own(kim)); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the keyholder's approval: %s %s, want 303", res.Status, body(t, res))
	}
	agent.AwaitChanged()
	if st := state(t, s, handle); st != "open" {
		t.Fatalf("after the approval the vault is %s", st)
	}
	trail, err := s.Store.Audit(context.Background(), store.Key{Machine: "vault", Handle: handle}, 10)
	if err != nil {
		t.Fatal(err)
	}
	last := trail[len(trail)-1]
	if last.Tool != "vault_open" || last.Principal == nil || last.Principal.Sub != "agent-7" || last.Confirmed == nil ||
		last.Confirmed.By.Sub != "kim" || last.Confirmed.Via != "operator" || last.Confirmed.Comment != "audit week" {
		t.Errorf("the trail's last entry: %+v (confirmed %+v)", last, last.Confirmed)
	}
	if b := body(t, get(t, page, kim)); strings.Contains(b, `id="approval"`) || !strings.Contains(b, "kim") {
		t.Errorf("after the approval the page still shows the call, or not who approved it:\n%s", b)
	}
	if res := post(t, s.URL+"/inspect/_/approve", form("approve"), own(kim)); res.StatusCode != http.StatusConflict || !strings.Contains(body(t, res), "settled meanwhile") {
		t.Errorf("the same form again: %s, want 409 saying it was settled", res.Status)
	}

	// Closed again and asked again: declined, it stays closed and the
	// agent may ask once more.
	agent.Result("vault_close", nil)
	if _, sc, _ := agent.Call("vault_open", map[string]any{"reason": "curiosity"}); sc["error"] != "PENDING" {
		t.Fatalf("the second open: %v", sc)
	}
	m = approvalForm.FindStringSubmatch(body(t, get(t, page, kim)))
	if m == nil || html.UnescapeString(m[1]) == call {
		t.Fatalf("the second call's form: %v (the first call was %s)", m, call)
	}
	call, tok = html.UnescapeString(m[1]), html.UnescapeString(m[2])
	agent.Drain()
	if res := post(t, s.URL+"/inspect/_/approve", form("decline"), own(kim)); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the decline: %s %s", res.Status, body(t, res))
	}
	agent.AwaitChanged()
	if _, sc, _ := agent.Call("vault_status", nil); sc["state"] != "closed" || sc["pending"] != nil {
		t.Errorf("after the decline: %v", sc)
	}
	if b := body(t, get(t, s.URL+"/inspect", kim)); strings.Contains(b, `id="approvals"`) {
		t.Errorf("the index still lists a waiting call:\n%s", b)
	}
}

// TestApprovalWithoutAuthentication: a server that authenticates no one
// shows a waiting call, and says an approval needs an operator's token.
func TestApprovalWithoutAuthentication(t *testing.T) {
	s := startWith(t, gate.HTTPOptions{}, inspect.Options{}, map[string]string{"vault.json": vault})
	agent := connect(t, s.URL)
	_, sc, _ := agent.Call("vault_open", map[string]any{"reason": "x"})
	handle, _ := sc["handle"].(string)
	b := body(t, get(t, s.URL+"/inspect/vault/"+url.PathEscape(handle), nil))
	if approvalForm.MatchString(b) || !strings.Contains(b, "This server authenticates no one") {
		t.Errorf("the page: want no form and why:\n%s", b)
	}
}

// state is an instance's state as the store has it.
func state(t *testing.T, s *server, handle string) string {
	t.Helper()
	st, err := s.Gate.Instances().Snapshot(context.Background(), "vault", handle)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := st.Value.(string)
	return v
}
