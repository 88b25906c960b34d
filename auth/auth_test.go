package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/stategate/stategate/auth"
	"github.com/stategate/stategate/auth/authtest"
	"github.com/stategate/stategate/store"
)

const (
	issuerURL = "https://issuer.example/realms/ops"
	audience  = "https://stategate.example/mcp"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// clock is a clock a test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func fileVerifier(t *testing.T, iss *authtest.Issuer, o auth.Options) *auth.Verifier {
	t.Helper()
	o.Issuer, o.Audience, o.Logger = issuerURL, audience, quiet()
	if o.JWKS == "" {
		o.JWKS = iss.WriteJWKS(t, t.TempDir())
	}
	v, err := auth.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// with returns claims with some changed (a nil value removes the claim).
func with(c map[string]any, kv ...any) map[string]any {
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

func TestVerify(t *testing.T) {
	iss := authtest.NewIssuer(t, issuerURL)
	v := fileVerifier(t, iss, auth.Options{})
	now := time.Now()
	good := iss.Claims("alice", audience)
	other := authtest.NewIssuer(t, issuerURL) // the same key ids, other keys
	pubDER, err := x509.MarshalPKIXPublicKey(&iss.RSA.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	rsa1024, _ := rsa.GenerateKey(rand.Reader, 1024)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	tampered := func(tok string) string {
		parts := strings.Split(tok, ".")
		payload, _ := json.Marshal(with(good, "sub", "mallory"))
		parts[1] = base64.RawURLEncoding.EncodeToString(payload)
		return strings.Join(parts, ".")
	}
	for _, c := range []struct {
		name  string
		token string
		want  error
		sub   string
		roles []string
	}{
		{name: "RS256", token: iss.Token(t, jose.RS256, good), sub: "alice"},
		{name: "ES256", token: iss.Token(t, jose.ES256, good), sub: "alice"},
		{name: "roles and scope", token: iss.Token(t, jose.RS256, with(good, "roles", []string{"operator", "approver", " "}, "scope", "openid  approver mcp:tools")), sub: "alice",
			roles: []string{"approver", "mcp:tools", "openid", "operator"}},
		{name: "one role as a string", token: iss.Token(t, jose.ES256, with(good, "roles", "operator")), sub: "alice", roles: []string{"operator"}},
		{name: "an audience among others", token: iss.Token(t, jose.RS256, with(good, "aud", []string{"account", audience})), sub: "alice"},
		{name: "expired within the leeway", token: iss.Token(t, jose.RS256, with(good, "exp", now.Add(-10*time.Second).Unix())), sub: "alice"},
		{name: "valid within the leeway", token: iss.Token(t, jose.RS256, with(good, "nbf", now.Add(10*time.Second).Unix())), sub: "alice"},

		{name: "empty", token: "", want: auth.ErrMalformed},
		{name: "not a JWT", token: "s3cret-token", want: auth.ErrMalformed},
		{name: "two parts", token: "e30.e30", want: auth.ErrMalformed},
		{name: "bad signature", token: tampered(iss.Token(t, jose.RS256, good)), want: auth.ErrSignature},
		{name: "bad EC signature", token: tampered(iss.Token(t, jose.ES256, good)), want: auth.ErrSignature},
		{name: "wrong key, its kid", token: other.Token(t, jose.RS256, good), want: auth.ErrSignature},
		{name: "wrong EC key, its kid", token: other.Token(t, jose.ES256, good), want: auth.ErrSignature},
		{name: "unknown kid", token: authtest.Sign(t, jose.RS256, jose.JSONWebKey{Key: other.RSA, KeyID: "rsa-9"}, good), want: auth.ErrUnknownKey},
		{name: "no kid, wrong key", token: authtest.Sign(t, jose.RS256, other.RSA, good), want: auth.ErrSignature},
		{name: "an RSA kid for ES256", token: authtest.Sign(t, jose.ES256, jose.JSONWebKey{Key: iss.EC, KeyID: authtest.RSAKeyID}, good), want: auth.ErrUnknownKey},
		{name: "expired", token: iss.Token(t, jose.RS256, with(good, "exp", now.Add(-time.Minute).Unix())), want: auth.ErrExpired},
		{name: "not yet valid", token: iss.Token(t, jose.RS256, with(good, "nbf", now.Add(time.Minute).Unix())), want: auth.ErrNotYetValid},
		{name: "issued in the future", token: iss.Token(t, jose.RS256, with(good, "iat", now.Add(time.Minute).Unix())), want: auth.ErrNotYetValid},
		{name: "wrong iss", token: iss.Token(t, jose.RS256, with(good, "iss", "https://issuer.example/realms/other")), want: auth.ErrIssuer},
		{name: "no iss", token: iss.Token(t, jose.RS256, with(good, "iss", nil)), want: auth.ErrIssuer},
		{name: "wrong aud", token: iss.Token(t, jose.RS256, with(good, "aud", "https://elsewhere.example/mcp")), want: auth.ErrAudience},
		{name: "no aud", token: iss.Token(t, jose.RS256, with(good, "aud", nil)), want: auth.ErrAudience},
		{name: "no exp", token: iss.Token(t, jose.RS256, with(good, "exp", nil)), want: auth.ErrNoExpiry},
		{name: "no sub", token: iss.Token(t, jose.RS256, with(good, "sub", nil)), want: auth.ErrNoSubject},
		{name: "roles not strings", token: iss.Token(t, jose.RS256, with(good, "roles", []any{"a", 1})), want: auth.ErrClaims},
		{name: "scope not a string", token: iss.Token(t, jose.RS256, with(good, "scope", []string{"a"})), want: auth.ErrClaims},
		{name: "exp not a number", token: iss.Token(t, jose.RS256, with(good, "exp", "tomorrow")), want: auth.ErrClaims},
		{name: "alg none", token: authtest.Unsigned(t, good), want: auth.ErrAlgorithm},
		{name: "HS256 with the public key as secret", token: authtest.Sign(t, jose.HS256, jose.JSONWebKey{Key: pubDER, KeyID: authtest.RSAKeyID}, good), want: auth.ErrAlgorithm},
		{name: "RS384", token: authtest.Sign(t, jose.RS384, jose.JSONWebKey{Key: iss.RSA, KeyID: authtest.RSAKeyID}, good), want: auth.ErrAlgorithm},
		{name: "PS256", token: authtest.Sign(t, jose.PS256, jose.JSONWebKey{Key: iss.RSA, KeyID: authtest.RSAKeyID}, good), want: auth.ErrAlgorithm},
		{name: "ES384", token: authtest.Sign(t, jose.ES384, jose.JSONWebKey{Key: p384, KeyID: authtest.ECKeyID}, good), want: auth.ErrAlgorithm},
		{name: "RS256 of a short key", token: authtest.Sign(t, jose.RS256, jose.JSONWebKey{Key: rsa1024, KeyID: authtest.RSAKeyID}, good), want: auth.ErrSignature},
		{name: "too long", token: strings.Repeat("a", 17<<10), want: auth.ErrMalformed},
	} {
		p, exp, err := v.Authenticate(context.Background(), c.token)
		if c.want != nil {
			if !errors.Is(err, c.want) || err.Error() != c.want.Error() {
				t.Errorf("%s: %v, want %v (and nothing more)", c.name, err, c.want)
			}
			if strings.ContainsAny(err.Error(), "\"\\") {
				t.Errorf("%s: the refusal %q holds a quote or a backslash", c.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		want := store.Principal{Sub: c.sub, Roles: c.roles, Auth: "jwt"}
		if p.Sub != want.Sub || p.Auth != want.Auth || !slices.Equal(p.Roles, want.Roles) {
			t.Errorf("%s: %+v, want %+v", c.name, p, want)
		}
		if exp.Unix() != int64(good["exp"].(int64)) && c.name != "expired within the leeway" {
			t.Errorf("%s: expiry %v, want %v", c.name, exp, time.Unix(good["exp"].(int64), 0))
		}
	}
}

// TestVerifiedTokenExpires: a token verified once (and remembered) is
// refused once it has expired.
func TestVerifiedTokenExpires(t *testing.T) {
	iss := authtest.NewIssuer(t, issuerURL)
	clk := &clock{t: time.Now()}
	v := fileVerifier(t, iss, auth.Options{Now: clk.Now})
	tok := iss.Token(t, jose.ES256, with(iss.Claims("alice", audience), "exp", clk.Now().Add(time.Minute).Unix()))
	for range 2 {
		if _, _, err := v.Authenticate(context.Background(), tok); err != nil {
			t.Fatal(err)
		}
	}
	clk.Add(time.Minute + auth.DefaultLeeway + time.Second)
	if _, _, err := v.Authenticate(context.Background(), tok); !errors.Is(err, auth.ErrExpired) {
		t.Fatalf("after its expiry: %v, want %v", err, auth.ErrExpired)
	}
}

// TestFileKeysRotate: a JWKS file is read again when it changes: a new
// key is taken at once, a key removed stops verifying (tokens verified
// with it before too), and a file that no longer reads keeps the keys.
func TestFileKeysRotate(t *testing.T) {
	old := authtest.NewIssuer(t, issuerURL)
	dir := t.TempDir()
	file := old.WriteJWKS(t, dir)
	clk := &clock{t: time.Now()}
	v := fileVerifier(t, old, auth.Options{JWKS: file, Now: clk.Now})
	oldTok := old.Token(t, jose.RS256, old.Claims("alice", audience))
	if _, _, err := v.Authenticate(context.Background(), oldTok); err != nil {
		t.Fatal(err)
	}
	next := authtest.NewIssuer(t, issuerURL)
	newTok := authtest.Sign(t, jose.ES256, jose.JSONWebKey{Key: next.EC, KeyID: "ec-2"}, next.Claims("bob", audience))
	if _, _, err := v.Authenticate(context.Background(), newTok); !errors.Is(err, auth.ErrUnknownKey) {
		t.Fatalf("a key not published yet: %v", err)
	}
	// The new key is published, the old one removed (as a rotation
	// does: a new file renamed over the old).
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &next.EC.PublicKey, KeyID: "ec-2", Algorithm: "ES256", Use: "sig"}}}
	data, _ := json.Marshal(set)
	replace(t, file, data)
	if p, _, err := v.Authenticate(context.Background(), newTok); err != nil || p.Sub != "bob" {
		t.Fatalf("the new key, at once: %+v %v", p, err)
	}
	clk.Add(2 * time.Second)
	if _, _, err := v.Authenticate(context.Background(), oldTok); !errors.Is(err, auth.ErrUnknownKey) {
		t.Fatalf("a token of a key removed: %v, want %v", err, auth.ErrUnknownKey)
	}
	// A broken file keeps the keys read before.
	replace(t, file, []byte(`{"keys": [`))
	clk.Add(2 * time.Second)
	if _, _, err := v.Authenticate(context.Background(), newTok); err != nil {
		t.Fatalf("after the file broke: %v", err)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	clk.Add(2 * time.Second)
	if _, _, err := v.Authenticate(context.Background(), newTok); err != nil {
		t.Fatalf("after the file was removed: %v", err)
	}
}

func replace(t *testing.T, file string, data []byte) {
	t.Helper()
	tmp := file + ".new"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}

func TestNewRefusesBadKeys(t *testing.T) {
	iss := authtest.NewIssuer(t, issuerURL)
	dir := t.TempDir()
	rsa1024, _ := rsa.GenerateKey(rand.Reader, 1024)
	oct, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: []byte("0123456789abcdef0123456789abcdef"), KeyID: "hs", Algorithm: "HS256"}}})
	short, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &rsa1024.PublicKey, KeyID: "short"}}})
	enc, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &iss.RSA.PublicKey, KeyID: "enc", Use: "enc"}}})
	for name, c := range map[string]struct {
		data string
		want string
	}{
		"not JSON":              {"keys", "not a JWKS"},
		"no keys":               {`{"keys":[]}`, "no key that verifies"},
		"a shared secret":       {string(oct), "no key that verifies"},
		"a short RSA key":       {string(short), "1024 bits"},
		"an encryption key":     {string(enc), `use "enc"`},
		"a key go-jose refuses": {`{"keys":[{"kty":"XYZ"}]}`, "key 0"},
	} {
		file := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
		if err := os.WriteFile(file, []byte(c.data), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := auth.New(context.Background(), auth.Options{Issuer: issuerURL, Audience: audience, JWKS: file, Logger: quiet()})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), file) {
			t.Errorf("%s: %v, want an error naming the file and %q", name, err, c.want)
		}
	}
	if _, err := auth.New(context.Background(), auth.Options{Issuer: issuerURL, Audience: audience, JWKS: filepath.Join(dir, "none.json"), Logger: quiet()}); err == nil {
		t.Error("a JWKS file that is not there: no error")
	}
	// A JWKS of public and private keys, and one key go-jose cannot
	// read: the usable ones are used (a private key's public part).
	priv, _ := json.Marshal(jose.JSONWebKey{Key: iss.EC, KeyID: authtest.ECKeyID, Algorithm: "ES256"})
	file := filepath.Join(dir, "mixed.json")
	if err := os.WriteFile(file, []byte(`{"keys":[{"kty":"XYZ"},`+string(priv)+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	v := fileVerifier(t, iss, auth.Options{JWKS: file})
	if _, _, err := v.Authenticate(context.Background(), iss.Token(t, jose.ES256, iss.Claims("alice", audience))); err != nil {
		t.Fatalf("a JWKS with a private key: %v", err)
	}
}

// jwksServer serves a JWKS that a test changes, counting its fetches and
// telling each on fetched.
type jwksServer struct {
	*httptest.Server
	mu      sync.Mutex
	body    []byte
	cc      string
	status  int
	fetches atomic.Int32
	fetched chan struct{}
}

func newJWKSServer(t *testing.T, body []byte, cc string) *jwksServer {
	s := &jwksServer{body: body, cc: cc, status: http.StatusOK, fetched: make(chan struct{}, 100)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		body, cc, status := s.body, s.cc, s.status
		s.mu.Unlock()
		if cc != "" {
			w.Header().Set("Cache-Control", cc)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
		s.fetches.Add(1)
		s.fetched <- struct{}{}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(body []byte, status int) {
	s.mu.Lock()
	s.body, s.status = body, status
	s.mu.Unlock()
}

func (s *jwksServer) await(t *testing.T) {
	t.Helper()
	select {
	case <-s.fetched:
	case <-time.After(time.Minute):
		t.Fatal("the JWKS URL was not fetched")
	}
}

// TestURLKeys: a JWKS URL is fetched at start; a key it did not have is
// fetched for at once, but not more than once in MinRefetch; the keys are
// fetched again (in the background) once stale, as Cache-Control says;
// a failed fetch keeps them.
func TestURLKeys(t *testing.T) {
	iss := authtest.NewIssuer(t, issuerURL)
	srv := newJWKSServer(t, iss.JWKS(t), "public, max-age=600")
	clk := &clock{t: time.Now()}
	v := fileVerifier(t, iss, auth.Options{JWKS: srv.URL + "/certs", Now: clk.Now})
	srv.await(t)
	ctx := context.Background()
	tok := iss.Token(t, jose.RS256, iss.Claims("alice", audience))
	if _, _, err := v.Authenticate(ctx, tok); err != nil {
		t.Fatal(err)
	}
	next := authtest.NewIssuer(t, issuerURL)
	newTok := authtest.Sign(t, jose.RS256, jose.JSONWebKey{Key: next.RSA, KeyID: "rsa-2"}, next.Claims("bob", audience))
	// Right after the start: no fetch for an unknown key.
	if _, _, err := v.Authenticate(ctx, newTok); !errors.Is(err, auth.ErrUnknownKey) {
		t.Fatalf("an unknown key right after the start: %v", err)
	}
	if n := srv.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &iss.RSA.PublicKey, KeyID: authtest.RSAKeyID}, {Key: &next.RSA.PublicKey, KeyID: "rsa-2"}}}
	data, _ := json.Marshal(set)
	srv.set(data, http.StatusOK)
	clk.Add(auth.DefaultMinRefetch)
	// Many requests with the new key at once make one fetch.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			if p, _, err := v.Authenticate(ctx, newTok); err != nil || p.Sub != "bob" {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("the new key: %v", err)
	}
	srv.await(t)
	if n := srv.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2", n)
	}
	// Another unknown key within MinRefetch: refused, no fetch.
	third := authtest.Sign(t, jose.RS256, jose.JSONWebKey{Key: next.RSA, KeyID: "rsa-3"}, next.Claims("eve", audience))
	for range 5 {
		if _, _, err := v.Authenticate(ctx, third); !errors.Is(err, auth.ErrUnknownKey) {
			t.Fatalf("a third key: %v", err)
		}
	}
	if n := srv.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches after a flood of unknown keys, want 2", n)
	}
	// Stale after max-age: fetched again in the background, the keys
	// kept serving meanwhile; a failed fetch keeps them.
	srv.set([]byte("oops"), http.StatusInternalServerError)
	clk.Add(10*time.Minute + time.Second)
	if _, _, err := v.Authenticate(ctx, tok); err != nil {
		t.Fatalf("with stale keys: %v", err)
	}
	srv.await(t)
	clk.Add(auth.DefaultMinRefetch)
	if _, _, err := v.Authenticate(ctx, newTok); err != nil {
		t.Fatalf("after a failed fetch: %v", err)
	}
}

func TestNewWithABadURL(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"500": func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", 500) },
		"HTML": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html>")
		},
		"no keys": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"keys":[]}`)
		},
	} {
		srv := httptest.NewServer(h)
		_, err := auth.New(context.Background(), auth.Options{Issuer: issuerURL, Audience: audience, JWKS: srv.URL + "/jwks", Logger: quiet()})
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), srv.URL+"/jwks") {
			t.Errorf("%s: %v, want an error naming the URL", name, err)
		}
	}
}

func TestMaxAge(t *testing.T) {
	least := auth.DefaultMinRefetch
	for cc, want := range map[string]time.Duration{
		"":                          time.Hour,
		"public, max-age=600":       10 * time.Minute,
		"max-age=5":                 least,
		"no-cache":                  least,
		"private, no-store":         least,
		"max-age=99999999":          24 * time.Hour,
		"max-age=abc":               time.Hour,
		`max-age="120", max-age=60`: 2 * time.Minute,
	} {
		if got := auth.MaxAge(cc, least); got != want {
			t.Errorf("Cache-Control %q: %v, want %v", cc, got, want)
		}
	}
}

func TestRoles(t *testing.T) {
	if got := auth.Roles([]string{"b", " a ", ""}, []string{"a", "c"}); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("Roles: %q", got)
	}
	if got := auth.Roles(nil); got != nil {
		t.Errorf("no roles: %q, want nil", got)
	}
	p := auth.Local([]string{"operator", "operator"})
	if p.Sub == "" || p.Auth != "stdio" || !slices.Equal(p.Roles, []string{"operator"}) {
		t.Errorf("Local: %+v", p)
	}
}
