package inspect_test

import (
	"context"
	"html"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/internal/mcptest"
)

// oneshot is a machine that is done after one call: its instance gets the
// reset button at once.
const oneshot = `{"id":"oneshot","meta":{"handleKey":"job"},"initial":"waiting","states":{"waiting":{"on":{"GO":"finished"}},"finished":{"type":"final"}}}`

// finished serves the inspector with resets enabled and an instance
// (oneshot j-1) that is done.
func finished(t *testing.T, hopts gate.HTTPOptions) *server {
	t.Helper()
	s := start(t, hopts, true, map[string]string{"oneshot.json": oneshot})
	hdr := map[string]string{}
	if hopts.Token != "" {
		hdr["Authorization"] = "Bearer " + hopts.Token
	}
	a := &agent{mcptest.HTTP(t, s.URL+"/mcp", mcptest.Options{Name: "inspect-test", Header: hdr})}
	a.call("oneshot_go", map[string]any{"job": "j-1"})
	return s
}

// port is the port of a server's address.
func port(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

// post posts a form with the headers given, not following redirects.
func post(t *testing.T, target string, form url.Values, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

var csrfField = regexp.MustCompile(`<input type="hidden" name="csrf" value="([^"]*)">`)

// resetToken reads the reset form's token from an instance's page.
func resetToken(t *testing.T, s *server, hdr map[string]string) string {
	t.Helper()
	res := get(t, s.URL+"/inspect/oneshot/j-1", hdr)
	b := body(t, res)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the instance's page: %s %s", res.Status, b)
	}
	m := csrfField.FindStringSubmatch(b)
	if m == nil {
		t.Fatalf("the reset form carries no token:\n%s", b)
	}
	return html.UnescapeString(m[1])
}

// done reports whether oneshot j-1 is still done (not reset).
func done(t *testing.T, s *server) bool {
	t.Helper()
	st, err := s.Gate.Instances().Snapshot(context.Background(), "oneshot", "j-1")
	if err != nil {
		t.Fatal(err)
	}
	return st.Status == "done"
}

// TestResetFromAnotherPortIsRefused: a page served on another port of the
// same host is same-site (a SameSite=Strict cookie goes with its
// requests), but not the inspector's origin: its forged reset is refused,
// whatever it knows.
func TestResetFromAnotherPortIsRefused(t *testing.T) {
	s := finished(t, gate.HTTPOptions{})
	tok := resetToken(t, s, nil)
	form := url.Values{"workflow": {"oneshot"}, "handle": {"j-1"}, "csrf": {tok}}
	u, _ := url.Parse(s.URL)
	other := "http://" + net.JoinHostPort(u.Hostname(), "1") // another port of the same host
	for _, c := range []struct{ name, origin string }{
		{"another port", other},
		{"another scheme", "https://" + u.Host},
		{"localhost for 127.0.0.1", "http://localhost:" + u.Port()},
		{"null", "null"},
	} {
		res := post(t, s.URL+"/inspect/_/reset", form, map[string]string{"Origin": c.origin, "Sec-Fetch-Site": "same-site"})
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("a reset posted from %s (%s): %s, want 403", c.name, c.origin, res.Status)
		}
	}
	// Without an Origin, Fetch Metadata tells a same-site page apart.
	if res := post(t, s.URL+"/inspect/_/reset", form, map[string]string{"Sec-Fetch-Site": "same-site"}); res.StatusCode != http.StatusForbidden {
		t.Errorf("a same-site reset without an Origin: %s, want 403", res.Status)
	}
	if !done(t, s) {
		t.Fatal("a forged reset reset the instance")
	}
	// The same reset from the inspector's own page works.
	res := post(t, s.URL+"/inspect/_/reset", form, map[string]string{"Origin": s.URL, "Sec-Fetch-Site": "same-origin"})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("a reset from the inspector's page: %s %s, want 303", res.Status, body(t, res))
	}
	if done(t, s) {
		t.Fatal("the reset from the inspector's page did not reset the instance")
	}
}

// TestResetNeedsItsFormToken: a reset posted without the token its form
// carries, or with a wrong one, is refused; with it, it works.
func TestResetNeedsItsFormToken(t *testing.T) {
	s := finished(t, gate.HTTPOptions{})
	own := map[string]string{"Origin": s.URL, "Sec-Fetch-Site": "same-origin"}
	tok := resetToken(t, s, nil)
	if tok == "" {
		t.Fatal("the reset form's token is empty")
	}
	other := finished(t, gate.HTTPOptions{})
	for name, form := range map[string]url.Values{
		"no token":     {"workflow": {"oneshot"}, "handle": {"j-1"}},
		"empty token":  {"workflow": {"oneshot"}, "handle": {"j-1"}, "csrf": {""}},
		"wrong token":  {"workflow": {"oneshot"}, "handle": {"j-1"}, "csrf": {tok[:len(tok)-1] + "x"}},
		"another's":    {"workflow": {"oneshot"}, "handle": {"j-1"}, "csrf": {resetToken(t, other, nil)}},
		"for another":  {"workflow": {"oneshot"}, "handle": {"j-2"}, "csrf": {tok}},
		"token in URL": {"workflow": {"oneshot"}, "handle": {"j-1"}},
	} {
		target := s.URL + "/inspect/_/reset"
		if name == "token in URL" {
			target += "?csrf=" + url.QueryEscape(tok)
		}
		res := post(t, target, form, own)
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %s, want 403", name, res.Status)
		}
		if !done(t, s) {
			t.Fatalf("%s: the instance was reset", name)
		}
	}
	res := post(t, s.URL+"/inspect/_/reset", url.Values{"workflow": {"oneshot"}, "handle": {"j-1"}, "csrf": {tok}}, own)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("with the form's token: %s %s, want 303", res.Status, body(t, res))
	}
	if done(t, s) {
		t.Fatal("the reset with the form's token did not reset the instance")
	}
}

// tokenCookie opens a server's inspector with ?token= and returns the
// cookie it answers with.
func tokenCookie(t *testing.T, s *server, token string) *http.Cookie {
	t.Helper()
	res := get(t, s.URL+"/inspect?token="+token, nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("?token=: %s, want 303", res.Status)
	}
	var found *http.Cookie
	for _, c := range res.Cookies() {
		if strings.HasPrefix(c.Name, gate.TokenCookiePrefix) {
			found = c
		}
	}
	if found == nil {
		t.Fatalf("?token= set no %s… cookie: %v", gate.TokenCookiePrefix, res.Cookies())
	}
	return found
}

// TestCookieIsBoundToItsServer: browsers send a host's cookies to every
// port of it. The token cookie is named by its server's port, and what it
// holds opens that server only: another server with the same token (on
// another port, or another process) refuses it, under either name.
func TestCookieIsBoundToItsServer(t *testing.T) {
	const token = "s3cret"
	a := start(t, gate.HTTPOptions{Token: token}, false, nil)
	b := start(t, gate.HTTPOptions{Token: token}, false, nil)
	ca, cb := tokenCookie(t, a, token), tokenCookie(t, b, token)
	if ca.Name != gate.TokenCookiePrefix+port(t, a.URL) || cb.Name != gate.TokenCookiePrefix+port(t, b.URL) {
		t.Errorf("cookie names %q and %q, want %s and the port", ca.Name, cb.Name, gate.TokenCookiePrefix)
	}
	if strings.Contains(ca.Value, token) || ca.Value == cb.Value {
		t.Errorf("the cookies hold %q and %q: want neither the token nor one value for both", ca.Value, cb.Value)
	}
	if res := get(t, a.URL+"/inspect", map[string]string{"Cookie": ca.String()}); res.StatusCode != http.StatusOK {
		t.Fatalf("server a with its own cookie: %s", res.Status)
	}
	replayed := []*http.Cookie{ca, {Name: cb.Name, Value: ca.Value}}
	for _, c := range replayed {
		if res := get(t, b.URL+"/inspect", map[string]string{"Cookie": c.String()}); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("server b with a's cookie as %s: %s, want 401", c.Name, res.Status)
		}
	}
	// Under another Host (another origin of the same server) it is no
	// good either.
	if res := get(t, a.URL+"/inspect", map[string]string{"Cookie": ca.String(), "Host": "localhost:" + port(t, a.URL)}); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("server a's cookie under another Host: %s, want 401", res.Status)
	}
	// Both cookies live side by side in one browser: each server still
	// takes its own when it gets both.
	both := ca.String() + "; " + cb.String()
	for _, s := range []*server{a, b} {
		if res := get(t, s.URL+"/inspect", map[string]string{"Cookie": both}); res.StatusCode != http.StatusOK {
			t.Errorf("%s with both cookies: %s", s.URL, res.Status)
		}
	}
}

// TestCrossSiteSubresourcesAreRefused: a page of another port (same-site)
// or site may link to the inspector, but not load its event stream or
// pages as subresources (a no-cors request carries no Origin): Fetch
// Metadata tells them apart.
func TestCrossSiteSubresourcesAreRefused(t *testing.T) {
	s := start(t, gate.HTTPOptions{}, false, nil)
	for _, c := range []struct {
		path, site, mode, dest string
		want                   int
	}{
		{"/inspect/_/events", "same-site", "no-cors", "empty", http.StatusForbidden},
		{"/inspect/_/events", "cross-site", "cors", "empty", http.StatusForbidden},
		{"/inspect", "same-site", "no-cors", "image", http.StatusForbidden},
		{"/inspect", "same-site", "navigate", "iframe", http.StatusForbidden},
		{"/inspect", "cross-site", "navigate", "document", http.StatusOK},
		{"/inspect", "none", "navigate", "document", http.StatusOK},
		{"/inspect", "same-origin", "cors", "empty", http.StatusOK},
		{"/inspect/_/static/inspector.js", "same-origin", "no-cors", "script", http.StatusOK},
		{"/inspect/_/static/inspector.js", "same-site", "no-cors", "script", http.StatusForbidden},
	} {
		hdr := map[string]string{"Sec-Fetch-Site": c.site, "Sec-Fetch-Mode": c.mode, "Sec-Fetch-Dest": c.dest}
		res := get(t, s.URL+c.path, hdr)
		res.Body.Close() // the event stream lasts
		if res.StatusCode != c.want {
			t.Errorf("GET %s, %s %s %s: %s, want %d", c.path, c.site, c.mode, c.dest, res.Status, c.want)
		}
	}
}
