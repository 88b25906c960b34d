package gate

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/server"

	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
)

// session is what the gate knows of an MCP session.
type session struct {
	id   string // the transport's session id: never shown or stored
	name string // the name it is shown and stored by (sessionName)
	// notified is set while a list_changed sent to the session waits to
	// be delivered: the session has no stream that takes notifications
	// (stdio's output, an HTTP GET stream), and has made no request since
	// (the answer to its next request carries them). Another one would
	// tell it nothing: list_changed says the list differs from the one
	// the session saw.
	notified  atomic.Bool
	streaming atomic.Bool // notifications reach the client as they are sent
	// listed is the Gate's lists count when the session's last tool list
	// began (see told).
	listed atomic.Uint64
	// answered is set on a session of the gate's own HTTP endpoint,
	// whose answers the gate writes list_changed into itself (see
	// tellListChanged); pending is set while one waits for its next
	// request.
	answered atomic.Bool
	pending  atomic.Bool
	// modern is set once the session made a request of revision
	// 2026-07-28 (stdio): its tool list depends on no instance, and it is
	// told only when that list changes (see serve).
	modern atomic.Bool
	mu     sync.Mutex
	// handles are the instances the session used last, by machine (for
	// machines with a handle key).
	handles map[string]string
	// last is the tool list the session was last shown or told about.
	last []shown
	// principal is who made the session's last request: its list is
	// what that principal may see.
	principal Principal
	// subs are the resources the session subscribed to, by URI; queued
	// the notifications that wait for its next request's answer
	// (resources.go).
	subs   map[string]resURI
	queued []string
}

// setPrincipal records who makes the session's requests.
func (s *session) setPrincipal(p Principal) {
	s.mu.Lock()
	s.principal = p
	s.mu.Unlock()
}

// who returns who makes the session's requests.
func (s *session) who() Principal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.principal
}

func (g *Gate) sessionOf(ctx context.Context) *session {
	cs := server.ClientSessionFromContext(ctx)
	if cs == nil || cs.SessionID() == "" {
		return nil // none, or a request of revision 2026-07-28 over HTTP
	}
	g.sessMu.Lock()
	defer g.sessMu.Unlock()
	s := g.sessions[cs.SessionID()]
	if s == nil {
		s = g.newSession(cs.SessionID())
		g.sessions[s.id], g.byName[s.name] = s, s
	}
	return s
}

func (g *Gate) newSession(id string) *session {
	return &session{id: id, name: g.sessionName(id), handles: map[string]string{}, principal: anonymous()}
}

// streamingKey marks the context of a session registered by a transport
// that writes notifications as they are sent (stdio).
type streamingKey struct{}

// sessionByID returns the session of an id, nil when none.
func (g *Gate) sessionByID(id string) *session {
	g.sessMu.Lock()
	defer g.sessMu.Unlock()
	return g.sessions[id]
}

// setStreaming records whether a session has a stream that takes its
// notifications as they are sent (an HTTP GET stream).
func (g *Gate) setStreaming(id string, on bool) {
	s := g.sessionByID(id)
	if s == nil {
		return
	}
	s.streaming.Store(on)
	if on {
		s.notified.Store(false)
		if s.pending.Swap(false) {
			g.sendListChanged(s) // it waited for a request; the stream takes it now
		}
		g.flushQueued(s)
	}
}

// sessionName is the name a session is shown and stored by (the handle of
// its own instance, the session of audit entries): a keyed hash of its id,
// which tells nothing of the id.
func (g *Gate) sessionName(id string) string {
	mac := hmac.New(sha256.New, g.nameKey[:])
	mac.Write([]byte(id))
	return "session-" + hex.EncodeToString(mac.Sum(nil)[:10])
}

func (g *Gate) addSession(ctx context.Context, id string) {
	s := g.newSession(id)
	s.principal = g.principalOf(ctx)
	s.streaming.Store(ctx.Value(streamingKey{}) != nil)
	s.answered.Store(answerOf(ctx) != nil)
	s.last = g.shownTo(ctx, s)
	g.sessMu.Lock()
	if _, exists := g.sessions[id]; !exists {
		g.sessions[id], g.byName[s.name] = s, s
	}
	g.sessMu.Unlock()
}

func (g *Gate) dropSession(id string) {
	g.sessMu.Lock()
	defer g.sessMu.Unlock()
	s := g.sessions[id]
	if s == nil {
		return
	}
	delete(g.sessions, id)
	delete(g.byName, s.name)
	s.mu.Lock()
	defer s.mu.Unlock()
	for mid, h := range s.handles {
		g.unview(s, store.Key{Machine: mid, Handle: h})
	}
	g.dropSubscriptions(s)
}

// useHandle makes a session see an instance of a handle-key machine; it
// reports whether that is a change.
func (g *Gate) useHandle(s *session, m *workflow.Workflow, h string) bool {
	g.sessMu.Lock()
	defer g.sessMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.handles[m.ID]
	if had && old == h {
		return false
	}
	if had {
		g.unview(s, store.Key{Machine: m.ID, Handle: old})
	}
	s.handles[m.ID] = h
	if _, live := g.sessions[s.id]; live {
		key := store.Key{Machine: m.ID, Handle: h}
		if g.viewers[key] == nil {
			g.viewers[key] = map[*session]bool{}
		}
		g.viewers[key][s] = true
	}
	return true
}

// unview forgets that a session sees an instance (sessMu held).
func (g *Gate) unview(s *session, key store.Key) {
	if vs := g.viewers[key]; vs != nil {
		delete(vs, s)
		if len(vs) == 0 {
			delete(g.viewers, key)
		}
	}
}

// sessionsSeeing returns the sessions that see an instance.
func (g *Gate) sessionsSeeing(m *workflow.Workflow, handle string) []*session {
	g.sessMu.Lock()
	defer g.sessMu.Unlock()
	switch {
	case m.HandleKey != "":
		out := make([]*session, 0, len(g.viewers[store.Key{Machine: m.ID, Handle: handle}]))
		for s := range g.viewers[store.Key{Machine: m.ID, Handle: handle}] {
			out = append(out, s)
		}
		return out
	case g.opts.SharedInstance != "" || handle == g.shared():
		out := make([]*session, 0, len(g.sessions))
		for _, s := range g.sessions {
			if g.instanceOf(s, m) == handle {
				out = append(out, s)
			}
		}
		return out
	}
	if s := g.byName[handle]; s != nil {
		return []*session{s} // a session's own instance
	}
	return nil
}

func (g *Gate) allSessions() []*session {
	g.sessMu.Lock()
	defer g.sessMu.Unlock()
	out := make([]*session, 0, len(g.sessions))
	for _, s := range g.sessions {
		out = append(out, s)
	}
	return out
}

// instanceOf returns the handle of the instance a session sees of a
// machine: for a machine with a handle key, the one it used last ("" when
// none: it sees the initial state); else its own, or the shared one.
func (g *Gate) instanceOf(s *session, m *workflow.Workflow) string {
	if m.HandleKey != "" {
		if s == nil {
			return ""
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.handles[m.ID]
	}
	if g.opts.SharedInstance != "" || s == nil {
		return g.shared()
	}
	return s.name
}

func (g *Gate) shared() string {
	if g.opts.SharedInstance != "" {
		return g.opts.SharedInstance
	}
	return DefaultInstance
}
