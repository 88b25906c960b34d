package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// message is what the event stream tells a page: an instance changed
// (Kind "instance"), or the machines folder was reloaded ("reload"; also
// what a stream that fell far behind is told instead of its changes).
type message struct {
	Kind     string `json:"kind"`
	Workflow string `json:"workflow,omitempty"`
	Handle   string `json:"handle,omitempty"`
}

var reload = message{Kind: "reload"}

// maxPending bounds the changes one stream keeps for its page: past it,
// they become one reload (the page refetches what it shows).
const maxPending = 256

// hub hands the gate's changes to the pages' event streams, and shares
// the streams out between peers. A stream that falls behind gets each
// change once (changes wait in a set, not a queue, of at most maxPending):
// a page refetches what changed, not every step.
//
// A peer (peerOf) holds at most perPeer streams: its next one takes the
// place of its oldest. When all max are taken, a new stream takes the
// place of the oldest stream of the peer that holds the most. A stream
// that gives way is told (evict) and ends; no stream is ever refused but
// when the hub is closed.
type hub struct {
	mu      sync.Mutex
	streams map[*stream]bool
	max     int
	perPeer int
	seq     uint64 // streams joined
	done    chan struct{}
	closed  bool
	changed chan struct{} // closed and replaced when a stream joins or leaves
}

type stream struct {
	peer    string
	seq     uint64 // the order it joined in
	mu      sync.Mutex
	pending map[message]bool
	order   []message
	wake    chan struct{}
	evict   chan struct{} // closed when another stream takes its place
}

func newHub(max, perPeer int) *hub {
	return &hub{streams: map[*stream]bool{}, max: max, perPeer: min(perPeer, max), done: make(chan struct{}), changed: make(chan struct{})}
}

// publish tells every stream of a change; it never blocks.
func (h *hub) publish(m message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.streams {
		s.mu.Lock()
		switch {
		case s.pending[m] || s.pending[reload]:
			// told already
		case len(s.order) >= maxPending:
			s.pending, s.order = map[message]bool{reload: true}, []message{reload}
		default:
			s.pending[m] = true
			s.order = append(s.order, m)
		}
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// join adds a stream of a peer, making room for it (see hub); it reports
// false when the hub is closed.
func (h *hub) join(peer string) (*stream, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false
	}
	var victim *stream
	if h.countLocked(peer) >= h.perPeer {
		victim = h.oldest(func(s *stream) bool { return s.peer == peer })
	} else if len(h.streams) >= h.max {
		held, most := map[string]int{}, 0
		for s := range h.streams {
			held[s.peer]++
			most = max(most, held[s.peer])
		}
		victim = h.oldest(func(s *stream) bool { return held[s.peer] == most })
	}
	if victim != nil {
		delete(h.streams, victim)
		close(victim.evict)
	}
	h.seq++
	s := &stream{peer: peer, seq: h.seq, pending: map[message]bool{}, wake: make(chan struct{}, 1), evict: make(chan struct{})}
	h.streams[s] = true
	h.tell()
	return s, true
}

// oldest is the stream that joined first of those that match.
func (h *hub) oldest(match func(*stream) bool) *stream {
	var o *stream
	for s := range h.streams {
		if match(s) && (o == nil || s.seq < o.seq) {
			o = s
		}
	}
	return o
}

func (h *hub) leave(s *stream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.streams[s] {
		delete(h.streams, s)
		h.tell()
	}
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.done)
	}
}

// count is the number of streams of a peer ("": of all).
func (h *hub) count(peer string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.countLocked(peer)
}

func (h *hub) countLocked(peer string) int {
	n := 0
	for s := range h.streams {
		if peer == "" || s.peer == peer {
			n++
		}
	}
	return n
}

// await waits until cond holds; cond is called with the hub locked, at
// once and after each stream that joins or leaves.
func (h *hub) await(ctx context.Context, cond func() bool) error {
	for {
		h.mu.Lock()
		ok, ch := cond(), h.changed
		h.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// tell wakes await; the hub is locked.
func (h *hub) tell() {
	close(h.changed)
	h.changed = make(chan struct{})
}

func (s *stream) take() []message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.order
	s.order, s.pending = nil, map[message]bool{}
	return out
}

// keepAliveEvery is how often an idle event stream gets a comment, which
// keeps proxies from closing it.
const keepAliveEvery = 20 * time.Second

// The retry delays a stream tells its page (EventSource's retry): after
// it ends of age, and after it gave way to another stream.
const (
	retryAfterAge   = "1000"
	retryAfterEvict = "10000"
)

// events serves the event stream of the pages (text/event-stream): one
// JSON message per change. A write (an event, a keep-alive) that takes
// longer than StreamWriteTimeout ends the stream, and so does its age
// (MaxStreamAge): the page comes back a second later and refetches what
// it shows. Its slot is shared out by the hub.
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	s, ok := h.hub.join(peerOf(r.RemoteAddr))
	if !ok {
		http.Error(w, "Service Unavailable: the server is shutting down", http.StatusServiceUnavailable)
		return
	}
	defer h.hub.leave(s)
	rc := http.NewResponseController(w)
	send := func(text []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(h.opts.StreamWriteTimeout))
		if _, err := w.Write(text); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// The connection closes with the stream: the write deadline left on
	// it must not reach the next request, and bounds the last write.
	defer func() { _ = rc.SetWriteDeadline(time.Now().Add(h.opts.StreamWriteTimeout)) }()
	w.Header().Set("Connection", "close")
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if !send([]byte("retry: " + retryAfterAge + "\n: stategate inspector\n\n")) {
		return
	}
	age := time.NewTimer(h.opts.MaxStreamAge)
	defer age.Stop()
	tick := time.NewTicker(keepAliveEvery)
	defer tick.Stop()
	var buf bytes.Buffer
	for {
		select {
		case <-r.Context().Done():
			return
		case <-h.hub.done:
			return
		case <-age.C:
			return
		case <-s.evict:
			send([]byte("retry: " + retryAfterEvict + "\n: another page took this stream's place: too many follow this server from one address\n\n"))
			return
		case <-tick.C:
			if !send([]byte(": keep-alive\n\n")) {
				return
			}
		case <-s.wake:
			buf.Reset()
			for _, m := range s.take() {
				data, _ := json.Marshal(m)
				fmt.Fprintf(&buf, "data: %s\n\n", data)
			}
			if buf.Len() > 0 && !send(buf.Bytes()) {
				return
			}
		}
	}
}

// peerOf is who a remote address is, for the streams' shares: its IP
// address, an IPv6 one by its /64 (what one host is given).
func peerOf(remote string) string {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return remote
	}
	a := ap.Addr().Unmap().WithZone("")
	if a.Is6() && !a.IsLoopback() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}
