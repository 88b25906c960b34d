package gate

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The HTTP endpoint's sessions: how many there are, whose they are (the
// peer, by address), and which one a new session may take the place of.
// The mcp-go side of it (the id manager mcp-go calls, the stream writer)
// is in mcpgo.go.
//
// The policy, with M = HTTPOptions.MaxSessions (--max-sessions) and
// S = M/4 (at least 1), a peer's share:
//
//   - Below M sessions, any peer gets a new one.
//   - At M, a new session takes the place of one with no request under
//     way. It is the least recently used stale one: no request for
//     SessionRecent and no GET stream open. A session used recently is
//     not ended for a new one of its own peer, nor of a peer holding S or
//     more: that peer may end only its own stale sessions.
//   - A peer holding fewer than S, when no session is stale, may take the
//     place of the least recently used session (with no request under
//     way) of the peer holding the most sessions beyond S, recent or with
//     a stream: a peer's sessions beyond its share were lent while there
//     was room, so that one peer never locks the others out.
//   - A peer ends at most evictBurst sessions at once, and one every
//     evictEvery after that: a flood of initialize requests is refused.
//   - A new session that cannot be had is refused with 503 and a
//     Retry-After.
//
// Every client on the machine itself is one peer (127.0.0.1, ::1), and
// so is every client behind a proxy: among them, the share changes
// nothing (one peer holds more than S only while there is room, and
// takes nobody's place then), and what protects one from another is that
// a session used recently, or with a stream open, is never ended for a
// new one.

// Defaults of the session policy.
const (
	// DefaultSessionRecent is how long a session stays in use after its
	// last request (HTTPOptions.SessionRecent): longer than an agent
	// takes between two calls when a person reads, thinks or is asked in
	// between, so that a session is not ended under an agent that is
	// still working; and a sixth of DefaultSessionIdle, so that, at the
	// bound, sessions left behind make room long before they end.
	DefaultSessionRecent = 10 * time.Minute
	// evictBurst and evictEvery bound how many sessions one peer's new
	// sessions end: evictBurst at once, then one every evictEvery (15 a
	// minute).
	evictBurst = 16
	evictEvery = 4 * time.Second
	// maxRetryAfter bounds the Retry-After of a refused session: a
	// session may end (DELETE) at any time.
	maxRetryAfter = time.Minute
)

// Errors of a request naming a session.
var (
	errUnknownSession = errors.New("unknown or ended session")
	errStreaming      = errors.New("the session already has a stream")
)

// peerOf is the peer a request comes from: its IPv4 address, or the /64
// of its IPv6 address (one host's network is given a /64 at least).
func peerOf(remoteAddr string) string {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return remoteAddr
	}
	a := ap.Addr().Unmap()
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}

// sessionIDs issues and checks the session ids of the HTTP endpoint and
// keeps the policy above. Everything in it is guarded by mu.
type sessionIDs struct {
	max, share int
	recent     time.Duration
	now        func() time.Time
	// evict ends a session through mcp-go (end), which then calls
	// Terminate; it is called without mu.
	evict func(id string)
	// prefix begins every id issued: HTTPOptions.Route and a '.', or
	// nothing.
	prefix string

	mu      sync.Mutex
	live    map[string]*sessionUse
	peers   map[string]*peerUse
	pending int // sessions reserved by initialize requests under way
}

// sessionUse is what the endpoint knows of a session's use.
type sessionUse struct {
	id, peer string
	// last is when its last request began or ended, or its stream
	// opened or closed (or it began).
	last     time.Time
	inflight int
	// stop ends its GET stream; nil while none is open.
	stop context.CancelFunc
}

// peerUse is what the endpoint knows of a peer.
type peerUse struct {
	sessions  int           // live and reserved
	evictions *rate.Limiter // the sessions its new ones may end; nil until one does
}

func newSessionIDs(n int, recent time.Duration, now func() time.Time, evict func(string)) *sessionIDs {
	return &sessionIDs{max: n, share: max(1, n/4), recent: recent, now: now, evict: evict,
		live: map[string]*sessionUse{}, peers: map[string]*peerUse{}}
}

// known reports whether id is a live session.
func (s *sessionIDs) known(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[id] != nil
}

// begin records that a request of session id is under way (until finish);
// nil when id is not a live session.
func (s *sessionIDs) begin(id string) *sessionUse {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.live[id]
	if u != nil {
		u.inflight++
		u.last = now
	}
	return u
}

func (s *sessionIDs) finish(u *sessionUse) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	u.inflight--
	u.last = now
}

// openStream records that session id has a GET stream open, which stop
// ends (until closeStream).
func (s *sessionIDs) openStream(id string, stop context.CancelFunc) (*sessionUse, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.live[id]
	switch {
	case u == nil:
		return nil, errUnknownSession
	case u.stop != nil:
		return nil, errStreaming
	}
	u.stop, u.last = stop, now
	return u, nil
}

func (s *sessionIDs) closeStream(u *sessionUse) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	u.stop, u.last = nil, now
}

// reservation is a session reserved for an initialize request of a peer:
// mcp-go issues its id (Generate), or it is given back (release).
type reservation struct {
	ids  *sessionIDs
	peer string
	// issued is set once its id is issued; guarded by ids.mu.
	issued bool
}

// reserve reserves a new session for a peer, ending one at the bound (see
// the policy above). It returns nil, and how long to wait before trying
// again, when there is none to be had.
func (s *sessionIDs) reserve(peer string) (*reservation, time.Duration) {
	now := s.now()
	s.mu.Lock()
	p := s.peers[peer]
	if p == nil {
		p = &peerUse{}
		s.peers[peer] = p
	}
	var victim *sessionUse
	if len(s.live)+s.pending >= s.max {
		v, wait := s.victim(peer, p, now)
		if v != nil {
			if p.evictions == nil {
				p.evictions = rate.NewLimiter(rate.Every(evictEvery), evictBurst)
			}
			if r := p.evictions.ReserveN(now, 1); r.DelayFrom(now) > 0 {
				wait = r.DelayFrom(now)
				r.CancelAt(now)
				v = nil
			}
		}
		if v == nil {
			s.forget(peer, p, now)
			s.mu.Unlock()
			return nil, min(max(wait, time.Second), maxRetryAfter)
		}
		victim = v
	}
	p.sessions++
	s.pending++
	if victim != nil {
		s.remove(victim, now)
	}
	s.mu.Unlock()
	if victim != nil {
		s.evict(victim.id)
	}
	return &reservation{ids: s, peer: peer}, 0
}

// victim is the session a new one of peer (p) may take the place of, or
// nil and how long until one of its candidates grows stale.
func (s *sessionIDs) victim(peer string, p *peerUse, now time.Time) (*sessionUse, time.Duration) {
	staleBefore := now.Add(-s.recent)
	ownOnly := p.sessions >= s.share
	var stale, lent *sessionUse
	var soonest time.Time
	for _, u := range s.live {
		if u.inflight > 0 || ownOnly && u.peer != peer {
			continue
		}
		if u.stop == nil {
			if u.last.Before(staleBefore) {
				if stale == nil || u.last.Before(stale.last) {
					stale = u
				}
				continue
			}
			if t := u.last.Add(s.recent); soonest.IsZero() || t.Before(soonest) {
				soonest = t
			}
		}
		if !ownOnly && u.peer != peer && s.peers[u.peer].sessions > s.share && s.moreLent(u, lent) {
			lent = u
		}
	}
	switch {
	case stale != nil:
		return stale, 0
	case lent != nil:
		return lent, 0
	case soonest.IsZero():
		return nil, maxRetryAfter
	}
	return nil, soonest.Sub(now)
}

// moreLent reports whether u is rather taken than v (nil: none): its peer
// holds more sessions, or as many and u has no stream where v has one,
// or u was used less recently.
func (s *sessionIDs) moreLent(u, v *sessionUse) bool {
	if v == nil {
		return true
	}
	if a, b := s.peers[u.peer].sessions, s.peers[v.peer].sessions; a != b {
		return a > b
	}
	if (u.stop == nil) != (v.stop == nil) {
		return u.stop == nil
	}
	return u.last.Before(v.last)
}

// issue issues the id of a reserved session.
func (s *sessionIDs) issue(r *reservation, id string) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.issued { // a second id for one reservation: counted, not reserved
		s.peerOf(r.peer).sessions++
	} else {
		r.issued = true
		s.pending--
	}
	s.live[id] = &sessionUse{id: id, peer: r.peer, last: now}
}

// release gives back a reserved session whose id was never issued (the
// initialize request failed before).
func (r *reservation) release() {
	s := r.ids
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.issued {
		return
	}
	r.issued = true
	s.pending--
	p := s.peerOf(r.peer)
	p.sessions--
	s.forget(r.peer, p, now)
}

func (s *sessionIDs) peerOf(peer string) *peerUse {
	p := s.peers[peer]
	if p == nil {
		p = &peerUse{}
		s.peers[peer] = p
	}
	return p
}

// terminate ends session id, and its stream.
func (s *sessionIDs) terminate(id string) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.live[id]; u != nil {
		s.remove(u, now)
	}
}

func (s *sessionIDs) remove(u *sessionUse, now time.Time) {
	delete(s.live, u.id)
	if u.stop != nil {
		u.stop()
		u.stop = nil
	}
	p := s.peerOf(u.peer)
	p.sessions--
	s.forget(u.peer, p, now)
}

// forget drops what it knows of a peer with no session once its
// evictions are back to their burst; and, when it knows of more peers
// than there can be sessions, of every peer with no session.
func (s *sessionIDs) forget(peer string, p *peerUse, now time.Time) {
	if p.sessions > 0 {
		return
	}
	if p.evictions == nil || p.evictions.TokensAt(now) >= evictBurst {
		delete(s.peers, peer)
	}
	if len(s.peers) > 2*s.max {
		for k, q := range s.peers {
			if q.sessions <= 0 {
				delete(s.peers, k)
			}
		}
	}
}

// listens bounds the 2026-07-28 subscriptions/listen streams open at once
// as sessions are bounded: at most max, and at the bound a peer holding
// fewer than its share ends the oldest stream of the peer holding the
// most beyond its share (its client listens again, and is refused while
// it holds its share or more).
type listens struct {
	max, share int

	mu   sync.Mutex
	n    int
	open map[string][]*listen // by peer, oldest first
}

// listen is an open listen stream.
type listen struct {
	peer string
	stop context.CancelFunc // ends it
}

func newListens(n int) *listens {
	return &listens{max: n, share: max(1, n/4), open: map[string][]*listen{}}
}

// acquire records a listen stream of peer, which stop ends; false when
// none may be opened.
func (l *listens) acquire(peer string, stop context.CancelFunc) (*listen, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n >= l.max {
		if len(l.open[peer]) >= l.share {
			return nil, false
		}
		hog := ""
		for p, xs := range l.open {
			if len(xs) > l.share && (hog == "" || len(xs) > len(l.open[hog])) {
				hog = p
			}
		}
		if hog == "" {
			return nil, false
		}
		oldest := l.open[hog][0]
		l.drop(oldest)
		oldest.stop()
	}
	x := &listen{peer: peer, stop: stop}
	l.open[peer] = append(l.open[peer], x)
	l.n++
	return x, true
}

// release records that a listen stream ended (once; one ended to make
// room was released then).
func (l *listens) release(x *listen) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drop(x)
}

func (l *listens) drop(x *listen) {
	xs := l.open[x.peer]
	i := slices.Index(xs, x)
	if i < 0 {
		return
	}
	xs = slices.Delete(xs, i, i+1)
	if len(xs) == 0 {
		delete(l.open, x.peer)
	} else {
		l.open[x.peer] = xs
	}
	l.n--
}
