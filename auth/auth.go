// Package auth tells who a bearer token names: it verifies the JWTs an
// OAuth authorization server issues (signed RS256 or ES256; no other
// algorithm, never "none" nor a shared secret), with the issuer's keys (a
// JWKS file, read again when it changes, or a JWKS URL, fetched and kept as
// its Cache-Control says, fetched again for a key it does not know, at most
// every MinRefetch), its issuer, the server's audience and the token's
// times (a small leeway for clocks), and makes the principal it names: its
// subject, and its roles (the roles claim and the words of its scope).
//
// It knows nothing of MCP, of the gate or of HTTP handlers: a transport
// takes the token from its request and puts the principal where its
// handlers read it (the gate's HTTP handler takes a Verifier as its
// gate.Authenticator). It owns the principals that do not come from a
// token too: the local user over stdio (Local) and the roles a flag gives
// (Roles).
package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/stategate/stategate/store"
)

// Defaults of Options.
const (
	// DefaultLeeway is how far the server's clock may be from the
	// issuer's: a token is taken up to 30 s after its expiry and 30 s
	// before it is valid.
	DefaultLeeway = 30 * time.Second
	// DefaultMinRefetch is how often at most a JWKS URL is fetched again
	// (for a key it did not have, or after a failed fetch): a flood of
	// tokens naming unknown keys makes at most one fetch in that time.
	DefaultMinRefetch = 30 * time.Second
)

// Limits of what is read.
const (
	// maxToken bounds a token (larger ones are malformed).
	maxToken = 16 << 10
	// maxJWKS bounds a JWKS document, from a file or a URL.
	maxJWKS = 1 << 20
	// maxKeys bounds the keys of a JWKS that are used.
	maxKeys = 100
	// minRSABits is the smallest RSA key taken.
	minRSABits = 2048
	// fetchTimeout bounds one fetch of a JWKS URL.
	fetchTimeout = 10 * time.Second
	// defaultMaxAge is how long a JWKS URL's keys are kept when its
	// answer says nothing (no Cache-Control max-age); maxMaxAge bounds
	// what it may say.
	defaultMaxAge = time.Hour
	maxMaxAge     = 24 * time.Hour
	// fileRecheck is how often a JWKS file is looked at for a change
	// (and at once for a key it does not have).
	fileRecheck = time.Second
	// maxCached bounds the tokens whose verification is remembered.
	maxCached = 4096
)

// algorithms are the signing algorithms taken. HS256 and the other
// shared-secret ones are refused (a public key is no secret), and so is
// "none".
var algorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256}

// Options configure a Verifier.
type Options struct {
	// Issuer is the authorization server: a token's iss must be it,
	// exactly.
	Issuer string
	// Audience is this server as the issuer names it: a token's aud must
	// hold it.
	Audience string
	// JWKS is where the issuer's keys are: a file (read again when it
	// changes), or an https:// or http:// URL (fetched, and kept as its
	// Cache-Control says).
	JWKS string
	// Leeway is how far clocks may disagree (DefaultLeeway when zero;
	// negative: none).
	Leeway time.Duration
	// MinRefetch is how often at most a JWKS URL is fetched again
	// (DefaultMinRefetch when zero).
	MinRefetch time.Duration
	// Client fetches a JWKS URL (http.DefaultClient when nil; each fetch
	// is bounded by 10 s).
	Client *http.Client
	// Logger receives the verifier's logs (keys read, fetches that
	// failed; a refused token at debug level); slog.Default() when nil.
	Logger *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Refusals. Each says what is wrong with a token in words a client may
// be told (they name nothing of the server's keys or configuration), and
// none holds a quote or a backslash (an HTTP challenge quotes them).
var (
	ErrMalformed   = errors.New("the token is not a signed JWT")
	ErrAlgorithm   = errors.New("the token's signing algorithm is not accepted (RS256 and ES256 are)")
	ErrUnknownKey  = errors.New("the token is signed with a key the issuer does not publish")
	ErrSignature   = errors.New("the token's signature is wrong")
	ErrExpired     = errors.New("the token has expired")
	ErrNotYetValid = errors.New("the token is not valid yet")
	ErrIssuer      = errors.New("the token is from another issuer")
	ErrAudience    = errors.New("the token is not meant for this server (its audience)")
	ErrNoExpiry    = errors.New("the token has no expiry (exp)")
	ErrNoSubject   = errors.New("the token names no subject (sub)")
	ErrClaims      = errors.New("the token's claims are malformed")
)

// A Verifier verifies tokens of one issuer for one audience. It is safe
// for concurrent use.
type Verifier struct {
	opts Options
	keys keySource
	log  *slog.Logger

	// cache remembers the tokens verified (by a hash of the token), each
	// with its principal, its expiry and the generation of the keys that
	// verified it: a token is verified once, and again when the keys
	// change.
	mu    sync.Mutex
	cache map[[32]byte]cached
}

type cached struct {
	p      store.Principal
	expiry time.Time
	notBef time.Time
	gen    uint64
}

// New makes the Verifier of an issuer, and reads its keys: a file must
// hold a JWKS with at least one key it can use, and a URL must answer with
// one (within ctx), or New fails, saying why.
func New(ctx context.Context, o Options) (*Verifier, error) {
	if o.Issuer == "" {
		return nil, errors.New("auth: no issuer")
	}
	if o.Audience == "" {
		return nil, errors.New("auth: no audience")
	}
	if o.JWKS == "" {
		return nil, errors.New("auth: no JWKS (a file or a URL)")
	}
	if o.Leeway == 0 {
		o.Leeway = DefaultLeeway
	} else if o.Leeway < 0 {
		o.Leeway = 0
	}
	if o.MinRefetch <= 0 {
		o.MinRefetch = DefaultMinRefetch
	}
	if o.Client == nil {
		o.Client = http.DefaultClient
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	v := &Verifier{opts: o, log: o.Logger, cache: map[[32]byte]cached{}}
	if v.log == nil {
		v.log = slog.Default()
	}
	if strings.HasPrefix(o.JWKS, "https://") || strings.HasPrefix(o.JWKS, "http://") {
		u, err := url.Parse(o.JWKS)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("auth: JWKS URL %s: not a URL", o.JWKS)
		}
		r := &remoteKeys{url: o.JWKS, client: o.Client, minRefetch: o.MinRefetch, now: o.Now, log: v.log}
		if err := r.start(ctx); err != nil {
			return nil, err
		}
		v.keys = r
	} else {
		f := &fileKeys{path: o.JWKS, now: o.Now, log: v.log}
		if err := f.start(); err != nil {
			return nil, err
		}
		v.keys = f
	}
	return v, nil
}

// Issuer is the authorization server whose tokens v takes.
func (v *Verifier) Issuer() string { return v.opts.Issuer }

// Authenticate verifies a token and returns the principal it names (Sub
// its sub, Roles its roles claim and the words of its scope, Auth "jwt")
// and its expiry. A token refused is one of the Err errors above, whose
// text a client may be told (the cause is logged at debug level); the
// context's error when ctx ends first (while a JWKS URL is fetched for a
// key not kept).
func (v *Verifier) Authenticate(ctx context.Context, token string) (store.Principal, time.Time, error) {
	now := v.opts.Now()
	sum := sha256.Sum256([]byte(token))
	gen := v.keys.generation()
	v.mu.Lock()
	c, ok := v.cache[sum]
	v.mu.Unlock()
	if ok && c.gen == gen {
		if err := v.checkTimes(now, c.notBef, c.expiry); err != nil {
			return store.Principal{}, time.Time{}, err
		}
		p := c.p
		p.Roles = slices.Clip(p.Roles) // an append by the caller copies
		return p, c.expiry, nil
	}
	p, notBef, expiry, gen, err := v.verify(ctx, token, now)
	if err != nil {
		if ctx.Err() == nil {
			v.log.Debug("auth: a token refused", "err", err)
		}
		return store.Principal{}, time.Time{}, publicError(err)
	}
	v.mu.Lock()
	if len(v.cache) >= maxCached {
		clear(v.cache)
	}
	v.cache[sum] = cached{p: p, expiry: expiry, notBef: notBef, gen: gen}
	v.mu.Unlock()
	return p, expiry, nil
}

// refusal is a refusal (one of the Err errors) with what caused it, for
// the log.
type refusal struct {
	reason error
	cause  error
}

func (r *refusal) Error() string { return r.reason.Error() + ": " + r.cause.Error() }
func (r *refusal) Unwrap() error { return r.reason }

func refuse(reason, cause error) error { return &refusal{reason, cause} }

// publicError is what a client may be told of err: the refusal without
// its cause.
func publicError(err error) error {
	var r *refusal
	if errors.As(err, &r) {
		return r.reason
	}
	return err
}

// claims are what a token says: the registered claims, and roles (a list
// of strings, or one string) and scope (words).
type claims struct {
	jwt.Claims
	Roles stringList `json:"roles"`
	Scope *string    `json:"scope"`
}

// stringList is a claim that holds a list of strings, or one string.
type stringList []string

func (l *stringList) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*l = []string{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("not a string or a list of strings")
	}
	*l = many
	return nil
}

func (v *Verifier) verify(ctx context.Context, token string, now time.Time) (p store.Principal, notBef, expiry time.Time, gen uint64, err error) {
	if len(token) > maxToken {
		return p, notBef, expiry, 0, refuse(ErrMalformed, fmt.Errorf("%d bytes", len(token)))
	}
	jws, err := jose.ParseSignedCompact(token, algorithms)
	if err != nil {
		var alg *jose.ErrUnexpectedSignatureAlgorithm
		if errors.As(err, &alg) {
			return p, notBef, expiry, 0, refuse(ErrAlgorithm, err)
		}
		return p, notBef, expiry, 0, refuse(ErrMalformed, err)
	}
	if len(jws.Signatures) != 1 {
		return p, notBef, expiry, 0, refuse(ErrMalformed, errors.New("not one signature"))
	}
	h := jws.Signatures[0].Header
	alg := jose.SignatureAlgorithm(h.Algorithm)
	keys, gen, err := v.keys.lookup(ctx, h.KeyID, alg)
	if err != nil {
		return p, notBef, expiry, 0, err
	}
	var payload []byte
	for _, k := range keys {
		if payload, err = jws.Verify(k); err == nil {
			break
		}
	}
	if payload == nil {
		return p, notBef, expiry, 0, refuse(ErrSignature, fmt.Errorf("kid %q: %v", h.KeyID, err))
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return p, notBef, expiry, 0, refuse(ErrClaims, err)
	}
	switch {
	case c.Issuer != v.opts.Issuer:
		return p, notBef, expiry, 0, refuse(ErrIssuer, fmt.Errorf("iss %q", c.Issuer))
	case !c.Audience.Contains(v.opts.Audience):
		return p, notBef, expiry, 0, refuse(ErrAudience, fmt.Errorf("aud %q", []string(c.Audience)))
	case c.Expiry == nil:
		return p, notBef, expiry, 0, refuse(ErrNoExpiry, errors.New("no exp"))
	case c.Subject == "":
		return p, notBef, expiry, 0, refuse(ErrNoSubject, errors.New("no sub"))
	}
	expiry = c.Expiry.Time()
	if c.NotBefore != nil {
		notBef = c.NotBefore.Time()
	}
	// A token issued in the future is as good as one not valid yet.
	if c.IssuedAt != nil && c.IssuedAt.Time().After(notBef) {
		notBef = c.IssuedAt.Time()
	}
	if err := v.checkTimes(now, notBef, expiry); err != nil {
		return p, notBef, expiry, 0, refuse(err, fmt.Errorf("now %s, nbf/iat %s, exp %s", now.UTC().Format(time.RFC3339), notBef.UTC().Format(time.RFC3339), expiry.UTC().Format(time.RFC3339)))
	}
	var scope []string
	if c.Scope != nil {
		scope = strings.Fields(*c.Scope)
	}
	return store.Principal{Sub: c.Subject, Roles: Roles(c.Roles, scope), Auth: "jwt"}, notBef, expiry, gen, nil
}

// checkTimes refuses a token expired or not yet valid at now, within the
// leeway.
func (v *Verifier) checkTimes(now, notBef, expiry time.Time) error {
	if now.Add(-v.opts.Leeway).After(expiry) {
		return ErrExpired
	}
	if !notBef.IsZero() && now.Add(v.opts.Leeway).Before(notBef) {
		return ErrNotYetValid
	}
	return nil
}

// Roles is a principal's roles: the words of each list, trimmed, without
// empty ones or repeats, sorted (nil when there are none).
func Roles(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		for _, r := range l {
			if r = strings.TrimSpace(r); r != "" {
				out = append(out, r)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Local is the principal of a local user (over stdio): the user the
// process runs as (its login name; $USER, else "local", when the system
// cannot say), with the roles given, Auth "stdio".
func Local(roles []string) store.Principal {
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	if name == "" {
		name = os.Getenv("USER")
	}
	if name == "" {
		name = "local"
	}
	return store.Principal{Sub: name, Roles: Roles(roles), Auth: "stdio"}
}

// HasRole reports whether a principal has a role.
func HasRole(p store.Principal, role string) bool { return slices.Contains(p.Roles, role) }

// usable returns the public keys of a JWKS that can verify a token of
// one of the algorithms taken: RSA keys of at least 2048 bits and P-256
// keys, for signatures (use "sig" or none), with no algorithm or one of
// those; each with why it is left out when it is not.
func usable(set []jose.JSONWebKey) (keys []jose.JSONWebKey, skipped []string) {
	for _, k := range set {
		if k.Use != "" && k.Use != "sig" {
			skipped = append(skipped, fmt.Sprintf("kid %q: use %q", k.KeyID, k.Use))
			continue
		}
		pub := k.Public()
		if !pub.Valid() {
			skipped = append(skipped, fmt.Sprintf("kid %q: not a public key (%T)", k.KeyID, k.Key))
			continue
		}
		switch key := pub.Key.(type) {
		case *rsa.PublicKey:
			if key.N.BitLen() < minRSABits {
				skipped = append(skipped, fmt.Sprintf("kid %q: an RSA key of %d bits (at least %d)", k.KeyID, key.N.BitLen(), minRSABits))
				continue
			}
			if k.Algorithm != "" && k.Algorithm != string(jose.RS256) {
				skipped = append(skipped, fmt.Sprintf("kid %q: alg %s (RS256 for an RSA key)", k.KeyID, k.Algorithm))
				continue
			}
		case *ecdsa.PublicKey:
			if key.Curve != elliptic.P256() {
				skipped = append(skipped, fmt.Sprintf("kid %q: an EC key on %s (P-256)", k.KeyID, key.Curve.Params().Name))
				continue
			}
			if k.Algorithm != "" && k.Algorithm != string(jose.ES256) {
				skipped = append(skipped, fmt.Sprintf("kid %q: alg %s (ES256 for a P-256 key)", k.KeyID, k.Algorithm))
				continue
			}
		default:
			skipped = append(skipped, fmt.Sprintf("kid %q: a %T (RSA or P-256 keys)", k.KeyID, pub.Key))
			continue
		}
		if len(keys) == maxKeys {
			skipped = append(skipped, fmt.Sprintf("kid %q: more than %d keys", k.KeyID, maxKeys))
			continue
		}
		keys = append(keys, pub)
	}
	return keys, skipped
}

// parseJWKS reads a JWKS document: its keys that can verify tokens, and
// why each other is left out. A key go-jose cannot read is left out, not
// the document. Without a usable key it is an error.
func parseJWKS(data []byte) ([]jose.JSONWebKey, []string, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("not a JWKS (a JSON object with keys): %w", err)
	}
	var set []jose.JSONWebKey
	var skipped []string
	for i, raw := range doc.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			skipped = append(skipped, fmt.Sprintf("key %d: %v", i, err))
			continue
		}
		set = append(set, k)
	}
	keys, more := usable(set)
	skipped = append(skipped, more...)
	if len(keys) == 0 {
		why := "it has no keys"
		if len(skipped) > 0 {
			why = strings.Join(skipped, "; ")
		}
		return nil, skipped, fmt.Errorf("no key that verifies RS256 or ES256 tokens (%s)", why)
	}
	return keys, skipped, nil
}

// matching returns the keys that may have signed a token with a key id
// and an algorithm: those of its id (and those with no id), of the
// algorithm's type.
func matching(keys []jose.JSONWebKey, kid string, alg jose.SignatureAlgorithm) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, k := range keys {
		if kid != "" && k.KeyID != "" && k.KeyID != kid {
			continue
		}
		switch k.Key.(type) {
		case *rsa.PublicKey:
			if alg != jose.RS256 {
				continue
			}
		case *ecdsa.PublicKey:
			if alg != jose.ES256 {
				continue
			}
		}
		out = append(out, k)
	}
	return out
}
