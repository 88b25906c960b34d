package gate

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// An Authenticator verifies the bearer tokens of HTTP requests
// (HTTPOptions.Authenticator): auth.Verifier is one, for the JWTs of an
// OAuth authorization server.
type Authenticator interface {
	// Authenticate returns the principal a token names and when the
	// token expires (zero: never). The text of its error is told to the
	// client (in the challenge's error_description): it must say what is
	// wrong with the token, and nothing of the server.
	Authenticate(ctx context.Context, token string) (Principal, time.Time, error)
	// Issuer is the authorization server whose tokens it takes: the
	// protected resource metadata names it.
	Issuer() string
}

// AnonymousPrincipal is the principal of an HTTP request when the handler
// authenticates none (no HTTPOptions.Token nor Authenticator) and the
// request's context names none: anyone who reaches the server.
func AnonymousPrincipal() Principal { return Principal{Sub: "anonymous", Auth: "none"} }

// tokenSub is the subject of HTTPOptions.Token's holder.
const tokenSub = "token"

// MetadataPath is where the protected resource metadata (RFC 9728) of a
// server with an Authenticator is: at MetadataPath and at MetadataPath +
// "/mcp" (the path of the resource, /mcp, after it), which is the one a
// 401's challenge names. See HTTPHandler.Metadata.
const MetadataPath = server.WellKnownProtectedResourcePath

// maxCookie bounds the inspector's cookie (browsers keep 4096 bytes of
// a cookie, its name included).
const maxCookie = 3800

// principal authenticates a request as the options say, or answers it
// (401) and reports false: with an Authenticator, the principal its bearer
// token names; with a Token, the token's holder; with neither, the
// principal its context already has (a host's middleware may set one),
// else AnonymousPrincipal. A browser's request (browser) may carry the
// inspector's cookie instead of the header (see Guard).
func (h *HTTPHandler) principal(w http.ResponseWriter, r *http.Request, browser bool) (Principal, bool) {
	tok, hasToken := bearer(r)
	switch {
	case h.opts.Authenticator != nil:
		if hasToken {
			p, _, err := h.opts.Authenticator.Authenticate(r.Context(), tok)
			if err != nil {
				if r.Context().Err() == nil {
					h.unauthorized(w, r, err.Error(), browser)
				}
				return Principal{}, false
			}
			return p, true
		}
	case h.opts.Token != "":
		if hasToken && subtle.ConstantTimeCompare([]byte(tok), []byte(h.opts.Token)) == 1 {
			return h.tokenPrincipal(), true
		}
		if hasToken {
			h.unauthorized(w, r, "wrong token", browser)
			return Principal{}, false
		}
	default:
		if p, ok := PrincipalFrom(r.Context()); ok {
			return p, true
		}
		return AnonymousPrincipal(), true
	}
	if browser {
		if p, ok := h.cookiePrincipal(r); ok {
			return p, true
		}
	}
	h.unauthorized(w, r, "", browser)
	return Principal{}, false
}

// tokenPrincipal is the principal of HTTPOptions.Token's holder.
func (h *HTTPHandler) tokenPrincipal() Principal {
	return Principal{Sub: tokenSub, Roles: h.opts.TokenRoles, Auth: "token"}
}

// bearer is a request's bearer token, if it has one.
func bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// unauthorized answers 401 with a challenge (RFC 6750): what is wrong with
// the token (invalid, "" when there is none), and, with an Authenticator,
// where the protected resource metadata is (RFC 9728) and the scopes to
// ask for.
func (h *HTTPHandler) unauthorized(w http.ResponseWriter, r *http.Request, invalid string, browser bool) {
	var params []string
	if h.opts.Authenticator == nil {
		params = append(params, `realm="stategate"`)
	}
	if invalid != "" {
		params = append(params, `error="invalid_token"`, `error_description=`+quote(invalid))
	}
	if h.opts.Authenticator != nil {
		params = append(params, `resource_metadata=`+quote(h.metadataURL(r)))
		if len(h.opts.Scopes) > 0 {
			params = append(params, `scope=`+quote(strings.Join(h.opts.Scopes, " ")))
		}
	}
	w.Header().Set("WWW-Authenticate", "Bearer "+strings.Join(params, ", "))
	msg := "Unauthorized: a bearer token is required"
	if invalid != "" {
		msg = "Unauthorized: " + invalid
	}
	if browser {
		msg += " (in a browser, open the page once with ?token=TOKEN: a cookie then carries who you are"
		if h.opts.Authenticator != nil {
			msg += ", until the token expires or the server restarts)"
		} else {
			msg += ", until the server restarts)"
		}
	}
	http.Error(w, msg, http.StatusUnauthorized)
}

// quote quotes a challenge's parameter: characters a quoted string may
// not hold (RFC 6750's error_description takes none of '"', '\' or
// controls) become '?'.
func quote(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			b[i] = '?'
		}
	}
	return `"` + string(b) + `"`
}

// url is the origin as a URL: its port left out when it is the scheme's
// default.
func (o origin) url() string {
	host := o.host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if o.port != defaultPorts[o.scheme] {
		host = net.JoinHostPort(o.host, o.port)
	}
	return o.scheme + "://" + host
}

// metadataURL is the address of the protected resource metadata of /mcp,
// on the server's origin as the request reached it.
func (h *HTTPHandler) metadataURL(r *http.Request) string {
	return ownOrigin(r).url() + MetadataPath + "/mcp"
}

// Metadata serves the protected resource metadata (RFC 9728) of a server
// with an Authenticator, at MetadataPath and MetadataPath + "/mcp" (mount
// it at both): the resource is /mcp on the server's origin as the request
// reached it (the Host, https over TLS or behind a proxy that says so),
// its authorization server the Authenticator's issuer, its scopes
// HTTPOptions.Scopes, bearer tokens in the Authorization header only. It
// is mcp-go's document and handler (GET and HEAD), behind the Host and
// Origin checks of /mcp (so that the CORS headers mcp-go sets open it to
// no other origin: a browser-based client must be served from the
// server's own, as for /mcp) but no token. Without an Authenticator it is
// 404.
func (h *HTTPHandler) Metadata() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.opts.Authenticator == nil || (r.URL.Path != MetadataPath && r.URL.Path != MetadataPath+"/mcp") {
			http.NotFound(w, r)
			return
		}
		if !h.admitHost(w, r) {
			return
		}
		server.NewProtectedResourceMetadataHandler(server.ProtectedResourceMetadataConfig{
			Resource:               ownOrigin(r).url() + "/mcp",
			AuthorizationServers:   []string{h.opts.Authenticator.Issuer()},
			ScopesSupported:        h.opts.Scopes,
			BearerMethodsSupported: []string{"header"},
			ResourceName:           "stategate",
		}).ServeHTTP(w, r)
	})
}

// signIn answers a browser's ?token=TOKEN (see Guard): a token the
// options take gets the cookie of its principal and a redirect to the
// same address without the parameter; another gets 401.
func (h *HTTPHandler) signIn(w http.ResponseWriter, r *http.Request, tok string) {
	var p Principal
	var expiry time.Time
	switch {
	case h.opts.Authenticator != nil:
		var err error
		if p, expiry, err = h.opts.Authenticator.Authenticate(r.Context(), tok); err != nil {
			if r.Context().Err() == nil {
				h.unauthorized(w, r, err.Error(), false)
			}
			return
		}
	case subtle.ConstantTimeCompare([]byte(tok), []byte(h.opts.Token)) == 1:
		p = h.tokenPrincipal()
	default:
		http.Error(w, "Unauthorized: wrong token", http.StatusUnauthorized)
		return
	}
	o := ownOrigin(r)
	c := &http.Cookie{Name: TokenCookiePrefix + o.port, Value: h.cookieValue(o, p, expiry), Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: o.scheme == "https"}
	if !expiry.IsZero() {
		c.Expires = expiry
	}
	if len(c.Value) > maxCookie {
		http.Error(w, "Bad Request: the token's principal is too large to keep in a cookie ("+strconv.Itoa(len(p.Roles))+" roles)", http.StatusBadRequest)
		return
	}
	http.SetCookie(w, c)
	q := r.URL.Query()
	q.Del("token")
	u := *r.URL
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
}

// cookieClaims are what the inspector's cookie says: the principal, and
// until when (Unix seconds; 0: until the server restarts).
type cookieClaims struct {
	Sub   string   `json:"sub"`
	Roles []string `json:"roles,omitempty"`
	Auth  string   `json:"auth"`
	Exp   int64    `json:"exp,omitempty"`
}

// cookieValue is what the inspector's cookie holds for a principal on the
// server's origin o: the principal and its expiry (base64url JSON), a dot,
// and an HMAC of the origin and that under the handler's own key. It is
// not the token.
func (h *HTTPHandler) cookieValue(o origin, p Principal, expiry time.Time) string {
	c := cookieClaims{Sub: p.Sub, Roles: p.Roles, Auth: p.Auth}
	if !expiry.IsZero() {
		c.Exp = expiry.Unix()
	}
	data, _ := json.Marshal(c)
	payload := base64.RawURLEncoding.EncodeToString(data)
	return payload + "." + h.cookieMAC(o, payload)
}

func (h *HTTPHandler) cookieMAC(o origin, payload string) string {
	m := hmac.New(sha256.New, h.cookieKey)
	m.Write([]byte("stategate inspector cookie\x00" + o.String() + "\x00" + payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// cookiePrincipal returns the principal of the inspector's cookie of the
// server's origin a request names (any of the cookies of its name:
// another server of the host may have set one too), if one is good: made
// by this handler for this origin, not expired.
func (h *HTTPHandler) cookiePrincipal(r *http.Request) (Principal, bool) {
	o := ownOrigin(r)
	for _, c := range r.CookiesNamed(TokenCookiePrefix + o.port) {
		payload, mac, ok := strings.Cut(c.Value, ".")
		if !ok || !hmac.Equal([]byte(mac), []byte(h.cookieMAC(o, payload))) {
			continue
		}
		data, err := base64.RawURLEncoding.DecodeString(payload)
		var cc cookieClaims
		if err != nil || json.Unmarshal(data, &cc) != nil {
			continue
		}
		if cc.Exp != 0 && time.Now().Unix() >= cc.Exp {
			continue
		}
		return Principal{Sub: cc.Sub, Roles: cc.Roles, Auth: cc.Auth}, true
	}
	return Principal{}, false
}
