package gate

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// This file holds every place where the gate works around what mcp-go
// v1.2.1 lacks, each with the change to mcp-go that would remove it. The
// gate uses mcp-go's public API only.

// plug adds the gate to an mcp-go server (Bind).
//
//   - Listing by state. mcp-go's tool filter (WithToolFilter) gates
//     listing and calling alike, and answers a call to a filtered tool
//     with a bare -32602 "tool not found", where the gate answers with
//     FORBIDDEN and the tools allowed now; it is also asked about every
//     call. So the gate lists through an AfterListTools hook instead: it
//     rewrites the page mcp-go listed (listTools), and calls reach the
//     tools' handlers, which refuse. (With a host's pagination, a page
//     may then hold fewer tools than the limit, or none, and a cursor.)
//     Would remove it: a list-only filter, or a filter told whether it is
//     asked for a list or a call.
//   - Calls to unknown tools. mcp-go answers a call of a tool nobody
//     registered with the JSON-RPC error MCP asks for (-32602, naming
//     it), but says nothing of the tools allowed instead; on the gate's
//     own transports the gate adds them, as the error's data
//     (fixAnswer). Would remove it: a handler for unknown tools, or data
//     of the host's own on that error.
//   - Notifications to the sessions concerned. With the tools
//     capability's listChanged, mcp-go tells every client whenever a
//     tool is registered or removed, which is what clients of revision
//     2026-07-28 listen for (subscriptions/listen); the gate registers a
//     tool only when its definition changed, and tells each session of an
//     earlier revision when its own list changed (tellListChanged). Would
//     remove it: per-session list notifications.
//   - Protocol revisions. mcp-go negotiates any revision it knows,
//     2024-11-05 included, which has no Streamable HTTP (negotiate).
//     Would remove it: versions negotiated per transport.
//   - Resources. mcp-go answers an error of a resource handler with
//     -32603 (internal error), whatever it wraps: the gate's "resource
//     not found" gets MCP's code (-32002; -32602 under 2026-07-28) on
//     its own transports (fixAnswer). Its sessions track no
//     subscriptions (SessionWithResourceSubscriptions), and its
//     resources/subscribe acknowledges any URI: the gate checks a
//     subscription in a hook that sees every request first
//     (OnRequestInitialization, whose error is -32600, which fixAnswer
//     makes -32002 too) and records it after (AfterSubscribe). Under
//     2026-07-28, a listen stream's resource subscriptions reach no
//     session the gate knows: it leaves them out of the acknowledgement.
//     mcp-go lists no resource templates: a subscription to a URI a
//     host's own template makes is refused (a host's own resources are
//     not). Would remove it: handler errors that carry their code
//     (ErrResourceNotFound), a subscription check in the server, and
//     per-URI delivery on listen streams.
func (g *Gate) plug(srv *server.MCPServer) {
	hooks := srv.GetHooks()
	if hooks == nil {
		hooks = &server.Hooks{}
		server.WithHooks(hooks)(srv)
	}
	hooks.AddOnRegisterSession(func(ctx context.Context, s server.ClientSession) { g.addSession(ctx, s.SessionID()) })
	hooks.AddOnUnregisterSession(func(ctx context.Context, s server.ClientSession) { g.dropSession(s.SessionID()) })
	hooks.AddAfterInitialize(func(ctx context.Context, _ any, _ *mcp.InitializeRequest, result *mcp.InitializeResult) {
		if result == nil {
			return
		}
		if result.Capabilities.Tools != nil {
			result.Capabilities.Tools.ListChanged = true
		}
		negotiate(ctx, result)
	})
	hooks.AddAfterListTools(func(ctx context.Context, _ any, _ *mcp.ListToolsRequest, result *mcp.ListToolsResult) {
		if result != nil {
			result.Tools = g.listTools(ctx, result.Tools)
		}
	})
	g.plugResources(srv, hooks) // resources.go
	server.WithToolCapabilities(true)(srv)
	// Revision 2026-07-28's tool list is the same for every caller, and
	// changes only with the machine files and the upstream servers.
	server.WithMethodCacheHints(mcp.MethodToolsList, ListTTL.Milliseconds(), mcp.CacheScopePrivate)(srv)
	srv.Use(g.gateBound)
}

// gateBound is the gate's tool handler middleware: a call of a bound tool
// (whose handler is the host's, which the host may register again at any
// time) goes through callBound; any other goes to its handler.
func (g *Gate) gateBound(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if ref, ok := g.lookup(req.Params.Name); ok && ref.kind == boundTool {
			return g.callBound(ctx, ref, req, next)
		}
		g.setMu.Lock()
		b, berr := g.bindings[req.Params.Name], g.bindErrs[req.Params.Name]
		g.setMu.Unlock()
		switch {
		case berr != nil:
			return errorResult("FORBIDDEN", "FORBIDDEN: "+berr.Error(), nil), nil
		case b != nil:
			// Bound to a workflow that is not served (now).
			return errorResult("FORBIDDEN", fmt.Sprintf("FORBIDDEN: %s is bound to the %s workflow, which is not served now", b.name, b.workflow), nil), nil
		}
		return next(ctx, req)
	}
}

// unknownTool was a hidden tool that calls to unknown tools were routed
// to; a tool of that name is never listed.
const unknownTool = "stategate.unknown-tool"

// fixAnswer returns what rewrites the gate's own transports make to
// mcp-go's answer to a message, nil when none: a call of a tool nobody
// serves gets MCP's error (-32602) with the tool named and the tools
// allowed now as its data; a tools/list with a cursor this server did not
// give gets a message that says so (mcp-go's is base64's).
func (g *Gate) fixAnswer(ctx context.Context, env *envelope, s *session, modern bool) func(msg []byte) ([]byte, bool) {
	switch env.method {
	case string(mcp.MethodToolsCall):
		tool := env.toolName()
		return func(msg []byte) ([]byte, bool) {
			return rewriteError(msg, func(e *mcp.JSONRPCErrorDetails) bool {
				if e.Code != mcp.INVALID_PARAMS || !strings.Contains(e.Message, server.ErrToolNotFound.Error()) {
					return false
				}
				allowed := g.listedNames(context.WithoutCancel(ctx), s, modern)
				e.Message = fmt.Sprintf("Unknown tool: %s. Tools available now: %s", tool, joinTools(allowed))
				e.Data = map[string]any{"tool": tool, "allowed": allowed}
				return true
			})
		}
	case string(mcp.MethodResourcesRead), string(mcp.MethodResourcesSubscribe):
		code := mcp.RESOURCE_NOT_FOUND
		if modern {
			code = mcp.INVALID_PARAMS
		}
		return func(msg []byte) ([]byte, bool) {
			return rewriteError(msg, func(e *mcp.JSONRPCErrorDetails) bool {
				if (e.Code != mcp.INTERNAL_ERROR && e.Code != mcp.INVALID_REQUEST) || !strings.HasPrefix(e.Message, errNoResource.Error()) && !strings.HasPrefix(e.Message, errTooManySubs) {
					return false
				}
				if strings.HasPrefix(e.Message, errTooManySubs) {
					e.Code = mcp.INVALID_PARAMS
				} else {
					e.Code = code
				}
				return true
			})
		}
	case string(mcp.MethodToolsList):
		return func(msg []byte) ([]byte, bool) {
			return rewriteError(msg, func(e *mcp.JSONRPCErrorDetails) bool {
				if e.Code != mcp.INVALID_PARAMS || !strings.Contains(e.Message, "base64") {
					return false
				}
				e.Message = "Invalid params: the cursor is not one this server gave (a cursor is opaque: pass on the nextCursor of a tools/list, or list from the start without one)"
				e.Data = nil
				return true
			})
		}
	}
	return nil
}

// rewriteError rewrites a JSON-RPC error message (a line, a body, or an
// event of an event stream) when fix changes its error, and reports
// whether it did; other messages are returned as they are.
func rewriteError(msg []byte, fix func(*mcp.JSONRPCErrorDetails) bool) ([]byte, bool) {
	if !bytes.Contains(msg, []byte(`"error"`)) {
		return msg, false
	}
	prefix, body, suffix := []byte(nil), msg, []byte(nil)
	const event = "event: message\ndata: "
	if bytes.HasPrefix(msg, []byte(event)) {
		prefix, body = msg[:len(event)], msg[len(event):]
	}
	trimmed := bytes.TrimRight(body, "\n")
	suffix = body[len(trimmed):]
	var m struct {
		JSONRPC string                   `json:"jsonrpc"`
		ID      json.RawMessage          `json:"id"`
		Error   *mcp.JSONRPCErrorDetails `json:"error"`
	}
	if json.Unmarshal(trimmed, &m) != nil || m.Error == nil || !fix(m.Error) {
		return msg, false
	}
	out, err := json.Marshal(m)
	if err != nil {
		return msg, false
	}
	return append(append(append([]byte(nil), prefix...), out...), suffix...), true
}

// negotiate keeps an initialize's protocol version within what the
// transport serves: mcp-go accepts any revision it knows, 2024-11-05
// included, which has no Streamable HTTP; the client then gets the newest
// one the transport serves.
func negotiate(ctx context.Context, result *mcp.InitializeResult) {
	served := server.SupportedProtocolVersionsFromContext(ctx)
	if slices.Contains(served, result.ProtocolVersion) {
		return
	}
	for _, v := range served {
		if !mcp.IsModernProtocol(v) {
			result.ProtocolVersion = v
			if s, ok := server.ClientSessionFromContext(ctx).(interface{ SetProtocolVersion(string) }); ok {
				s.SetProtocolVersion(v)
			}
			return
		}
	}
}

// tellListChanged tells a session that its tool list changed.
//
// mcp-go's Streamable HTTP transport forwards a session's notifications
// into the answer of its request from a goroutine of its own, and drops
// one it has taken but not yet written when the answer is written first
// (one call in twenty on two cores). On the gate's own HTTP endpoint the
// gate therefore writes list_changed into answers itself: into the answer
// of the request that changed the list, ahead of the result, or, for a
// session with no stream open, into the answer of its next request
// (pending). Elsewhere (stdio, which writes notifications as they are
// sent; a host's own transport) mcp-go sends it, once until the session
// makes a request or opens a stream (notified). Would remove it: the
// forwarder writing what it took even when the answer is written first.
func (g *Gate) tellListChanged(ctx context.Context, s *session) {
	if a := answerOf(ctx); a != nil && a.session == s.id && a.listChanged() {
		return
	}
	if s.answered.Load() && !s.streaming.Load() {
		s.pending.Store(true)
		return
	}
	if !s.streaming.Load() && !s.notified.CompareAndSwap(false, true) {
		return // one waits to be delivered already
	}
	if !g.sendListChanged(s) {
		s.notified.Store(false) // not told: the next change tries again
	}
}

// sendListChanged sends list_changed to a session through mcp-go.
func (g *Gate) sendListChanged(s *session) bool {
	srv := g.srv.Load()
	if srv == nil {
		return false
	}
	if err := srv.SendNotificationToSpecificClient(s.id, string(mcp.MethodNotificationToolsListChanged), nil); err != nil {
		g.log.Debug("cannot notify session", "session", s.name, "err", err)
		return false
	}
	return true
}

// answerKey carries a POST's answer in its request's context.
type answerKey struct{}

func answerOf(ctx context.Context) *answer {
	a, _ := ctx.Value(answerKey{}).(*answer)
	return a
}

// listChangedEvent is notifications/tools/list_changed as an event of an
// event stream.
const listChangedEvent = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n"

// answer is a POST's answer as mcp-go writes it (its HTTPResponseWriter),
// through which the gate writes list_changed for the request's session
// (see tellListChanged): ahead of a JSON answer, by turning the answer
// into an event stream of two events; on an answer already streaming, as
// an event of its own.
type answer struct {
	w       http.ResponseWriter
	flusher http.Flusher
	session string // the request's session id, "" when none
	// fix rewrites mcp-go's answer (fixAnswer), when set.
	fix func([]byte) ([]byte, bool)

	mu       sync.Mutex
	pending  bool     // list_changed to write ahead of the answer
	events   []string // other notifications to write ahead of it (tellSession)
	started  bool     // the status was written
	stream   bool     // the answer is an event stream
	wrapped  bool     // a JSON answer made an event stream: its body, buffered
	body     []byte   // the wrapped answer's body
	finished bool
}

func newAnswer(w http.ResponseWriter, session string) *answer {
	a := &answer{w: w, session: session}
	a.flusher, _ = w.(http.Flusher)
	return a
}

func (a *answer) Header() http.Header { return a.w.Header() }

func (a *answer) WriteHeader(code int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.writeHeader(code)
}

func (a *answer) writeHeader(code int) {
	if a.started {
		return
	}
	a.started = true
	h := a.w.Header()
	ct := h.Get("Content-Type")
	switch {
	case (a.pending || len(a.events) > 0) && code == http.StatusOK && strings.HasPrefix(ct, "application/json"):
		a.stream, a.wrapped = true, true
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Del("Content-Length")
		a.w.WriteHeader(code)
	case strings.HasPrefix(ct, "text/event-stream"):
		a.stream = true
		a.w.WriteHeader(code)
		if a.pending {
			a.pending = false
			_, _ = a.w.Write([]byte(listChangedEvent))
		}
		for _, ev := range a.events {
			_, _ = io.WriteString(a.w, ev)
		}
		a.events = nil
	default:
		a.w.WriteHeader(code)
	}
}

func (a *answer) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.writeHeader(http.StatusOK)
	if a.wrapped {
		a.body = append(a.body, p...)
		return len(p), nil
	}
	if a.fix != nil {
		if q, fixed := a.fix(p); fixed {
			if _, err := a.w.Write(q); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	return a.w.Write(p)
}

func (a *answer) Flush() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.wrapped && a.flusher != nil {
		a.flusher.Flush()
	}
}

func (a *answer) CanStream() bool { return a.flusher != nil }

// SetWriteDeadline bounds the writes to a client that stalls.
func (a *answer) SetWriteDeadline(t time.Time) error {
	return http.NewResponseController(a.w).SetWriteDeadline(t)
}

// listChanged writes list_changed into the answer, or ahead of it; false
// when it is too late (a JSON answer already written).
func (a *answer) listChanged() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.finished || a.started && !a.stream:
		return false
	case !a.started || a.wrapped:
		a.pending = true
	default: // streaming
		_, _ = a.w.Write([]byte(listChangedEvent))
		if a.flusher != nil {
			a.flusher.Flush()
		}
	}
	return true
}

// notify writes a notification (an event) into the answer, or ahead of
// it, as listChanged does list_changed; false when it is too late.
func (a *answer) notify(ev string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.finished || a.started && !a.stream:
		return false
	case !a.started || a.wrapped:
		if !slices.Contains(a.events, ev) {
			a.events = append(a.events, ev)
		}
	default: // streaming
		_, _ = io.WriteString(a.w, ev)
		if a.flusher != nil {
			a.flusher.Flush()
		}
	}
	return true
}

// finish ends the answer once mcp-go has written it: a JSON answer made
// an event stream goes out with the notifications before it, in one
// write. It reports whether a list_changed is left that the answer did
// not carry (an answer with no body, or an error), and the other
// notifications left.
func (a *answer) finish() (undelivered bool, left []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.finished = true
	if !a.wrapped {
		return a.pending, a.events
	}
	// Written in parts into net/http's buffer: one write to the client.
	if a.pending {
		_, _ = io.WriteString(a.w, listChangedEvent)
	}
	for _, ev := range a.events {
		_, _ = io.WriteString(a.w, ev)
	}
	body := bytes.TrimRight(a.body, "\n")
	if a.fix != nil {
		body, _ = a.fix(body)
	}
	_, _ = io.WriteString(a.w, "event: message\ndata: ")
	_, _ = a.w.Write(body)
	_, _ = io.WriteString(a.w, "\n\n")
	return false, nil
}

// discard is a response writer that writes nowhere: the answer to a
// request the gate makes of mcp-go's handler itself (end).
type discard struct{ h http.Header }

func (d *discard) Header() http.Header {
	if d.h == nil {
		d.h = http.Header{}
	}
	return d.h
}
func (d *discard) WriteHeader(int)             {}
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) Flush()                      {}
func (d *discard) CanStream() bool             { return false }

// end ends a session as a DELETE would. mcp-go has no call to end a
// session of its Streamable HTTP transport (its state, its GET stream,
// the hooks that hear of it), so the gate makes a DELETE of its own
// through the transport's handler. Would remove it: a public
// StreamableHTTPServer.CloseSession(id).
func (h *HTTPHandler) end(id string) {
	hdr := http.Header{}
	hdr.Set(server.HeaderKeySessionID, id)
	h.inner.Handle(&discard{}, &server.HTTPRequest{Method: http.MethodDelete, Header: hdr, Context: context.Background()})
}

// The session ids of the HTTP endpoint (sessionIDs, httpsessions.go) are
// issued and checked by the gate: mcp-go's own manager accepts any id on a
// GET (and makes a session of it), and has no bound on sessions. mcp-go
// asks for a new id with no word of the request it is for, so the gate
// hands it, through the request's context, the session it reserved for
// that request (ResolveSessionIdManager): the bound and the peer's share
// are kept when the request is admitted, not after. Would remove it: a
// bounded manager that accepts only the ids it issued, told the request.

// reservationKey carries an initialize request's reservation in its
// context.
type reservationKey struct{}

// ResolveSessionIdManager is the manager of a request: its reservation for
// an initialize request the gate admitted, the sessions' otherwise (and
// for the sweeper, which has no request).
func (s *sessionIDs) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	if r != nil {
		if res, ok := r.Context().Value(reservationKey{}).(*reservation); ok {
			return res
		}
	}
	return s
}

// Generate issues a new session id: one of no peer, bounded by nothing
// (the gate's initialize requests have a reservation, whose Generate
// mcp-go calls instead; nothing else asks for a new id).
func (s *sessionIDs) Generate() string {
	id := s.prefix + newSessionID()
	s.issue(&reservation{ids: s, issued: true}, id) // counted, not reserved
	return id
}

// newSessionID is 128 random bits.
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Validate accepts the live ids it issued.
func (s *sessionIDs) Validate(id string) (isTerminated bool, err error) {
	if !s.known(id) {
		return false, errUnknownSession
	}
	return false, nil
}

// Terminate ends a session, and its GET stream: mcp-go ends neither
// stream nor session of a DELETE's stream (nor of the sweeper's).
func (s *sessionIDs) Terminate(id string) (isNotAllowed bool, err error) {
	s.terminate(id)
	return false, nil
}

// Generate issues the reserved session's id.
func (r *reservation) Generate() string {
	id := r.ids.prefix + newSessionID()
	r.ids.issue(r, id)
	return id
}

func (r *reservation) Validate(id string) (bool, error)  { return r.ids.Validate(id) }
func (r *reservation) Terminate(id string) (bool, error) { return r.ids.Terminate(id) }

// stream is a GET stream's writer as mcp-go writes it: each write and
// flush must be done within timeout, or the stream ends (cancel). mcp-go
// sets no deadline on a GET stream's writes: a client that stops reading
// would hold its stream until the connection dies. Its pings (keepAlive)
// make a write every keepAlive, so a stream whose client stopped reading
// ends once the connection's buffers are full. Would remove it: a write
// deadline on GET streams, and their end on a write that fails.
type stream struct {
	w         http.ResponseWriter
	rc        *http.ResponseController
	timeout   time.Duration
	cancel    context.CancelFunc
	canStream bool
}

func newStream(w http.ResponseWriter, timeout time.Duration, cancel context.CancelFunc) *stream {
	_, ok := w.(http.Flusher)
	return &stream{w: w, rc: http.NewResponseController(w), timeout: timeout, cancel: cancel, canStream: ok}
}

func (s *stream) Header() http.Header { return s.w.Header() }

func (s *stream) WriteHeader(code int) {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	s.w.WriteHeader(code)
}

func (s *stream) Write(p []byte) (int, error) {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	n, err := s.w.Write(p)
	if err != nil {
		s.cancel()
	}
	return n, err
}

func (s *stream) Flush() {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if err := s.rc.Flush(); err != nil {
		s.cancel()
	}
}

func (s *stream) CanStream() bool { return s.canStream }
