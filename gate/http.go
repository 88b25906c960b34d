package gate

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
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
	// "Authorization: Bearer TOKEN" (401 otherwise).
	Token string
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
	h := &HTTPHandler{g: g, opts: o, log: g.log, hosts: map[string]bool{}}
	for _, host := range o.Hosts {
		h.hosts[normalHost(host)] = true
	}
	h.ids = newSessionIDs(o.MaxSessions, o.SessionRecent, time.Now, h.end)
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
	if !h.admit(w, r, false) {
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
// its Origin (if any) too, and it carries the bearer token (when one is
// set). A browser's request (browser) may carry the token as the
// inspector's cookie instead (see Guard).
func (h *HTTPHandler) admit(w http.ResponseWriter, r *http.Request, browser bool) bool {
	if !h.admitHost(w, r) {
		return false
	}
	if h.opts.Token != "" && !h.authorized(r) && !(browser && h.cookieAuthorized(r)) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="stategate"`)
		msg := "Unauthorized: a bearer token is required"
		if browser {
			msg += " (in a browser, open the page once with ?token=TOKEN: a cookie then carries it)"
		}
		http.Error(w, msg, http.StatusUnauthorized)
		return false
	}
	return true
}

// admitHost answers a request whose Host or Origin does not name the
// server (403), and reports whether they do.
func (h *HTTPHandler) admitHost(w http.ResponseWriter, r *http.Request) bool {
	if !h.allowedHost(r.Host) {
		http.Error(w, fmt.Sprintf("Forbidden: Host %q is not an address of this server (add it with --allow-host)", r.Host), http.StatusForbidden)
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && !h.allowedOrigin(o) {
		http.Error(w, "Forbidden: foreign Origin", http.StatusForbidden)
		return false
	}
	return true
}

// TokenCookie is the cookie that carries the bearer token's proof for a
// browser (see Guard).
const TokenCookie = "stategate-token"

// Guard serves other pages beside /mcp (the inspector) behind the checks
// of /mcp: the Host and Origin must name the server, and with a token
// (HTTPOptions.Token) the request must carry it. A browser cannot send an
// Authorization header, so Guard also takes the token once as a query
// parameter (?token=TOKEN): it answers with a cookie (TokenCookie, HttpOnly,
// SameSite=Strict, for the server's whole path, holding a hash of the
// token rather than the token) and a redirect to the same address without
// the parameter; later requests carry the cookie. A wrong token is 401.
func (h *HTTPHandler) Guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if tok := q.Get("token"); h.opts.Token != "" && q.Has("token") {
			if !h.admitHost(w, r) {
				return
			}
			if subtle.ConstantTimeCompare([]byte(tok), []byte(h.opts.Token)) != 1 {
				http.Error(w, "Unauthorized: wrong token", http.StatusUnauthorized)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: TokenCookie, Value: h.cookieValue(), Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q.Del("token")
			u := *r.URL
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		if !h.admit(w, r, true) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// cookieValue is what the token cookie holds: a hash of the token, so
// that the cookie, wherever a browser keeps it, is not the token that
// drives the workflows over /mcp.
func (h *HTTPHandler) cookieValue() string {
	sum := sha256.Sum256([]byte("stategate inspector cookie\x00" + h.opts.Token))
	return hex.EncodeToString(sum[:])
}

func (h *HTTPHandler) cookieAuthorized(r *http.Request) bool {
	c, err := r.Cookie(TokenCookie)
	return err == nil && subtle.ConstantTimeCompare([]byte(c.Value), []byte(h.cookieValue())) == 1
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
	switch {
	case mcp.IsModernProtocol(env.protocolVersion()):
		// Revision 2026-07-28: no session. A subscriptions/listen stream
		// lasts, so those are bounded as sessions are (see listens).
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
	if id != "" {
		if s = h.g.sessionByID(id); s != nil && s.pending.Swap(false) {
			a.pending = true // a list_changed waited for this request
		}
	}
	h.inner.Handle(a, &server.HTTPRequest{Method: r.Method, URL: r.URL, Header: r.Header, Body: body,
		Context: context.WithValue(ctx, answerKey{}, a)})
	if a.finish() && s != nil {
		s.pending.Store(true) // not carried: the next request carries it
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

// allowedOrigin accepts a browser page served by this server (its origin
// names an allowed host) or by a loopback host.
func (h *HTTPHandler) allowedOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	return h.allowedHost(u.Host)
}

func (h *HTTPHandler) authorized(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(h.opts.Token)) == 1
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
