package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/stategate/stategate/auth/authtest"
	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/internal/mcptest"
)

// TestPrincipalsFlags: the flags of principals are checked against one
// another and the transport, each mistake one error naming the flags; what
// they make is what the docs say.
func TestPrincipalsFlags(t *testing.T) {
	iss := authtest.NewIssuer(t, "https://issuer.example/realms/ops")
	jwks := iss.WriteJWKS(t, t.TempDir())
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	jwt := AuthFlags{AuthIssuer: iss.URL, AuthAudience: "https://stategate.example/mcp", AuthJWKS: jwks, InspectRole: "operator"}
	for _, c := range []struct {
		name string
		cmd  serveCmd
		err  string
	}{
		{"issuer alone", serveCmd{HTTP: "0", AuthFlags: AuthFlags{AuthIssuer: iss.URL}}, "go together (missing: --auth-audience, --auth-jwks)"},
		{"no issuer", serveCmd{HTTP: "0", AuthFlags: AuthFlags{AuthAudience: "a", AuthJWKS: jwks}}, "(missing: --auth-issuer)"},
		{"over stdio", serveCmd{AuthFlags: jwt}, "--auth-issuer needs --http"},
		{"with a token file", serveCmd{HTTP: "0", TokenFile: tokenFile, AuthFlags: jwt}, "--auth-issuer and --token-file cannot be combined"},
		{"roles with JWTs", serveCmd{HTTP: "0", AuthFlags: func() AuthFlags { a := jwt; a.Roles = []string{"x"}; return a }()}, "--roles cannot be combined with --auth-issuer"},
		{"scopes alone", serveCmd{HTTP: "0", AuthFlags: AuthFlags{AuthScopes: []string{"mcp"}}}, "--auth-scope needs --auth-issuer"},
		{"roles over open HTTP", serveCmd{HTTP: "0", AuthFlags: AuthFlags{Roles: []string{"operator"}}}, "give --token-file"},
		{"an issuer that is no URL", serveCmd{HTTP: "0", AuthFlags: func() AuthFlags { a := jwt; a.AuthIssuer = "ops"; return a }()}, "--auth-issuer ops: not an http(s) URL"},
		{"a JWKS file that is not there", serveCmd{HTTP: "0", AuthFlags: func() AuthFlags { a := jwt; a.AuthJWKS = jwks + ".gone"; return a }()}, "--auth-jwks: auth: JWKS file: "},
	} {
		_, err := c.cmd.principals(context.Background(), slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want %q", c.name, err, c.err)
		}
	}

	c := serveCmd{HTTP: "0", AuthFlags: jwt}
	pr, err := c.principals(context.Background(), slog.New(slog.DiscardHandler))
	if err != nil || pr.verifier == nil || pr.resetRole != "operator" {
		t.Fatalf("JWTs: %+v %v", pr, err)
	}
	var o gate.HTTPOptions
	pr.httpOptions(&o, &c)
	if o.Authenticator == nil || o.Authenticator.Issuer() != iss.URL {
		t.Errorf("JWTs: the HTTP options %+v", o)
	}

	var logged bytes.Buffer
	c = serveCmd{HTTP: "0", TokenFile: tokenFile, InspReset: true, AuthFlags: AuthFlags{InspectRole: "operator", Roles: []string{"viewer"}}}
	pr, err = c.principals(context.Background(), slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil || pr.verifier != nil || pr.resetRole != "operator" || !strings.Contains(logged.String(), "give it with --roles") {
		t.Fatalf("a token file: %+v %v, log %q", pr, err, logged.String())
	}
	o = gate.HTTPOptions{Token: "s3cret"}
	pr.httpOptions(&o, &c)
	if o.Authenticator != nil || !slices.Equal(o.TokenRoles, []string{"viewer"}) {
		t.Errorf("a token file: the HTTP options %+v", o)
	}

	c = serveCmd{HTTP: "0", InspReset: true, AuthFlags: AuthFlags{InspectRole: "operator"}}
	if pr, err = c.principals(context.Background(), slog.New(slog.DiscardHandler)); err != nil || pr.resetRole != "" {
		t.Errorf("no authentication: %+v %v, want no reset role (as before)", pr, err)
	}

	c = serveCmd{AuthFlags: AuthFlags{Roles: []string{"operator", "approver", "operator"}}}
	pr, err = c.principals(context.Background(), slog.New(slog.DiscardHandler))
	if err != nil || pr.stdio.Auth != "stdio" || pr.stdio.Sub == "" || !slices.Equal(pr.stdio.Roles, []string{"approver", "operator"}) {
		t.Errorf("stdio: %+v %v", pr.stdio, err)
	}
}

// TestServeWithJWTs runs serve with the flags of JWTs: /mcp wants a token
// and says where the metadata is, the metadata names the issuer, and a
// token of the issuer opens /mcp and the inspector.
func TestServeWithJWTs(t *testing.T) {
	iss := authtest.NewIssuer(t, "https://issuer.example/realms/ops")
	jwks := iss.WriteJWKS(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "serve", "--memory", "--machines", "../../machines", "--upstreams", "none", "--http", "127.0.0.1:0",
		"--auth-issuer", iss.URL, "--auth-audience", "https://stategate.example/mcp", "--auth-jwks", jwks, "--auth-scope", "mcp:tools")
	cmd.Env = append(os.Environ(), "STATEGATE_RUN_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }()
	// The log line that says where it serves.
	var base string
	lines := bufio.NewScanner(stderr)
	for base == "" && lines.Scan() {
		if _, u, ok := strings.Cut(lines.Text(), `msg="serving MCP over Streamable HTTP" url=`); ok {
			u, _, _ = strings.Cut(u, " ")
			base = strings.TrimSuffix(u, "/mcp")
		}
	}
	if base == "" {
		t.Fatalf("serve did not say where it serves (%v)", lines.Err())
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()

	res, err := http.Post(base+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	want := `Bearer resource_metadata="` + base + gate.MetadataPath + `/mcp", scope="mcp:tools"`
	if res.StatusCode != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("/mcp without a token: %s %q, want 401 %q", res.Status, res.Header.Get("WWW-Authenticate"), want)
	}
	res, err = http.Get(base + gate.MetadataPath + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	err = json.NewDecoder(res.Body).Decode(&doc)
	res.Body.Close()
	if err != nil || doc.Resource != base+"/mcp" || !slices.Equal(doc.AuthorizationServers, []string{iss.URL}) {
		t.Fatalf("the metadata: %s %+v %v", res.Status, doc, err)
	}
	tok := iss.Token(t, jose.ES256, iss.Claims("alice", "https://stategate.example/mcp"))
	c := mcptest.HTTP(t, base+"/mcp", mcptest.Options{Name: "serve-jwt", Header: map[string]string{"Authorization": "Bearer " + tok}})
	if _, ok := c.Tools()["invoice_submit"]; !ok {
		t.Fatalf("tools with a token: %v", mcptest.Names(c.Tools()))
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/inspect", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(page), "alice (jwt)") {
		t.Fatalf("the inspector with a token: %s, want 200 saying who it is", res.Status)
	}
}
