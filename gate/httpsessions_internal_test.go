package gate

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// fakeClock is the sessions' clock in these tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// sessionHandler is an HTTP endpoint of a gate serving nothing, its
// sessions timed by a fake clock.
func sessionHandler(t *testing.T, o HTTPOptions) (*HTTPHandler, *fakeClock) {
	t.Helper()
	g := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	h := g.HTTPHandler(o)
	clk := &fakeClock{t: time.Unix(1_000_000_000, 0)}
	h.ids.now = clk.Now
	t.Cleanup(h.Close)
	return h, clk
}

func sessionRequest(method, remote, session, body string) *http.Request {
	req := httptest.NewRequest(method, "http://localhost/mcp", strings.NewReader(body))
	req.RemoteAddr = remote
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	return req
}

const testInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// initFrom asks for a session from a peer's address: its id ("" when
// refused), and the answer.
func initFrom(h *HTTPHandler, remote string) (string, *httptest.ResponseRecorder) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, sessionRequest(http.MethodPost, remote, "", testInit))
	if rec.Code != http.StatusOK {
		return "", rec
	}
	return rec.Header().Get("Mcp-Session-Id"), rec
}

func mustInit(t *testing.T, h *HTTPHandler, remote string) string {
	t.Helper()
	id, rec := initFrom(h, remote)
	if id == "" {
		t.Fatalf("initialize from %s: %d %s", remote, rec.Code, rec.Body)
	}
	return id
}

func pingFrom(h *HTTPHandler, remote, session string) int {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, sessionRequest(http.MethodPost, remote, session, `{"jsonrpc":"2.0","id":2,"method":"ping"}`))
	return rec.Code
}

// wantRefused checks that a session asked for from remote is refused with
// 503 and the Retry-After given ("" for any).
func wantRefused(t *testing.T, h *HTTPHandler, remote, retry string) {
	t.Helper()
	id, rec := initFrom(h, remote)
	if id != "" || rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("a session for %s: %d, want 503", remote, rec.Code)
	}
	if got := rec.Header().Get("Retry-After"); got == "" || retry != "" && got != retry {
		t.Errorf("a session for %s: Retry-After %q, want %q", remote, got, retry)
	}
}

func wantLive(t *testing.T, h *HTTPHandler, what string, live bool, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if h.ids.known(id) != live {
			t.Errorf("%s %s: live %v, want %v", what, id[:8], !live, live)
		}
	}
}

const (
	peerA = "192.0.2.1:40000"
	peerB = "192.0.2.2:40000"
)

// TestStaleSessionsGiveWay: at the bound, a new session takes the place
// of a session with no request for SessionRecent, never of one used
// since.
func TestStaleSessionsGiveWay(t *testing.T) {
	h, clk := sessionHandler(t, HTTPOptions{MaxSessions: 2})
	a := mustInit(t, h, peerA)
	b := mustInit(t, h, peerA)
	wantRefused(t, h, peerA, "60") // both recent: 10 minutes to wait, at most a minute said
	clk.Advance(DefaultSessionRecent - time.Second)
	if code := pingFrom(h, peerA, a); code != http.StatusOK {
		t.Fatalf("ping: %d", code)
	}
	wantRefused(t, h, peerA, "1") // b grows stale in a second
	clk.Advance(2 * time.Second)
	c := mustInit(t, h, peerA) // b is stale now
	wantLive(t, h, "the stale session", false, b)
	wantLive(t, h, "a recent session", true, a, c)
	wantRefused(t, h, peerA, "")
}

// TestSharesOfPeers: a peer may hold more than its share (a quarter of
// MaxSessions) while there is room; at the bound, a peer holding less
// takes the place of the other's least recently used session, and a peer
// holding its share or more ends none of another peer's, and none of its
// own used recently.
func TestSharesOfPeers(t *testing.T) {
	h, clk := sessionHandler(t, HTTPOptions{MaxSessions: 8})
	var as []string
	for range 8 {
		as = append(as, mustInit(t, h, peerA))
		clk.Advance(time.Second)
	}
	b1 := mustInit(t, h, peerB)
	wantLive(t, h, "peer A's least recently used session", false, as[0])
	wantLive(t, h, "peer A's others", true, as[1:]...)
	// A holds its share and more: its flood ends nothing.
	for range 70 {
		wantRefused(t, h, peerA, "")
	}
	wantLive(t, h, "peer B's session", true, b1)
	wantLive(t, h, "peer A's sessions", true, as[1:]...)
	b2 := mustInit(t, h, peerB) // B holds 1 of its 2
	wantLive(t, h, "peer A's next", false, as[1])
	wantRefused(t, h, peerB, "") // B holds its 2, used recently
	wantLive(t, h, "peer B's sessions", true, b1, b2)
	wantLive(t, h, "peer A's last 6", true, as[2:]...)
}

// TestEvictionsAreThrottled: a peer's new sessions end at most evictBurst
// sessions at once, then one every evictEvery.
func TestEvictionsAreThrottled(t *testing.T) {
	h, clk := sessionHandler(t, HTTPOptions{MaxSessions: 100}) // shares of 25
	for range 100 {
		mustInit(t, h, peerA)
	}
	clk.Advance(DefaultSessionRecent + time.Second) // all stale
	for range evictBurst {
		mustInit(t, h, peerB)
	}
	wantRefused(t, h, peerB, "4")
	clk.Advance(evictEvery)
	mustInit(t, h, peerB)
	wantRefused(t, h, peerB, "4")
}

// streamWriter is a GET stream's response writer: it tells when the
// stream opened, records the write deadlines it is given, and fails its
// flushes once fail is set, as net/http's do past their deadline (its
// writes go into a buffer first, and succeed).
type streamWriter struct {
	hdr    http.Header
	opened chan struct{}

	mu        sync.Mutex
	code      int
	fail      bool
	deadlines []time.Time
	body      []byte
}

func newStreamWriter() *streamWriter {
	return &streamWriter{hdr: http.Header{}, opened: make(chan struct{})}
}

func (w *streamWriter) Header() http.Header { return w.hdr }

func (w *streamWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.code = code
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.body = append(w.body, p...)
	return len(p), nil
}

func (w *streamWriter) Flush() { _ = w.FlushError() }

func (w *streamWriter) FlushError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.code == http.StatusOK {
		select {
		case <-w.opened:
		default:
			close(w.opened)
		}
	}
	if w.fail {
		return os.ErrDeadlineExceeded
	}
	return nil
}

func (w *streamWriter) SetWriteDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deadlines = append(w.deadlines, t)
	return nil
}

func (w *streamWriter) setFail() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fail = true
}

// openTestStream opens a session's GET stream from remote; done is closed
// when the stream's handler returns.
func openTestStream(t *testing.T, h *HTTPHandler, remote, session string) (w *streamWriter, done chan struct{}) {
	t.Helper()
	w, done = newStreamWriter(), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req := sessionRequest(http.MethodGet, remote, session, "").WithContext(ctx)
	req.Header.Set("Accept", "text/event-stream")
	go func() {
		defer close(done)
		h.ServeHTTP(w, req)
	}()
	select {
	case <-w.opened:
	case <-done:
		t.Fatalf("GET: %d", w.code)
	case <-time.After(time.Minute):
		t.Fatal("the GET stream did not open within a minute")
	}
	return w, done
}

func waitDone(t *testing.T, done chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s: still open after a minute", what)
	}
}

// TestStreamsBeyondTheShareGiveWay: a session with a GET stream is never
// ended for a new session of its own peer; one beyond its peer's share is
// for a peer holding less, and its stream ends with it.
func TestStreamsBeyondTheShareGiveWay(t *testing.T) {
	h, clk := sessionHandler(t, HTTPOptions{MaxSessions: 4})
	var as []string
	var dones []chan struct{}
	for range 4 {
		id := mustInit(t, h, peerA)
		_, done := openTestStream(t, h, peerA, id)
		as, dones = append(as, id), append(dones, done)
	}
	clk.Advance(DefaultSessionRecent + time.Second) // streams keep them in use
	wantRefused(t, h, peerA, "60")
	b := mustInit(t, h, peerB)
	ended := -1
	for i, id := range as {
		if !h.ids.known(id) {
			ended = i
		}
	}
	if ended < 0 {
		t.Fatal("no session of peer A ended for peer B's")
	}
	waitDone(t, dones[ended], "the stream of the session ended")
	wantRefused(t, h, peerB, "") // B holds its share of 1
	wantLive(t, h, "peer B's session", true, b)
}

// TestStreamWriteDeadline: each write to a GET stream has a deadline, and
// a write or flush that fails (past its deadline) ends the stream; the
// session may open another.
func TestStreamWriteDeadline(t *testing.T) {
	h, _ := sessionHandler(t, HTTPOptions{})
	id := mustInit(t, h, peerA)
	before := time.Now()
	w, done := openTestStream(t, h, peerA, id)
	after := time.Now()
	w.mu.Lock()
	deadlines := append([]time.Time(nil), w.deadlines...)
	w.mu.Unlock()
	if len(deadlines) == 0 {
		t.Fatal("no write deadline")
	}
	for _, d := range deadlines {
		if d.Before(before.Add(streamWriteTimeout)) || d.After(after.Add(streamWriteTimeout)) {
			t.Errorf("write deadline %s after the stream opened, want %s", d.Sub(before), streamWriteTimeout)
		}
	}
	w.setFail()
	if err := h.g.Server().SendNotificationToSpecificClient(id, string(mcp.MethodNotificationToolsListChanged), nil); err != nil {
		t.Fatal(err)
	}
	waitDone(t, done, "a stream whose write failed")
	if code := pingFrom(h, peerA, id); code != http.StatusOK {
		t.Errorf("the session after its stream ended: %d, want 200", code)
	}
	w2, done2 := openTestStream(t, h, peerA, id)
	w2.setFail()
	h.Close()
	waitDone(t, done2, "a stream after Close")
}

// TestReservationsCount: a session reserved for an initialize request
// under way counts toward the bound until its id is issued or it is
// given back.
func TestReservationsCount(t *testing.T) {
	h, _ := sessionHandler(t, HTTPOptions{MaxSessions: 2})
	r1, _ := h.ids.reserve("a")
	r2, _ := h.ids.reserve("a")
	if r1 == nil || r2 == nil {
		t.Fatal("no reservation below the bound")
	}
	if r, wait := h.ids.reserve("b"); r != nil || wait <= 0 {
		t.Fatalf("a third reservation with two under way: %v (wait %s), want none", r, wait)
	}
	r1.release()
	r3, _ := h.ids.reserve("b")
	if r3 == nil {
		t.Fatal("no reservation once one was given back")
	}
	id := r2.Generate()
	r2.release() // issued: nothing to give back
	if !h.ids.known(id) {
		t.Fatal("the issued id is not live")
	}
	if r, _ := h.ids.reserve("b"); r != nil {
		t.Fatal("a reservation over the bound")
	}
	r3.release()
	if got := len(h.ids.peers); got != 1 {
		t.Errorf("peers known: %d, want 1 (the one with a session)", got)
	}
}

// TestListenShares: 2026-07-28 listen streams are bounded as sessions
// are; at the bound, a peer holding less than its share ends the oldest
// stream of the peer holding the most beyond its share, and a peer
// holding its share or more is refused.
func TestListenShares(t *testing.T) {
	l := newListens(4) // shares of 1
	stopped := map[int]bool{}
	var as []*listen
	for i := range 4 {
		x, ok := l.acquire("a", func() { stopped[i] = true })
		if !ok {
			t.Fatalf("listen %d below the bound refused", i)
		}
		as = append(as, x)
	}
	if _, ok := l.acquire("a", func() {}); ok {
		t.Fatal("a listen of a peer beyond its share, at the bound: accepted")
	}
	b, ok := l.acquire("b", func() { t.Error("peer b's stream stopped") })
	if !ok || !stopped[0] || len(stopped) != 1 {
		t.Fatalf("peer b's listen: %v, stopped %v, want accepted and a's oldest stopped", ok, stopped)
	}
	l.release(as[0]) // its handler returns: already given back
	if _, ok := l.acquire("b", func() {}); ok {
		t.Fatal("peer b beyond its share, at the bound: accepted")
	}
	l.release(b)
	if _, ok := l.acquire("c", func() {}); !ok {
		t.Fatal("below the bound: refused")
	}
}

// openTestListen opens a 2026-07-28 subscriptions/listen stream from
// remote; done is closed when its handler returns. It returns nil when
// the stream is refused, with its status.
func openTestListen(t *testing.T, h *HTTPHandler, remote string) (chan struct{}, int, string) {
	t.Helper()
	w, done := newStreamWriter(), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req := sessionRequest(http.MethodPost, remote, "", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`).WithContext(ctx)
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	go func() {
		defer close(done)
		h.ServeHTTP(w, req)
	}()
	select {
	case <-w.opened:
		return done, http.StatusOK, ""
	case <-done:
		w.mu.Lock()
		defer w.mu.Unlock()
		return nil, w.code, string(w.body)
	case <-time.After(time.Minute):
		t.Fatal("the listen stream did not open within a minute")
	}
	return nil, 0, ""
}

// TestListenStreamsGiveWay: at the bound, a peer under its share ends the
// oldest listen stream of the peer beyond its share; that peer is refused.
func TestListenStreamsGiveWay(t *testing.T) {
	h, _ := sessionHandler(t, HTTPOptions{MaxSessions: 4})
	var dones []chan struct{}
	for range 4 {
		done, code, body := openTestListen(t, h, peerA)
		if done == nil {
			t.Fatalf("listen below the bound: %d %s", code, body)
		}
		dones = append(dones, done)
	}
	if done, code, body := openTestListen(t, h, peerA); done != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("peer A's fifth listen: %d %s, want 503", code, body)
	}
	if done, code, body := openTestListen(t, h, peerB); done == nil {
		t.Fatalf("peer B's listen: %d %s, want 200", code, body)
	}
	waitDone(t, dones[0], "peer A's oldest listen stream")
}
