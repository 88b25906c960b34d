package inspect

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// message is what the event stream tells a page: an instance changed
// (Kind "instance"), or the machines folder was reloaded ("reload").
type message struct {
	Kind     string `json:"kind"`
	Workflow string `json:"workflow,omitempty"`
	Handle   string `json:"handle,omitempty"`
}

// hub hands the gate's changes to the pages' event streams. A stream that
// falls behind gets each change once (changes wait in a set, not a queue):
// a page refetches what changed, not every step.
type hub struct {
	mu      sync.Mutex
	streams map[*stream]bool
	max     int
	done    chan struct{}
	closed  bool
}

type stream struct {
	mu      sync.Mutex
	pending map[message]bool
	order   []message
	wake    chan struct{}
}

func newHub(max int) *hub {
	return &hub{streams: map[*stream]bool{}, max: max, done: make(chan struct{})}
}

// publish tells every stream of a change; it never blocks.
func (h *hub) publish(m message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.streams {
		s.mu.Lock()
		if !s.pending[m] {
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

func (h *hub) join() (*stream, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || len(h.streams) >= h.max {
		return nil, false
	}
	s := &stream{pending: map[message]bool{}, wake: make(chan struct{}, 1)}
	h.streams[s] = true
	return s, true
}

func (h *hub) leave(s *stream) {
	h.mu.Lock()
	delete(h.streams, s)
	h.mu.Unlock()
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.done)
	}
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

// events serves the event stream of the pages (text/event-stream): one
// JSON message per change.
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	f, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	s, ok := h.hub.join()
	if !ok {
		w.Header().Set("Retry-After", "10")
		http.Error(w, fmt.Sprintf("Service Unavailable: %d inspector pages follow live updates already", h.opts.MaxStreams), http.StatusServiceUnavailable)
		return
	}
	defer h.hub.leave(s)
	// The stream lasts: no write deadline.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	// retry: the page reconnects a second after the stream ends.
	fmt.Fprint(w, "retry: 1000\n: stategate inspector\n\n")
	f.Flush()
	tick := time.NewTicker(keepAliveEvery)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-h.hub.done:
			return
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			f.Flush()
		case <-s.wake:
			for _, m := range s.take() {
				data, _ := json.Marshal(m)
				if _, err := fmt.Fprintf(w, "data: %s\n\n", data); err != nil {
					return
				}
			}
			f.Flush()
		}
	}
}
