package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/stategate/stategate/auth"
	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/store"
)

// AuthFlags are serve's flags of principals: who makes each request (see
// docs/principals.md).
type AuthFlags struct {
	AuthIssuer   string        `name:"auth-issuer" placeholder:"URL" help:"With --http (or --inspect): every request needs a JWT this OAuth authorization server issued (its iss, exactly), as 'Authorization: Bearer JWT'; its sub is the principal, its roles claim and the words of its scope the roles. With --auth-audience and --auth-jwks."`
	AuthAudience string        `name:"auth-audience" placeholder:"AUD" help:"The audience a token must name (its aud): this server, as the issuer names it."`
	AuthJWKS     string        `name:"auth-jwks" placeholder:"FILE|URL" help:"The issuer's keys (RS256, ES256): a JWKS file, read again when it changes, or its https:// URL, fetched and kept as its Cache-Control says."`
	AuthScopes   []string      `name:"auth-scope" placeholder:"SCOPE" help:"A scope clients should ask the issuer for (the protected resource metadata's scopes_supported; repeatable)."`
	Roles        []string      `name:"roles" placeholder:"ROLE" help:"The roles of stdio's principal (the local user), and with --token-file of the token's holder; none by default."`
	ConfirmTime  time.Duration `name:"confirm-timeout" default:"5m" help:"How long a call of a step with meta.tool.confirm waits for its human's yes (elicitation): past it the call is refused NEEDS_HUMAN and nothing moves. Other instances never wait for it."`
	InspectRole  string        `name:"inspect-role" default:"operator" placeholder:"ROLE" help:"The role a principal needs to reset an instance from the inspector (with --inspect-reset and --token-file or --auth-issuer; without them anyone who opens it may; empty: any principal may)."`
}

// principals is what the flags make of the principals.
type principals struct {
	// verifier verifies JWTs over HTTP (nil: none).
	verifier *auth.Verifier
	// stdio is the principal over stdio: the local user.
	stdio store.Principal
	// resetRole is the role the inspector's reset needs ("": none).
	resetRole string
}

// principals checks the flags of principals against the others and makes
// what they say: a Verifier of JWTs reads its keys now (a JWKS URL is
// fetched), so that a mistake stops serve before it opens the store.
func (c *serveCmd) principals(ctx context.Context, log *slog.Logger) (principals, error) {
	a := c.AuthFlags
	var pr principals
	given := map[string]bool{"--auth-issuer": a.AuthIssuer != "", "--auth-audience": a.AuthAudience != "", "--auth-jwks": a.AuthJWKS != ""}
	var missing []string
	jwt := false
	for _, f := range []string{"--auth-issuer", "--auth-audience", "--auth-jwks"} {
		if given[f] {
			jwt = true
		} else {
			missing = append(missing, f)
		}
	}
	switch {
	case jwt && len(missing) > 0:
		return pr, fmt.Errorf("--auth-issuer, --auth-audience and --auth-jwks go together (missing: %s)", strings.Join(missing, ", "))
	case jwt && c.HTTP == "" && c.Inspect == "":
		return pr, errors.New("--auth-issuer needs --http or --inspect (over stdio the principal is the local user, with --roles)")
	case jwt && c.TokenFile != "":
		return pr, errors.New("--auth-issuer and --token-file cannot be combined (one kind of bearer token at a time)")
	case jwt && len(a.Roles) > 0 && c.HTTP != "":
		// (Beside stdio, --inspect's JWTs are the inspector's, and
		// --roles stdio's.)
		return pr, errors.New("--roles cannot be combined with --auth-issuer (a token's roles are its roles claim and scope)")
	case !jwt && len(a.AuthScopes) > 0:
		return pr, errors.New("--auth-scope needs --auth-issuer")
	case !jwt && c.HTTP != "" && c.TokenFile == "" && len(a.Roles) > 0:
		return pr, errors.New("--roles over --http are the roles of --token-file's holder: give --token-file (a request without authentication has no roles)")
	}
	pr.stdio = auth.Local(a.Roles)
	if c.TokenFile != "" || jwt {
		pr.resetRole = a.InspectRole
	}
	if !jwt {
		if c.InspReset && c.TokenFile != "" && pr.resetRole != "" && !slices.Contains(auth.Roles(a.Roles), pr.resetRole) {
			log.Warn("the inspector's reset needs a role the token's holder does not have: give it with --roles", "role", pr.resetRole)
		}
		return pr, nil
	}
	if u, err := url.Parse(a.AuthIssuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return pr, fmt.Errorf("--auth-issuer %s: not an http(s) URL (an issuer is its authorization server's URL, as its tokens' iss has it)", a.AuthIssuer)
	}
	v, err := auth.New(ctx, auth.Options{Issuer: a.AuthIssuer, Audience: a.AuthAudience, JWKS: a.AuthJWKS, Logger: log})
	if err != nil {
		return pr, fmt.Errorf("--auth-jwks: %w", err)
	}
	pr.verifier = v
	return pr, nil
}

// httpOptions sets the HTTP options of authentication.
func (pr principals) httpOptions(o *gate.HTTPOptions, c *serveCmd) {
	if pr.verifier != nil {
		o.Authenticator = pr.verifier
		o.Scopes = c.AuthScopes
	}
	if o.Token != "" {
		o.TokenRoles = auth.Roles(c.Roles)
	}
}
