package gate

import (
	"context"
	"errors"
	"slices"
	"sort"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/stategate/stategate/interp"
)

// view is what an instance allows now.
type view struct {
	snap    *interp.Snapshot
	tools   []string // names, sorted: event tools allowed, and the status or reset tool
	initial bool     // in the machine's initial state
}

// viewOf computes what an instance allows: the events it would take
// (snapshot.can), keeping a tool whose guard said no after reading the
// event's payload (the call decides); none but reset once it is done or
// failed; the status tool always.
func (g *Gate) viewOf(sv *served, m *Workflow, s *interp.Snapshot) view {
	v := view{snap: s, tools: []string{m.StatusTool}, initial: m.initialState(s)}
	if s.Status != interp.StatusActive {
		v.tools = append(v.tools, m.ResetTool)
	} else {
		for _, t := range m.Tools {
			if !sv.boundEvents[m.ID][t.Event] && allows(s, t.Event) {
				v.tools = append(v.tools, t.Name)
			}
		}
		for _, b := range sv.bound[m.ID] {
			if b.inStates(s) && allows(s, b.event) {
				v.tools = append(v.tools, b.name)
			}
		}
	}
	for _, st := range m.StateTools {
		if st.active(s) {
			v.tools = append(v.tools, st.Name)
		}
	}
	sort.Strings(v.tools)
	return v
}

// shown is one machine's part of a session's tool list: the view of the
// instance the session sees (tools nil when it cannot be loaded: only the
// status tool is listed).
type shown struct {
	id, version string // the machine, and the version of its tools' listing
	tools       []string
	initial     bool
}

// shownTo computes what a session's tool list is made of, machine by
// machine, and records it as what the session was last shown.
func (g *Gate) shownTo(ctx context.Context, s *session) []shown {
	ms := g.workflowList()
	upstreams := g.served.Load().upstreams
	out := make([]shown, len(ms))
	for i, m := range ms {
		out[i] = shown{id: m.ID, version: m.listing + upstreams}
		v, err := g.current(ctx, m, g.instanceOf(s, m))
		if err != nil {
			g.log.Warn("cannot load instance for listing", "machine", m.ID, "err", err)
			out[i].tools = []string{m.StatusTool}
			continue
		}
		out[i].tools, out[i].initial = v.tools, v.initial
	}
	if s != nil {
		s.mu.Lock()
		s.last = out
		s.mu.Unlock()
	}
	return out
}

func sameShown(a, b []shown) bool {
	return slices.EqualFunc(a, b, func(x, y shown) bool {
		return x.id == y.id && x.version == y.version && x.initial == y.initial && slices.Equal(x.tools, y.tools)
	})
}

// filterTools is the gate's tool filter (mcp-go's WithToolFilter): of a
// tools/list, it keeps the host's own tools and the gate's that the
// session's instances allow now (in their compact form in a workflow's
// initial state), and drops the hidden ones; a call's tool passes (the
// handler decides, and refuses with the tools allowed now).
func (g *Gate) filterTools(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	if _, calling := g.calls.LoadAndDelete(ctx); calling {
		return tools
	}
	g.activity.Add(1)
	if modern(ctx) {
		return g.staticList(ctx, tools)
	}
	allowed := map[string]bool{} // tool name -> compact
	for _, sh := range g.shownTo(ctx, g.sessionOf(ctx)) {
		for _, name := range sh.tools {
			allowed[name] = sh.initial
		}
	}
	sv := g.served.Load()
	out := make([]mcp.Tool, 0, len(tools))
	for _, t := range tools {
		ref, ours := sv.tools[t.Name]
		switch {
		case t.Name == unknownTool:
		case ours && ref.kind == passTool:
			out = append(out, ref.full)
		case !ours:
			out = append(out, t) // the host's own
		default:
			if compact, ok := allowed[t.Name]; ok && compact {
				out = append(out, ref.compact)
			} else if ok {
				out = append(out, ref.full)
			}
		}
	}
	return out
}

// view returns what the instance allows now.
func (g *Gate) view(in *instance) view {
	sv := g.served.Load()
	in.vmu.Lock()
	defer in.vmu.Unlock()
	if in.vFor != sv {
		in.v, in.vFor = g.viewOf(sv, in.m, in.snap), sv
	}
	return in.v
}

// current returns an instance's view: its stored snapshot, or the
// machine's initial state when it has none (nothing is created).
func (g *Gate) current(ctx context.Context, m *Workflow, handle string) (view, error) {
	if handle == "" {
		if m.initSnap == nil {
			return view{}, errors.New("the machine cannot start")
		}
		sv := g.served.Load()
		if v, ok := sv.initial.Load(m); ok {
			return v.(view), nil
		}
		v := g.viewOf(sv, m, m.initSnap)
		sv.initial.Store(m, v)
		return v, nil
	}
	in, err := g.inst.load(ctx, m, handle)
	if err != nil {
		return view{}, err
	}
	return g.view(in), nil
}

// refresh tells the sessions that see an instance that their tool list
// changed, when it did.
func (g *Gate) refresh(ctx context.Context, m *Workflow, handle string) {
	for _, s := range g.sessionsSeeing(m, handle) {
		g.refreshSession(ctx, s)
	}
}

// refreshAfter tells the sessions whose list changed after what the gate
// serves changed; when every client was told already (told), it records
// what each session sees now, and tells nobody again.
func (g *Gate) refreshAfter(ctx context.Context, told bool) {
	if !told {
		g.refreshAll(ctx)
		return
	}
	for _, s := range g.allSessions() {
		g.shownTo(ctx, s)
	}
}

func (g *Gate) refreshAll(ctx context.Context) {
	for _, s := range g.allSessions() {
		g.refreshSession(ctx, s)
	}
}

func (g *Gate) refreshSession(ctx context.Context, s *session) {
	if s.modern.Load() {
		return
	}
	s.mu.Lock()
	before := s.last
	s.mu.Unlock()
	if sameShown(before, g.shownTo(ctx, s)) {
		return
	}
	if !s.streaming.Load() && !s.notified.CompareAndSwap(false, true) {
		return // one waits to be delivered already
	}
	srv := g.srv.Load()
	if srv == nil {
		return
	}
	// The answer to the session's own request must carry the
	// notification: see answerWriter.
	w, _ := ctx.Value(answerKey{}).(*answerWriter)
	written := w.written()
	if err := srv.SendNotificationToSpecificClient(s.id, "notifications/tools/list_changed", nil); err != nil {
		s.notified.Store(false) // not told: the next change tries again
		g.log.Debug("cannot notify session", "session", s.name, "err", err)
		return
	}
	if cs := server.ClientSessionFromContext(ctx); w != nil && cs != nil && cs.SessionID() == s.id {
		w.await(written)
	}
}
