package inspect_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/stategate/stategate/auth"
	"github.com/stategate/stategate/auth/authtest"
	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/inspect"
	"github.com/stategate/stategate/internal/mcptest"
)

const (
	testIssuer   = "https://issuer.example/realms/ops"
	testAudience = "https://stategate.example/mcp"
)

// finishedBy serves the inspector with resets that need the operator
// role, and an instance (oneshot j-1) that an agent with the bearer
// token given finished.
func finishedBy(t *testing.T, hopts gate.HTTPOptions, agentToken string) *server {
	t.Helper()
	s := startWith(t, hopts, inspect.Options{Reset: true, ResetRole: "operator"}, map[string]string{"oneshot.json": oneshot})
	a := &agent{mcptest.HTTP(t, s.URL+"/mcp", mcptest.Options{Name: "inspect-test", Header: map[string]string{"Authorization": "Bearer " + agentToken}})}
	a.call("oneshot_go", map[string]any{"job": "j-1"})
	return s
}

// TestResetNeedsTheRole: with JWTs, anyone with a good token may open
// the inspector (an operator's token given once as ?token=), but only a
// principal with the reset role gets the button and may reset; another
// is told which role it lacks, and its reset is refused even with the
// form's token.
func TestResetNeedsTheRole(t *testing.T) {
	iss := authtest.NewIssuer(t, testIssuer)
	v, err := auth.New(context.Background(), auth.Options{Issuer: testIssuer, Audience: testAudience, JWKS: iss.WriteJWKS(t, t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	claims := iss.Claims("agent-7", testAudience)
	s := finishedBy(t, gate.HTTPOptions{Authenticator: v}, iss.Token(t, jose.ES256, claims))
	operator := iss.Token(t, jose.RS256, withRoles(iss.Claims("olivia", testAudience), "roles", []string{"operator"}))
	viewer := iss.Token(t, jose.RS256, withRoles(iss.Claims("victor", testAudience), "scope", "openid inspect"))
	opCookie := map[string]string{"Cookie": tokenCookie(t, s, operator).String()}
	viewCookie := map[string]string{"Cookie": tokenCookie(t, s, viewer).String()}

	if res := get(t, s.URL+"/inspect/oneshot/j-1", nil); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a token: %s, want 401", res.Status)
	}
	page := body(t, get(t, s.URL+"/inspect/oneshot/j-1", viewCookie))
	if strings.Contains(page, `name="csrf"`) || !strings.Contains(page, "needs the role <code>operator</code>") ||
		!strings.Contains(page, html.EscapeString("victor (jwt; roles inspect, openid)")) {
		t.Fatalf("the viewer's page: want no reset form, the role it lacks, and who it is:\n%s", page)
	}
	tok := resetToken(t, s, opCookie) // the operator's page has the form
	form := url.Values{"workflow": {"oneshot"}, "handle": {"j-1"}, "csrf": {tok}}
	own := func(h map[string]string) map[string]string {
		return map[string]string{"Cookie": h["Cookie"], "Origin": s.URL, "Sec-Fetch-Site": "same-origin"}
	}
	res := post(t, s.URL+"/inspect/_/reset", form, own(viewCookie))
	if b := body(t, res); res.StatusCode != http.StatusForbidden || !strings.Contains(b, "needs the role operator") || !strings.Contains(b, "victor") {
		t.Fatalf("the viewer's reset: %s %q, want 403 naming the role and who it is", res.Status, b)
	}
	bearer := map[string]string{"Authorization": "Bearer " + viewer, "Origin": s.URL}
	if res := post(t, s.URL+"/inspect/_/reset", form, bearer); res.StatusCode != http.StatusForbidden {
		t.Fatalf("the viewer's reset with its bearer header: %s, want 403", res.Status)
	}
	if res := post(t, s.URL+"/inspect/_/reset", form, map[string]string{"Origin": s.URL}); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a reset with no token: %s, want 401", res.Status)
	}
	if !done(t, s) {
		t.Fatal("a refused reset reset the instance")
	}
	if res := post(t, s.URL+"/inspect/_/reset", form, own(opCookie)); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the operator's reset: %s %s, want 303", res.Status, body(t, res))
	}
	if done(t, s) {
		t.Fatal("the operator's reset did not reset the instance")
	}
}

// TestResetByTheTokensHolder: with --token-file, the token's holder has
// the roles it was given (--roles): without the reset role it cannot
// reset; with it, it can.
func TestResetByTheTokensHolder(t *testing.T) {
	for _, c := range []struct {
		roles []string
		want  int
	}{
		{nil, http.StatusForbidden},
		{[]string{"viewer"}, http.StatusForbidden},
		{[]string{"operator"}, http.StatusSeeOther},
	} {
		s := finishedBy(t, gate.HTTPOptions{Token: "s3cret", TokenRoles: c.roles}, "s3cret")
		hdr := map[string]string{"Authorization": "Bearer s3cret"}
		page := body(t, get(t, s.URL+"/inspect/oneshot/j-1", hdr))
		if has := strings.Contains(page, `name="csrf"`); has != (c.want == http.StatusSeeOther) {
			t.Errorf("roles %q: the page has a reset form: %v", c.roles, has)
		}
		// The form's token is the same for every page of a server: read
		// it from a page with the role, or forge none.
		m := csrfField.FindStringSubmatch(page)
		tok := ""
		if m != nil {
			tok = html.UnescapeString(m[1])
		}
		form := url.Values{"workflow": {"oneshot"}, "handle": {"j-1"}, "csrf": {tok}}
		res := post(t, s.URL+"/inspect/_/reset", form, map[string]string{"Authorization": "Bearer s3cret", "Origin": s.URL})
		if res.StatusCode != c.want {
			t.Errorf("roles %q: the reset: %s, want %d", c.roles, res.Status, c.want)
		}
		if done(t, s) != (c.want != http.StatusSeeOther) {
			t.Errorf("roles %q: done %v after the reset's %s", c.roles, done(t, s), res.Status)
		}
	}
}

func withRoles(c map[string]any, k string, v any) map[string]any {
	c[k] = v
	return c
}
