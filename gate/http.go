package gate

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// httpTransport serves the gate's MCP server over Streamable HTTP, for
// the protocol revisions that have sessions (2025-03-26 to 2025-11-25):
// tool lists are per session.
//
// It is the transport, not the protocol: a JSON-RPC message goes to
// mcp-go's MCPServer.HandleMessage, except the two the gate answers itself
// (fastPath: tools/call and tools/list, which it would otherwise parse four
// or five times over). It is the gate's own rather than mcp-go's
// StreamableHTTPServer because a call's answer is on the hot path: a
// request is handled on the connection's goroutine, and its result goes
// out in one write, with the notifications (list_changed) that the call
// queued for its session ahead of it as server-sent events.
//
//   - POST: one message. initialize starts a session and returns its id
//     in Mcp-Session-Id; any other message needs a live session's id (400
//     without, 404 for one this process did not issue or that ended) and,
//     when it says, a supported MCP-Protocol-Version (400 otherwise).
//     Notifications and responses get 202. A request gets
//     application/json, or text/event-stream when notifications for the
//     session were waiting (and it has no GET stream to take them).
//   - GET: the session's stream of server messages, one at a time (409 for
//     a second), with a comment line every keepAlive.
//   - DELETE: ends the session.
type httpTransport struct {
	srv *server.MCPServer
	// fast, when set, answers and encodes the messages it knows itself.
	fast     fastPath
	log      *slog.Logger
	versions []string

	// idle is how long a session may go without a request (and without a
	// GET stream) before it is ended: clients that vanish without DELETE
	// leave nothing behind.
	idle time.Duration

	bufs sync.Pool // of *bytes.Buffer, for answers

	mu       sync.Mutex
	sessions map[string]*httpSession
	closed   bool
	stop     chan struct{} // closed by Close: ends the sweeper
}

// sessionIdle is how long an unused HTTP session lives.
const sessionIdle = time.Hour

// maxBody bounds a POST's body.
const maxBody = 4 << 20

// keepAlive is how often an idle GET stream gets a comment line, so that
// proxies and clients see it alive.
const keepAlive = 25 * time.Second

// httpSession is an MCP session of the HTTP transport; mcp-go's server
// sends it notifications through its channel.
type httpSession struct {
	id          string
	notes       chan mcp.JSONRPCNotification
	initialized atomic.Bool
	streaming   atomic.Bool   // a GET stream takes the notifications
	lastSeen    atomic.Int64  // UnixNano of its last request
	done        chan struct{} // closed when the session ends
	endOnce     sync.Once
}

func (s *httpSession) SessionID() string { return s.id }
func (s *httpSession) Initialize()       { s.initialized.Store(true) }
func (s *httpSession) Initialized() bool { return s.initialized.Load() }
func (s *httpSession) NotificationChannel() chan<- mcp.JSONRPCNotification {
	return s.notes
}

func (s *httpSession) end() { s.endOnce.Do(func() { close(s.done) }) }

// fastPath is what the gate does itself, faster than mcp-go would.
type fastPath interface {
	// answer answers a request as mcp-go would; it reports false, having
	// done nothing, for a request it leaves to mcp-go.
	answer(ctx context.Context, req *rpcRequest) (mcp.JSONRPCMessage, bool)
	// appendMessage appends a message's JSON as encoding/json would; it
	// reports false, having appended nothing, for a message it leaves to
	// encoding/json.
	appendMessage(dst []byte, msg mcp.JSONRPCMessage) ([]byte, bool)
}

func newHTTPTransport(srv *server.MCPServer, log *slog.Logger, fast fastPath) *httpTransport {
	t := &httpTransport{srv: srv, log: log, fast: fast, versions: mcp.LegacyProtocolVersions(), idle: sessionIdle,
		sessions: map[string]*httpSession{}, stop: make(chan struct{})}
	go t.sweeper()
	return t
}

// sweeper ends idle sessions, until Close.
func (t *httpTransport) sweeper() {
	tick := time.NewTicker(t.idle / 12)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case now := <-tick.C:
			t.sweep(now)
		}
	}
}

// sweep ends the sessions idle since before now-t.idle.
func (t *httpTransport) sweep(now time.Time) {
	cut := now.Add(-t.idle).UnixNano()
	var idle []string
	t.mu.Lock()
	for id, s := range t.sessions {
		if !s.streaming.Load() && s.lastSeen.Load() < cut {
			idle = append(idle, id)
		}
	}
	t.mu.Unlock()
	for _, id := range idle {
		t.log.Debug("ending an idle session", "session", id)
		t.close(id)
	}
}

func (t *httpTransport) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		t.post(w, r)
	case http.MethodGet:
		t.get(w, r)
	case http.MethodDelete:
		t.delete(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "Method not allowed", http.StatusMethodNotAllowed)
	}
}

// rpcRequest is a JSON-RPC message as the transport reads it, once: enough
// to route it, and the parameters for the fast path.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  fastParams      `json:"params"`
	// oddParams is set when the parameters are not of the shape the fast
	// path reads (the message goes to mcp-go, which explains).
	oddParams bool
}

// parseRequest reads a message: parameters of another shape than
// fastParams only set oddParams, anything else that does not parse is an
// error.
func parseRequest(body []byte, env *rpcRequest) error {
	err := json.Unmarshal(body, env)
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || (te.Field != "params" && !strings.HasPrefix(te.Field, "params.")) {
		return err
	}
	// The parameters are odd; the rest is read again, in case it is too.
	var plain struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(body, &plain); err != nil {
		return err
	}
	*env = rpcRequest{JSONRPC: plain.JSONRPC, ID: plain.ID, Method: plain.Method, oddParams: true}
	return nil
}

func (t *httpTransport) post(w http.ResponseWriter, r *http.Request) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(w, "Bad Request: Content-Type must be application/json", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "Request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "Bad Request: cannot read the body", http.StatusBadRequest)
		return
	}
	if b := bytes.TrimSpace(body); len(b) > 0 && b[0] == '[' {
		writeRPCError(w, http.StatusBadRequest, nil, mcp.INVALID_REQUEST, "JSON-RPC batches are not supported")
		return
	}
	var env rpcRequest
	if err := parseRequest(body, &env); err != nil {
		writeRPCError(w, http.StatusBadRequest, nil, mcp.PARSE_ERROR, "the body is not valid JSON")
		return
	}
	var s *httpSession
	if env.Method == string(mcp.MethodInitialize) {
		if s, err = t.open(r.Context()); err != nil {
			http.Error(w, "Service unavailable: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	} else if s = t.session(w, r); s == nil {
		return
	}
	ctx := server.WithSupportedProtocolVersions(t.srv.WithContext(r.Context(), s), t.versions)
	if env.Method == "" || len(env.ID) == 0 || string(env.ID) == "null" {
		// A notification, or a response to a request of the server's.
		if env.Method != "" {
			t.srv.HandleMessage(ctx, body)
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var resp mcp.JSONRPCMessage
	answered := false
	if t.fast != nil {
		resp, answered = t.fast.answer(ctx, &env)
	}
	if !answered {
		resp = t.srv.HandleMessage(ctx, body)
	}
	if resp == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if env.Method == string(mcp.MethodInitialize) {
		if _, failed := resp.(mcp.JSONRPCError); failed {
			t.close(s.id)
		} else {
			w.Header().Set(server.HeaderKeySessionID, s.id)
		}
	}
	var pending []mcp.JSONRPCNotification
	if !s.streaming.Load() {
	drain:
		for {
			select {
			case n := <-s.notes:
				pending = append(pending, n)
			default:
				break drain
			}
		}
	}
	buf := t.buffer()
	defer t.release(buf)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	h := w.Header()
	if len(pending) == 0 {
		if err := t.encode(buf, enc, resp); err != nil {
			t.log.Error("cannot encode a response", "err", err)
			writeRPCError(w, http.StatusInternalServerError, env.ID, mcp.INTERNAL_ERROR, "cannot encode the response")
			return
		}
		h["Content-Type"] = headerJSON
	} else {
		for _, n := range pending {
			t.sseEvent(buf, enc, n)
		}
		t.sseEvent(buf, enc, resp)
		h["Content-Type"] = headerSSE
		h["Cache-Control"] = headerNoCache
	}
	// With its length known, the answer is not chunked, however long.
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	_, _ = w.Write(buf.Bytes())
}

// Header values of every answer, set without Header.Set's allocation; they
// are only read (net/http does not change a header's values).
var (
	headerJSON    = []string{"application/json"}
	headerSSE     = []string{"text/event-stream"}
	headerNoCache = []string{"no-cache"}
)

// buffer returns an empty buffer for an answer, from the transport's pool
// (give it back with release).
func (t *httpTransport) buffer() *bytes.Buffer {
	if b, ok := t.bufs.Get().(*bytes.Buffer); ok {
		b.Reset()
		return b
	}
	return new(bytes.Buffer)
}

// release gives a buffer back to the pool, unless it grew too big to keep.
func (t *httpTransport) release(b *bytes.Buffer) {
	if b.Cap() <= maxPooled {
		t.bufs.Put(b)
	}
}

// maxPooled bounds the buffers kept for reuse: a rare huge answer does not
// pin its memory.
const maxPooled = 64 << 10

// sseEvent appends one server-sent event carrying a JSON-RPC message.
func (t *httpTransport) sseEvent(buf *bytes.Buffer, enc *json.Encoder, msg any) {
	buf.WriteString("event: message\ndata: ")
	_ = t.encode(buf, enc, msg) // ends with a newline
	buf.WriteString("\n")
}

// encode appends a JSON-RPC message and a newline to buf (enc writes to
// buf).
func (t *httpTransport) encode(buf *bytes.Buffer, enc *json.Encoder, msg any) error {
	if m, ok := msg.(mcp.JSONRPCMessage); ok && t.fast != nil {
		if b, ok := t.fast.appendMessage(buf.AvailableBuffer(), m); ok {
			buf.Write(b)
			return nil
		}
	}
	return enc.Encode(msg)
}

func (t *httpTransport) get(w http.ResponseWriter, r *http.Request) {
	s := t.session(w, r)
	if s == nil {
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "Streaming unsupported", http.StatusInternalServerError)
		return
	}
	if !s.streaming.CompareAndSwap(false, true) {
		http.Error(w, "Conflict: the session already has a stream", http.StatusConflict)
		return
	}
	defer func() {
		s.lastSeen.Store(time.Now().UnixNano())
		s.streaming.Store(false)
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for {
		buf.Reset()
		select {
		case n := <-s.notes:
			t.sseEvent(&buf, enc, n)
		more:
			for {
				select {
				case n := <-s.notes:
					t.sseEvent(&buf, enc, n)
				default:
					break more
				}
			}
		case <-tick.C:
			buf.WriteString(": keep-alive\n\n")
		case <-s.done:
			return
		case <-r.Context().Done():
			return
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return
		}
		fl.Flush()
	}
}

func (t *httpTransport) delete(w http.ResponseWriter, r *http.Request) {
	s := t.session(w, r)
	if s == nil {
		return
	}
	t.close(s.id)
	w.WriteHeader(http.StatusOK)
}

// session returns the live session a request names, or answers the
// request with an error and returns nil.
func (t *httpTransport) session(w http.ResponseWriter, r *http.Request) *httpSession {
	id := r.Header.Get(server.HeaderKeySessionID)
	if id == "" {
		http.Error(w, "Bad Request: Mcp-Session-Id header is required", http.StatusBadRequest)
		return nil
	}
	if v := r.Header.Get(server.HeaderKeyProtocolVersion); v != "" && !slices.Contains(t.versions, v) {
		http.Error(w, "Bad Request: unsupported protocol version "+v, http.StatusBadRequest)
		return nil
	}
	t.mu.Lock()
	s := t.sessions[id]
	t.mu.Unlock()
	if s == nil {
		http.Error(w, "Not Found: unknown or ended session", http.StatusNotFound)
		return nil
	}
	s.lastSeen.Store(time.Now().UnixNano())
	return s
}

// open starts a session.
func (t *httpTransport) open(ctx context.Context) (*httpSession, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	s := &httpSession{id: hex.EncodeToString(b[:]), notes: make(chan mcp.JSONRPCNotification, 64), done: make(chan struct{})}
	s.lastSeen.Store(time.Now().UnixNano())
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errors.New("the server is shutting down")
	}
	t.sessions[s.id] = s
	t.mu.Unlock()
	if err := t.srv.RegisterSession(ctx, s); err != nil {
		t.mu.Lock()
		delete(t.sessions, s.id)
		t.mu.Unlock()
		return nil, err
	}
	return s, nil
}

// close ends a session.
func (t *httpTransport) close(id string) {
	t.mu.Lock()
	s := t.sessions[id]
	delete(t.sessions, id)
	t.mu.Unlock()
	if s == nil {
		return
	}
	s.end()
	t.srv.UnregisterSession(context.Background(), id)
}

// Close ends every session and refuses new ones; GET streams end.
func (t *httpTransport) Close() {
	t.mu.Lock()
	if !t.closed {
		close(t.stop)
	}
	t.closed = true
	ids := make([]string, 0, len(t.sessions))
	for id := range t.sessions {
		ids = append(ids, id)
	}
	t.mu.Unlock()
	for _, id := range ids {
		t.close(id)
	}
}

func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	var rid any
	if len(id) > 0 {
		rid = id
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"jsonrpc": "2.0", "id": rid,
		"error": map[string]any{"code": code, "message": msg},
	})
}
