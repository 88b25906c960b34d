package gate_test

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/stategate/stategate/auth"
	"github.com/stategate/stategate/auth/authtest"
	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/store"
)

const (
	testIssuer   = "https://issuer.example/realms/ops"
	testAudience = "https://stategate.example/mcp"
)

// whoami is a host's tool on the gate's server: it answers the
// principal its call's context names (gate.PrincipalFrom), as JSON.
func whoami(g *gate.Gate) {
	g.Server().AddTool(mcp.NewTool("whoami", mcp.WithDescription("Who calls.")), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		p, ok := gate.PrincipalFrom(ctx)
		if !ok {
			return mcp.NewToolResultText("no principal"), nil
		}
		data, _ := json.Marshal(p)
		return mcp.NewToolResultText(string(data)), nil
	})
}

// echoPrincipal is a page behind Guard that answers its principal.
var echoPrincipal = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	p, ok := gate.PrincipalFrom(r.Context())
	if !ok {
		http.Error(w, "no principal", http.StatusInternalServerError)
		return
	}
	_ = json.NewEncoder(w).Encode(p)
})

type authServer struct {
	URL  string
	Gate *gate.Gate
}

// serveAuth serves a gate with no workflow and the whoami tool at /mcp,
// its metadata, and echoPrincipal behind Guard at /page; wrap, when set,
// wraps the whole.
func serveAuth(t *testing.T, o gate.HTTPOptions, wrap func(http.Handler) http.Handler) *authServer {
	t.Helper()
	g := gate.New(gate.Options{Store: store.NewMemory(), Logger: quietLog()})
	whoami(g)
	h := g.HTTPHandler(o)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle(gate.MetadataPath, h.Metadata())
	mux.Handle(gate.MetadataPath+"/mcp", h.Metadata())
	mux.Handle("/", h.Guard(echoPrincipal))
	var handler http.Handler = mux
	if wrap != nil {
		handler = wrap(mux)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)
	return &authServer{URL: srv.URL, Gate: g}
}

// verifier is a Verifier of an issuer's tokens, from a JWKS file.
func verifier(t *testing.T, iss *authtest.Issuer) *auth.Verifier {
	t.Helper()
	v, err := auth.New(context.Background(), auth.Options{Issuer: testIssuer, Audience: testAudience, JWKS: iss.WriteJWKS(t, t.TempDir()), Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func withClaims(c map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range c {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}

// principalOf calls whoami and reads the principal it answers.
func principalOf(t *testing.T, c *mcptest.Client) store.Principal {
	t.Helper()
	text, _, isErr := c.Call("whoami", nil)
	var p store.Principal
	if isErr || json.Unmarshal([]byte(text), &p) != nil {
		t.Fatalf("whoami: %v %q", isErr, text)
	}
	return p
}

func samePrincipal(a, b store.Principal) bool {
	return a.Sub == b.Sub && a.Auth == b.Auth && slices.Equal(a.Roles, b.Roles)
}

// TestJWTRefusals: every request needs a good token; each refusal is 401
// with a challenge that says what is wrong (error="invalid_token" and a
// description, none for a missing token) and where the metadata is.
func TestJWTRefusals(t *testing.T) {
	iss := authtest.NewIssuer(t, testIssuer)
	s := serveAuth(t, gate.HTTPOptions{Authenticator: verifier(t, iss), Scopes: []string{"mcp:tools"}}, nil)
	meta := `resource_metadata="` + s.URL + gate.MetadataPath + `/mcp", scope="mcp:tools"`
	good := iss.Claims("alice", testAudience)
	now := time.Now()
	other := authtest.NewIssuer(t, testIssuer)
	pubDER, err := x509.MarshalPKIXPublicKey(&iss.RSA.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	tok := iss.Token(t, jose.RS256, good)
	parts := strings.Split(tok, ".")
	forged, _ := json.Marshal(withClaims(good, "sub", "mallory"))
	badSig := parts[0] + "." + base64.RawURLEncoding.EncodeToString(forged) + "." + parts[2]
	init := strings.Replace(initBody, "%s", "2025-06-18", 1)
	for _, c := range []struct {
		name, authz string
		want        error // nil: no token
	}{
		{"missing", "", nil},
		{"another scheme", "Basic YWxpY2U6cHc=", nil},
		{"bad signature", "Bearer " + badSig, auth.ErrSignature},
		{"wrong key", "Bearer " + other.Token(t, jose.ES256, good), auth.ErrSignature},
		{"unknown key", "Bearer " + authtest.Sign(t, jose.RS256, jose.JSONWebKey{Key: other.RSA, KeyID: "rsa-9"}, good), auth.ErrUnknownKey},
		{"expired", "Bearer " + iss.Token(t, jose.RS256, withClaims(good, "exp", now.Add(-time.Hour).Unix())), auth.ErrExpired},
		{"not yet valid", "Bearer " + iss.Token(t, jose.ES256, withClaims(good, "nbf", now.Add(time.Hour).Unix())), auth.ErrNotYetValid},
		{"wrong iss", "Bearer " + iss.Token(t, jose.RS256, withClaims(good, "iss", "https://evil.example")), auth.ErrIssuer},
		{"wrong aud", "Bearer " + iss.Token(t, jose.RS256, withClaims(good, "aud", "https://other.example/mcp")), auth.ErrAudience},
		{"alg none", "Bearer " + authtest.Unsigned(t, good), auth.ErrAlgorithm},
		{"HS256 with the public key as secret", "Bearer " + authtest.Sign(t, jose.HS256, jose.JSONWebKey{Key: pubDER, KeyID: authtest.RSAKeyID}, good), auth.ErrAlgorithm},
		{"not a JWT", "Bearer s3cret-token", auth.ErrMalformed},
	} {
		hdr := map[string]string{}
		if c.authz != "" {
			hdr["Authorization"] = c.authz
		}
		res := rawPost(t, s.URL+"/mcp", "", init, hdr)
		body, _ := io.ReadAll(res.Body)
		want := "Bearer " + meta
		if c.want != nil {
			want = `Bearer error="invalid_token", error_description="` + c.want.Error() + `", ` + meta
		}
		if res.StatusCode != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") != want {
			t.Errorf("%s: %s, WWW-Authenticate %q; want 401, %q", c.name, res.Status, res.Header.Get("WWW-Authenticate"), want)
		}
		if res.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("%s: a refused request got a session", c.name)
		}
		if c.want != nil && !strings.Contains(string(body), c.want.Error()) {
			t.Errorf("%s: the body %q does not say %q", c.name, body, c.want)
		}
	}
	if res := rawPost(t, s.URL+"/mcp", "", init, map[string]string{"Authorization": "bearer " + tok}); res.StatusCode != http.StatusOK {
		t.Errorf("a good token (scheme in lower case): %s", res.Status)
	}
}

// TestMetadata: the protected resource metadata names the resource (/mcp
// on the server's origin), the issuer, the scopes and the header; the
// challenge's link leads to it; it is behind the Host check, and there is
// none without an Authenticator.
func TestMetadata(t *testing.T) {
	iss := authtest.NewIssuer(t, testIssuer)
	s := serveAuth(t, gate.HTTPOptions{Authenticator: verifier(t, iss), Scopes: []string{"mcp:tools", "operator"}}, nil)
	res := rawPost(t, s.URL+"/mcp", "", strings.Replace(initBody, "%s", "2025-06-18", 1), nil)
	challenge := res.Header.Get("WWW-Authenticate")
	_, link, _ := strings.Cut(challenge, `resource_metadata="`)
	link, _, _ = strings.Cut(link, `"`)
	for _, c := range []struct {
		url, proto, resource string
	}{
		{link, "", s.URL + "/mcp"},
		{s.URL + gate.MetadataPath, "", s.URL + "/mcp"},
		{s.URL + gate.MetadataPath, "https", "https" + strings.TrimPrefix(s.URL, "http") + "/mcp"},
	} {
		req, _ := http.NewRequest(http.MethodGet, c.url, nil)
		if c.proto != "" {
			req.Header.Set("X-Forwarded-Proto", c.proto)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var doc mcpserver.ProtectedResourceMetadataConfig
		err = json.NewDecoder(res.Body).Decode(&doc)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || err != nil {
			t.Fatalf("GET %s: %s %v", c.url, res.Status, err)
		}
		if doc.Resource != c.resource || !slices.Equal(doc.AuthorizationServers, []string{testIssuer}) ||
			!slices.Equal(doc.BearerMethodsSupported, []string{"header"}) || !slices.Equal(doc.ScopesSupported, []string{"mcp:tools", "operator"}) {
			t.Errorf("GET %s (X-Forwarded-Proto %q): %+v", c.url, c.proto, doc)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, s.URL+gate.MetadataPath, nil)
	req.Host = "evil.example"
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusForbidden {
		t.Errorf("the metadata under a foreign Host: %v %v, want 403", res.Status, err)
	}
	none := serveAuth(t, gate.HTTPOptions{Token: "s3cret"}, nil)
	if res, err := http.Get(none.URL + gate.MetadataPath); err != nil || res.StatusCode != http.StatusNotFound {
		t.Errorf("the metadata without an Authenticator: %v %v, want 404", res.Status, err)
	}
}

// TestPrincipalReachesTools: a tool handler sees the principal of its
// call: a token's sub and roles (its roles claim and scope), over mcp-go's
// client with a bearer header, in a session and without one (2026-07-28);
// the token's holder; the anonymous principal; the principal a host's
// middleware set.
func TestPrincipalReachesTools(t *testing.T) {
	iss := authtest.NewIssuer(t, testIssuer)
	tok := iss.Token(t, jose.ES256, withClaims(iss.Claims("alice", testAudience), "roles", []string{"operator", "approver"}, "scope", "mcp:tools approver"))
	jwt := serveAuth(t, gate.HTTPOptions{Authenticator: verifier(t, iss)}, nil)
	alice := store.Principal{Sub: "alice", Roles: []string{"approver", "mcp:tools", "operator"}, Auth: "jwt"}
	for _, version := range []string{mcp.ProtocolVersion20251125, mcp.ProtocolVersion20260728} {
		c := mcptest.HTTP(t, jwt.URL+"/mcp", mcptest.Options{Version: version, Name: "auth-e2e", Header: map[string]string{"Authorization": "Bearer " + tok}})
		if p := principalOf(t, c); !samePrincipal(p, alice) {
			t.Errorf("%s: whoami %+v, want %+v", version, p, alice)
		}
	}
	tokenSrv := serveAuth(t, gate.HTTPOptions{Token: "s3cret", TokenRoles: []string{"operator"}}, nil)
	c := mcptest.HTTP(t, tokenSrv.URL+"/mcp", mcptest.Options{Name: "auth-e2e", Header: map[string]string{"Authorization": "Bearer s3cret"}})
	if p, want := principalOf(t, c), (store.Principal{Sub: "token", Roles: []string{"operator"}, Auth: "token"}); !samePrincipal(p, want) {
		t.Errorf("with --token-file: whoami %+v, want %+v", p, want)
	}
	open := serveAuth(t, gate.HTTPOptions{}, nil)
	c = mcptest.HTTP(t, open.URL+"/mcp", mcptest.Options{Name: "auth-e2e"})
	if p := principalOf(t, c); !samePrincipal(p, gate.AnonymousPrincipal()) {
		t.Errorf("without authentication: whoami %+v, want %+v", p, gate.AnonymousPrincipal())
	}
	host := store.Principal{Sub: "carol", Roles: []string{"ops"}, Auth: "host"}
	hosted := serveAuth(t, gate.HTTPOptions{}, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(gate.WithPrincipal(r.Context(), host)))
		})
	})
	c = mcptest.HTTP(t, hosted.URL+"/mcp", mcptest.Options{Name: "auth-e2e"})
	if p := principalOf(t, c); !samePrincipal(p, host) {
		t.Errorf("behind a host's middleware: whoami %+v, want %+v", p, host)
	}
}

// TestStdioPrincipal: over stdio, the principal of the context ServeStdio
// is given makes every call.
func TestStdioPrincipal(t *testing.T) {
	g := gate.New(gate.Options{Store: store.NewMemory(), Logger: quietLog(), SharedInstance: "default"})
	whoami(g)
	me := auth.Local([]string{"operator"})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	go func() {
		_ = g.ServeStdio(gate.WithPrincipal(context.Background(), me), inR, outW)
		outW.Close()
		close(done)
	}()
	t.Cleanup(func() { inW.Close(); <-done })
	c := mcptest.Start(t, client.NewClient(transport.NewIO(outR, inW, io.NopCloser(strings.NewReader("")))), mcptest.Options{Name: "stdio-auth"})
	if p := principalOf(t, c); !samePrincipal(p, me) || p.Auth != "stdio" {
		t.Errorf("over stdio: whoami %+v, want %+v", p, me)
	}
}

// getPage gets a page behind Guard, not following redirects.
func getPage(t *testing.T, target string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, target, nil)
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
	return res, string(b)
}

// TestGuardWithJWT: a browser gives an operator's JWT once as ?token=; the
// cookie it gets carries the principal (not the token) until the token
// expires; a cookie changed, or past its expiry, is refused.
func TestGuardWithJWT(t *testing.T) {
	iss := authtest.NewIssuer(t, testIssuer)
	s := serveAuth(t, gate.HTTPOptions{Authenticator: verifier(t, iss)}, nil)
	claims := withClaims(iss.Claims("olivia", testAudience), "roles", []string{"operator"})
	tok := iss.Token(t, jose.RS256, claims)
	if res, _ := getPage(t, s.URL+"/page", nil); res.StatusCode != http.StatusUnauthorized || !strings.Contains(res.Header.Get("WWW-Authenticate"), "resource_metadata=") {
		t.Fatalf("without a token: %s %q", res.Status, res.Header.Get("WWW-Authenticate"))
	}
	bad := iss.Token(t, jose.RS256, withClaims(claims, "aud", "https://other.example/mcp"))
	if res, body := getPage(t, s.URL+"/page?token="+bad, nil); res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, auth.ErrAudience.Error()) {
		t.Fatalf("?token= of another audience: %s %q", res.Status, body)
	}
	res, _ := getPage(t, s.URL+"/page?x=1&token="+tok, nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/page?x=1" {
		t.Fatalf("?token=: %s to %q", res.Status, res.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if strings.HasPrefix(c.Name, gate.TokenCookiePrefix) {
			cookie = c
		}
	}
	sig := tok[strings.LastIndex(tok, ".")+1:]
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || strings.Contains(cookie.Value, sig) || strings.Contains(cookie.Value, tok[:20]) {
		t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, and nothing of the token", cookie)
	}
	if exp := time.Unix(claims["exp"].(int64), 0); !cookie.Expires.Equal(exp) {
		t.Errorf("the cookie expires %v, want the token's expiry %v", cookie.Expires, exp)
	}
	var p store.Principal
	res, body := getPage(t, s.URL+"/page", map[string]string{"Cookie": cookie.String()})
	if res.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &p) != nil || !samePrincipal(p, store.Principal{Sub: "olivia", Roles: []string{"operator"}, Auth: "jwt"}) {
		t.Fatalf("with the cookie: %s %q", res.Status, body)
	}
	// A cookie whose principal is changed (a role added) is refused.
	payload, mac, _ := strings.Cut(cookie.Value, ".")
	data, _ := base64.RawURLEncoding.DecodeString(payload)
	changed := strings.Replace(string(data), `"operator"`, `"operator","admin"`, 1)
	forged := &http.Cookie{Name: cookie.Name, Value: base64.RawURLEncoding.EncodeToString([]byte(changed)) + "." + mac}
	if res, _ := getPage(t, s.URL+"/page", map[string]string{"Cookie": forged.String()}); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("a cookie with a role added: %s, want 401", res.Status)
	}
	// A token just expired (within the leeway: it is taken) makes a
	// cookie the server refuses at once: the expiry is the server's to
	// keep, not the browser's.
	late := iss.Token(t, jose.RS256, withClaims(claims, "exp", time.Now().Add(-5*time.Second).Unix()))
	res, _ = getPage(t, s.URL+"/page?token="+late, nil)
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) == 0 {
		t.Fatalf("?token= of a token within the leeway: %s", res.Status)
	}
	lateCookie := &http.Cookie{Name: res.Cookies()[0].Name, Value: res.Cookies()[0].Value}
	if res, _ := getPage(t, s.URL+"/page", map[string]string{"Cookie": lateCookie.String()}); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("a cookie past the token's expiry: %s, want 401", res.Status)
	}
	// The bearer header opens the pages too; the cookie does not open /mcp.
	if res, _ := getPage(t, s.URL+"/page", map[string]string{"Authorization": "Bearer " + tok}); res.StatusCode != http.StatusOK {
		t.Errorf("the page with the bearer header: %s", res.Status)
	}
	if res := rawPost(t, s.URL+"/mcp", "", strings.Replace(initBody, "%s", "2025-06-18", 1), map[string]string{"Cookie": cookie.String()}); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("/mcp with the inspector's cookie: %s, want 401", res.Status)
	}
}

// TestGuardWithoutAuth: without authentication, a page's principal is
// the anonymous one, and ?token= means nothing.
func TestGuardWithoutAuth(t *testing.T) {
	s := serveAuth(t, gate.HTTPOptions{}, nil)
	res, body := getPage(t, s.URL+"/page?token=whatever", nil)
	var p store.Principal
	if res.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &p) != nil || !samePrincipal(p, gate.AnonymousPrincipal()) {
		t.Fatalf("%s %q, want the anonymous principal", res.Status, body)
	}
}
