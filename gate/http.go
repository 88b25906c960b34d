package gate

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// HTTPOptions configure the gate's Streamable HTTP endpoint.
type HTTPOptions struct {
	// Hosts are the names and addresses a request's Host header may name
	// besides loopback ones (localhost, 127.0.0.0/8, ::1): the addresses
	// the server listens on (see ListenHosts) and any name it is reached
	// by. Any other Host is refused (403), which is what stops DNS
	// rebinding: a web page whose name was made to point at this machine
	// still sends its own name.
	Hosts []string
	// Token, when set, must come with every request as
	// "Authorization: Bearer TOKEN" (401 otherwise): its holder is the
	// principal of every request (Sub "token", Auth "token", the roles
	// TokenRoles).
	Token string
	// TokenRoles are the roles of Token's holder.
	TokenRoles []string
	// Authenticator, when set, verifies the bearer token every request
	// must carry (in place of Token): the principal it names makes the
	// request. A request without one, or with one it refuses, gets 401
	// with a challenge that says what is wrong and where the protected
	// resource metadata is (see Metadata). With neither Token nor
	// Authenticator, a request is made by the principal its context
	// names, else by AnonymousPrincipal.
	Authenticator Authenticator
	// Scopes are the scopes a client should ask the Authenticator's
	// issuer for: the metadata's scopes_supported, and the challenge's
	// scope (none when empty).
	Scopes []string
	// MaxSessions bounds the live sessions (DefaultMaxSessions when zero),
	// and the 2026-07-28 subscriptions/listen streams open at once (shared
	// by peers as sessions are, see listens). At the
	// bound, a new session takes the place of a stale one (no request for
	// SessionRecent, no GET stream), of its own peer's when that peer (an
	// IPv4 address, an IPv6 /64) holds a quarter of MaxSessions or more;
	// a peer holding less may take the place of a session of the peer
	// holding the most beyond its quarter. A session used recently is
	// never ended for a new one of its own peer, and a peer ends at most
	// 16 sessions at once and 15 a minute. A new session that cannot be
	// had is refused with 503 and a Retry-After. (See httpsessions.go.)
	MaxSessions int
	// SessionRecent is how long a session is in use after its last
	// request (DefaultSessionRecent when zero): see MaxSessions.
	SessionRecent time.Duration
	// SessionIdle ends a session that has had neither a request nor a GET
	// stream for that long (DefaultSessionIdle when zero); its next
	// request gets 404, and the client starts a new session.
	SessionIdle time.Duration
	// MaxBody bounds a POST's body (DefaultMaxBody when zero; 413 beyond).
	MaxBody int64
	// BodyTimeout bounds the time a client takes to send a POST's body
	// (DefaultBodyTimeout when zero): a body trickled a byte at a time
	// does not hold a connection open.
	BodyTimeout time.Duration
	// Route, when set, names this replica among several behind a proxy
	// (serve --route): every session id it issues is "ROUTE." and 128
	// random bits, so that the proxy sends a session's requests to the
	// replica that holds it by the prefix of Mcp-Session-Id (RouteOf;
	// docs/replicas.md). It must pass CheckRoute (one that does not is
	// logged and left out).
	Route string
}

// Defaults of HTTPOptions.
const (
	DefaultMaxSessions = 1024
	DefaultSessionIdle = time.Hour
	DefaultMaxBody     = 4 << 20
	DefaultBodyTimeout = 30 * time.Second
)

// keepAlive is how often mcp-go pings a GET stream (at most; a third of
// SessionIdle when that is shorter): it keeps proxies from closing an idle
// stream, and keeps its session from ending as idle. streamWriteTimeout
// bounds each write to a GET stream: a client that does not read its
// stream loses it once the connection's buffers are full.
const (
	keepAlive          = 25 * time.Second
	streamWriteTimeout = 30 * time.Second
)

// httpVersions are the protocol revisions served over Streamable HTTP,
// newest first: 2026-07-28, without sessions (each request names its
// revision), and the ones with sessions since Streamable HTTP came
// (2024-11-05 had none).
var httpVersions = []string{mcp.ProtocolVersion20260728, mcp.ProtocolVersion20251125, mcp.ProtocolVersion20250618, mcp.ProtocolVersion20250326}

// HTTPHandler is the gate's Streamable HTTP endpoint at /mcp: mcp-go's
// StreamableHTTPServer, behind the checks that a local server needs
// (Host, Origin, an optional bearer token, the size and pace of bodies,
// well-formed JSON-RPC, issued session ids, a bound on sessions).
// Close it when the HTTP server shuts down, so that its streams end.
type HTTPHandler struct {
	g       *Gate
	inner   *server.StreamableHTTPServer
	opts    HTTPOptions
	hosts   map[string]bool
	log     *slog.Logger
	ids     *sessionIDs
	listens *listens
	closing atomic.Bool
	// cookieKey signs the inspector's token cookies: made at start, so a
	// cookie is good for this process only.
	cookieKey []byte
}

// HTTPHandler serves the gate over Streamable HTTP (see HTTPHandler and
// HTTPOptions): the revisions with sessions, 2025-03-26 to 2025-11-25,
// whose tool lists are per session, and 2026-07-28, which has none (each
// request names its revision, and the list is the same for everyone).
func (g *Gate) HTTPHandler(o HTTPOptions) *HTTPHandler {
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.SessionIdle <= 0 {
		o.SessionIdle = DefaultSessionIdle
	}
	if o.SessionRecent <= 0 {
		o.SessionRecent = DefaultSessionRecent
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	h := &HTTPHandler{g: g, opts: o, log: g.log, hosts: map[string]bool{}, cookieKey: make([]byte, 32)}
	rand.Read(h.cookieKey)
	for _, host := range o.Hosts {
		h.hosts[normalHost(host)] = true
	}
	h.ids = newSessionIDs(o.MaxSessions, o.SessionRecent, time.Now, h.end)
	if o.Route != "" {
		if err := CheckRoute(o.Route); err != nil {
			g.log.Error("HTTP: the route is left out of session ids", "err", err)
		} else {
			h.ids.prefix = o.Route + "."
		}
	}
	h.listens = newListens(o.MaxSessions)
	h.inner = server.NewStreamableHTTPServer(g.Server(),
		server.WithSessionIdManagerResolver(h.ids),
		server.WithSessionIdleTTL(o.SessionIdle),
		server.WithHeartbeatInterval(min(keepAlive, o.SessionIdle/3)),
		server.WithStreamableHTTPProtocolVersions(httpVersions...),
		server.WithStreamableHTTPLogger(g.log),
		// The Host check above is stricter than mcp-go's (which checks
		// only requests that came over loopback) and knows the names
		// the server was given.
		server.WithDisableLocalhostProtection(true),
	)
	return h
}

// ListenHosts returns the Host values a listener's address is reached by:
// its address, or every address of the machine's interfaces when it
// listens on all of them (0.0.0.0, ::).
func ListenHosts(addr net.Addr) []string {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return nil
	}
	if !ap.Addr().IsUnspecified() {
		return []string{ap.Addr().Unmap().String()}
	}
	var out []string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap().String())
		}
	}
	return out
}

// Close ends every session and its stream; later requests get 503.
func (h *HTTPHandler) Close() {
	h.closing.Store(true)
	h.inner.CloseSessions(context.Background())
}

func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/mcp" {
		http.NotFound(w, r)
		return
	}
	switch r.Method {
	case http.MethodPost, http.MethodGet, http.MethodDelete:
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	r, ok := h.admit(w, r, false)
	if !ok {
		return
	}
	if h.closing.Load() {
		http.Error(w, "Service Unavailable: the server is shutting down", http.StatusServiceUnavailable)
		return
	}
	// A POST of a revision newer than those served is mcp-go's to answer:
	// a client probing with server/discover is told which ones are (and
	// settles on one).
	if v := r.Header.Get(mcp.HeaderProtocolVersion); v != "" && !slices.Contains(httpVersions, v) && !(r.Method == http.MethodPost && mcp.IsModernProtocol(v)) {
		http.Error(w, fmt.Sprintf("Bad Request: protocol version %s is not served over Streamable HTTP here (%s)", v, strings.Join(httpVersions, ", ")), http.StatusBadRequest)
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.post(w, r)
	case http.MethodGet:
		h.get(w, r)
	case http.MethodDelete:
		if id := h.sessionID(w, r); id != "" {
			if !h.ids.known(id) {
				notFound(w)
				return
			}
			h.inner.ServeHTTP(w, r)
		}
	}
}

// admit answers a request that fails the checks every request to the
// server passes, and reports whether it passed: its Host names the server,
// its Origin (if any) is the server's own, and it carries a bearer token
// the options take (when they take one: Token, Authenticator). A
// browser's request (browser) may carry the inspector's cookie instead
// (see Guard). The request it returns has its principal in its context
// (WithPrincipal; see principal).
func (h *HTTPHandler) admit(w http.ResponseWriter, r *http.Request, browser bool) (*http.Request, bool) {
	if !h.admitHost(w, r) {
		return nil, false
	}
	p, ok := h.principal(w, r, browser)
	if !ok {
		return nil, false
	}
	return r.WithContext(WithPrincipal(r.Context(), p)), true
}

// admitHost answers a request whose Host does not name the server, or
// whose Origin is not the server's own (403), and reports whether they
// pass. A browser sends an Origin with a page's POSTs and its scripts'
// cross-origin requests (not with a GET of an image, a script or a link:
// Guard's Fetch Metadata check covers those): a page of another origin,
// even one on another port of the same host (same-site to a browser, and
// sent the host's cookies), may not call the server. stategate answers no CORS
// preflight: a browser-based MCP client must be served from the server's
// own origin (a client that is not a browser sends no Origin).
func (h *HTTPHandler) admitHost(w http.ResponseWriter, r *http.Request) bool {
	if !h.allowedHost(r.Host) {
		http.Error(w, fmt.Sprintf("Forbidden: Host %q is not an address of this server (add it with --allow-host)", r.Host), http.StatusForbidden)
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && !sameOrigin(r, o) {
		http.Error(w, fmt.Sprintf("Forbidden: foreign Origin (only pages of this server's own origin, %s, may send it requests)", ownOrigin(r)), http.StatusForbidden)
		return false
	}
	return true
}

// TokenCookiePrefix begins the name of the cookie that carries a browser's
// principal, proven by a bearer token (see Guard); the server's port ends
// it (stategate-token-3001). A browser sends a host's cookies to every
// port of it: each server has its own.
const TokenCookiePrefix = "stategate-token-"

// Guard serves other pages beside /mcp (the inspector) behind the checks
// of /mcp: the Host must name the server and the Origin, if any, be its
// own, and with a token (HTTPOptions.Token, or one the Authenticator
// takes) the request must carry it. The request's principal is in its
// context, as for /mcp (WithPrincipal).
//
// A browser cannot send an Authorization header, so Guard also takes the
// token once as a query parameter (?token=TOKEN): it answers with a
// cookie and a redirect to the same address without the parameter; later
// requests carry the cookie. The cookie (TokenCookiePrefix and the port,
// HttpOnly, SameSite=Strict, Secure over https, for the server's whole
// path) holds the token's principal (subject, roles, how it was
// authenticated) and the token's expiry, with an HMAC, under a key this
// HTTPHandler made, of those and the server's origin as the request named
// it: it is not the token, and is worth nothing to another server or
// process (even with the same token), under another Host or port, after
// the token's expiry (the cookie expires with it) or after a restart (open
// the page with ?token= again). A token refused is 401.
//
// Fetch Metadata keeps other pages out that send no Origin: a request a
// browser says another origin made (Sec-Fetch-Site other than
// same-origin) is 403 unless it is a top-level navigation (a link
// followed, an address typed): a page of another port or site may link to
// the inspector, but not load its pages, scripts or event stream, nor
// post to it.
func (h *HTTPHandler) Guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.admitHost(w, r) {
			return
		}
		if fromElsewhere(r) {
			http.Error(w, "Forbidden: another site's page may link to the inspector, not load it, post to it or follow its updates", http.StatusForbidden)
			return
		}
		if q := r.URL.Query(); q.Has("token") && (h.opts.Token != "" || h.opts.Authenticator != nil) {
			h.signIn(w, r, q.Get("token"))
			return
		}
		r, ok := h.admit(w, r, true)
		if !ok {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// fromElsewhere reports a browser's request that a page of another origin
// made (Fetch Metadata), but for a top-level navigation.
func fromElsewhere(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin":
		return false
	}
	navigation := (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.Header.Get("Sec-Fetch-Mode") == "navigate"
	dest := r.Header.Get("Sec-Fetch-Dest")
	return !navigation || (dest != "" && dest != "document")
}

func (h *HTTPHandler) post(w http.ResponseWriter, r *http.Request) {
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	env, e := readEnvelope(body)
	if e != nil {
		writeJSONRPC(w, http.StatusBadRequest, e)
		return
	}
	ctx := r.Context()
	modernReq := mcp.IsModernProtocol(env.protocolVersion()) || mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion))
	switch {
	case modernReq:
		// Revision 2026-07-28: no session. What it asks of a request is
		// said at once, all of it.
		if e := checkModern(r.Header, env); e != nil {
			writeJSONRPC(w, http.StatusBadRequest, e)
			return
		}
		// A subscriptions/listen stream lasts, so those are bounded as
		// sessions are (see listens).
		if env.method == string(mcp.MethodSubscriptionsListen) {
			var stop context.CancelFunc
			ctx, stop = context.WithCancel(ctx)
			defer stop()
			x, ok := h.listens.acquire(peerOf(r.RemoteAddr), stop)
			if !ok {
				w.Header().Set("Retry-After", strconv.Itoa(int(maxRetryAfter/time.Second)))
				http.Error(w, fmt.Sprintf("Service Unavailable: the %d subscriptions/listen streams are open, and none may end for one of this client's; try again later", h.opts.MaxSessions), http.StatusServiceUnavailable)
				return
			}
			defer h.listens.release(x)
		}
	case env.method == string(mcp.MethodServerDiscover):
		// A client probing for revision 2026-07-28 with an earlier one
		// (it falls back to initialize on an error): no session either.
	case env.method == string(mcp.MethodInitialize):
		res, wait := h.ids.reserve(peerOf(r.RemoteAddr))
		if res == nil {
			secs := int((wait + time.Second - 1) / time.Second)
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			http.Error(w, fmt.Sprintf("Service Unavailable: the %d sessions are in use, and none may end for a new one of this client's now; try again in %d s", h.opts.MaxSessions, secs), http.StatusServiceUnavailable)
			return
		}
		defer res.release()
		ctx = context.WithValue(ctx, reservationKey{}, res)
	default:
		id := h.sessionID(w, r)
		if id == "" {
			return
		}
		u := h.ids.begin(id)
		if u == nil {
			notFound(w)
			return
		}
		defer h.ids.finish(u)
	}
	id := r.Header.Get(server.HeaderKeySessionID)
	a := newAnswer(w, id)
	var s *session
	if id != "" && !modernReq {
		if s = h.g.sessionByID(id); s != nil {
			if s.pending.Swap(false) {
				a.pending = true // a list_changed waited for this request
			}
			a.events = s.takeQueued() // and these notifications
		}
	}
	a.fix = h.g.fixAnswer(ctx, env, s, modernReq)
	h.inner.Handle(a, &server.HTTPRequest{Method: r.Method, URL: r.URL, Header: r.Header, Body: body,
		Context: context.WithValue(ctx, answerKey{}, a)})
	undelivered, left := a.finish()
	if s != nil {
		if undelivered {
			s.pending.Store(true) // not carried: the next request carries it
		}
		for _, ev := range left {
			s.queue(ev)
		}
	}
}

// readBody reads a POST's body within the size and time bounds, or answers
// the request and reports false. The read deadline is lifted once the body
// is in: a call may take longer than its body did to arrive (and net/http
// ends a request's context when a read past the deadline fails).
func (h *HTTPHandler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(h.opts.BodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBody))
	if err != nil {
		// The deadline stays: net/http drains what is left of a body
		// before it answers, and must not wait for it. The connection is
		// closed after the answer.
		w.Header().Set("Connection", "close")
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			http.Error(w, fmt.Sprintf("Request Entity Too Large: a message may have at most %d bytes", h.opts.MaxBody), http.StatusRequestEntityTooLarge)
		case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
			http.Error(w, "Request Timeout: the body took too long to arrive", http.StatusRequestTimeout)
		default:
			http.Error(w, "Bad Request: cannot read the body", http.StatusBadRequest)
		}
		return nil, false
	}
	_ = rc.SetReadDeadline(time.Time{})
	return body, true
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// get serves a session's stream of server messages: one per session (409
// for a second one). The stream ends with its session, and when a write
// to it is not done within streamWriteTimeout (see stream).
func (h *HTTPHandler) get(w http.ResponseWriter, r *http.Request) {
	id := h.sessionID(w, r)
	if id == "" {
		return
	}
	ctx, stop := context.WithCancel(r.Context())
	defer stop()
	u, err := h.ids.openStream(id, stop)
	switch {
	case errors.Is(err, errStreaming):
		http.Error(w, "Conflict: the session already has a stream", http.StatusConflict)
		return
	case err != nil:
		notFound(w)
		return
	}
	defer h.ids.closeStream(u)
	h.g.setStreaming(id, true)
	defer h.g.setStreaming(id, false)
	h.inner.Handle(newStream(w, streamWriteTimeout, stop), &server.HTTPRequest{Method: r.Method, URL: r.URL, Header: r.Header, Context: ctx})
}

// sessionID returns the session id a request names, or answers it with
// 400 and returns "" when it names none.
func (h *HTTPHandler) sessionID(w http.ResponseWriter, r *http.Request) string {
	id := r.Header.Get(server.HeaderKeySessionID)
	if id == "" {
		http.Error(w, "Bad Request: Mcp-Session-Id header is required", http.StatusBadRequest)
	}
	return id
}

// notFound answers a request naming a session this process did not issue
// or that ended.
func notFound(w http.ResponseWriter) {
	http.Error(w, "Not Found: unknown or ended session", http.StatusNotFound)
}

func (h *HTTPHandler) allowedHost(host string) bool {
	n := normalHost(host)
	return isLoopbackName(n) || h.hosts[n]
}

// origin is a web origin: a scheme, a host (as normalHost has it) and a
// port (the scheme's default when none is named).
type origin struct{ scheme, host, port string }

func (o origin) String() string { return o.scheme + "://" + net.JoinHostPort(o.host, o.port) }

var defaultPorts = map[string]string{"http": "80", "https": "443"}

func originOf(scheme, hostport string) origin {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	if port == "" {
		port = defaultPorts[scheme]
	}
	return origin{scheme, normalHost(host), port}
}

// ownOrigin is the server's origin as a request reached it: https over
// TLS or when the proxy in front says so (X-Forwarded-Proto: https; a
// page of another origin cannot send that header, which is not one a
// browser lets it set without a preflight), else http; and the Host's
// host and port.
func ownOrigin(r *http.Request) origin {
	scheme := "http"
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	if r.TLS != nil || strings.EqualFold(strings.TrimSpace(proto), "https") {
		scheme = "https"
	}
	return originOf(scheme, r.Host)
}

// sameOrigin reports whether an Origin header names the server's own
// origin, as the request reached it.
func sameOrigin(r *http.Request, o string) bool {
	u, err := url.Parse(o)
	if err != nil || u.Host == "" || defaultPorts[u.Scheme] == "" || u.User != nil || (u.Path != "" && u.Path != "/") {
		return false
	}
	return originOf(u.Scheme, u.Host) == ownOrigin(r)
}

// normalHost is a Host header's host, without its port or brackets, in
// lower case.
func normalHost(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap().String()
	}
	return strings.ToLower(host)
}

func isLoopbackName(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

func writeJSONRPC(w http.ResponseWriter, status int, msg any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(msg)
}
