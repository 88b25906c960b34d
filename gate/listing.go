package gate

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
)

// view is what an instance allows now.
type view struct {
	snap    *interp.Snapshot
	tools   []string // names, sorted: the event, bound and state tools allowed, and the status or reset tool
	initial bool     // in the machine's initial state
	// notStarted is set for an instance that needs its input and was not
	// started (workflow.Instance.NotStarted): it takes the start tool and
	// the status tool only.
	notStarted bool
}

// notStartedView is what an instance not started allows: the start tool
// (which takes its input) and the status tool.
func notStartedView(m *workflow.Workflow) view {
	tools := []string{m.StartTool, m.StatusTool}
	sort.Strings(tools)
	return view{snap: m.NotStartedSnapshot(), tools: tools, notStarted: true}
}

// viewOf computes what an instance allows: the events it would take
// (workflow.Accepts: snapshot.can, keeping a tool whose guard said no
// after reading the event's payload, as the call decides); none but reset
// once it is done or failed; the status tool always.
func (g *Gate) viewOf(sv *served, m *workflow.Workflow, s *interp.Snapshot) view {
	v := view{snap: s, tools: []string{m.StatusTool}, initial: m.IsInitial(s)}
	if m.NeedsInput() && m.HandleKey != "" {
		// Another instance may be started, by its handle, at any time.
		v.tools = append(v.tools, m.StartTool)
	}
	if s.Status != interp.StatusActive {
		v.tools = append(v.tools, m.ResetTool)
	} else {
		for _, t := range m.Tools {
			if !sv.boundEvents[m.ID][t.Event] && workflow.Accepts(s, t.Event) {
				v.tools = append(v.tools, t.Name)
			}
		}
		for _, b := range sv.bound[m.ID] {
			if b.inStates(s) && workflow.Accepts(s, b.event) {
				v.tools = append(v.tools, b.name)
			}
		}
	}
	for _, st := range m.StateTools {
		if st.Active(s) {
			v.tools = append(v.tools, st.Name)
		}
	}
	sort.Strings(v.tools)
	return v
}

// viewCache keeps, by instance, what the instance allows, as computed for
// the instance at one version (by its identity: instances are immutable)
// and for what the gate served then.
type viewCache struct {
	mu sync.Mutex
	m  map[store.Key]cachedView
}

type cachedView struct {
	in *workflow.Instance
	sv *served
	v  view
}

// maxViews bounds the views kept.
const maxViews = 1 << 14

// view returns what an instance allows now.
func (g *Gate) view(in *workflow.Instance) view {
	sv := g.served.Load()
	key := in.Key()
	c := &g.views
	c.mu.Lock()
	if e, ok := c.m[key]; ok && e.in == in && e.sv == sv {
		c.mu.Unlock()
		return e.v
	}
	c.mu.Unlock()
	v := g.viewOf(sv, in.Workflow, in.Snapshot)
	if in.NotStarted {
		v = notStartedView(in.Workflow)
	}
	if in.Pending != nil {
		v.tools = []string{in.Workflow.StatusTool} // it takes no call until the approval is settled
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[store.Key]cachedView{}
	}
	if len(c.m) >= maxViews {
		for k := range c.m { // drop an arbitrary eighth
			delete(c.m, k)
			if len(c.m) < maxViews*7/8 {
				break
			}
		}
	}
	c.m[key] = cachedView{in: in, sv: sv, v: v}
	c.mu.Unlock()
	return v
}

// current returns an instance's view: its stored snapshot, or the
// machine's initial state when it has none (nothing is created).
func (g *Gate) current(ctx context.Context, m *workflow.Workflow, handle string) (view, error) {
	if handle == "" && m.NeedsInput() {
		return notStartedView(m), nil
	}
	if handle == "" {
		init := m.Initial()
		if init == nil {
			return view{}, errors.New("the machine cannot start")
		}
		sv := g.served.Load()
		if v, ok := sv.initial.Load(m); ok {
			return v.(view), nil
		}
		v := g.viewOf(sv, m, init)
		sv.initial.Store(m, v)
		return v, nil
	}
	in, err := g.inst.Load(ctx, m, handle)
	if err != nil {
		return view{}, err
	}
	return g.view(in), nil
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
	who := anonymous()
	if s != nil {
		who = s.who()
	}
	out := make([]shown, len(ms))
	for i, m := range ms {
		out[i] = shown{id: m.ID, version: m.Listing + upstreams}
		v, err := g.current(ctx, m, g.instanceOf(s, m))
		if err != nil {
			g.log.Warn("cannot load instance for listing", "machine", m.ID, "err", err)
			out[i].tools = []string{m.StatusTool}
			continue
		}
		out[i].tools, out[i].initial = g.visible(v.tools, who), v.initial
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

// listTools makes a tools/list answer what the session may see (mcp-go
// lists every tool registered; see plug): the host's own tools, and the
// gate's that the session's instances allow now, in their compact form in
// a workflow's initial state; a client of revision 2026-07-28 gets the
// static list (staticList).
func (g *Gate) listTools(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	g.activity.Add(1)
	if modern(ctx) {
		if s := g.sessionOf(ctx); s != nil {
			s.modern.Store(true)
		}
		return g.staticList(tools)
	}
	s := g.sessionOf(ctx)
	if s != nil {
		s.listed.Store(g.lists.Add(1))
		s.notified.Store(false) // it sees the list now
		s.setPrincipal(g.principalOf(ctx))
	}
	return g.listFor(ctx, s, tools)
}

// listFor is the tool list of a session of a revision with sessions.
func (g *Gate) listFor(ctx context.Context, s *session, tools []mcp.Tool) []mcp.Tool {
	allowed := map[string]bool{} // tool name -> compact
	for _, sh := range g.shownTo(ctx, s) {
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

// listedNames are the names a tools/list would list now, sorted: to a
// session of a revision with sessions, or to any client of 2026-07-28.
func (g *Gate) listedNames(ctx context.Context, s *session, modern bool) []string {
	srv := g.srv.Load()
	if srv == nil {
		return nil
	}
	var all []mcp.Tool
	for _, st := range srv.ListTools() {
		all = append(all, st.Tool)
	}
	var listed []mcp.Tool
	if modern {
		listed = g.staticList(all)
	} else {
		listed = g.listFor(ctx, s, all)
	}
	out := make([]string, len(listed))
	for i, t := range listed {
		out[i] = t.Name
	}
	slices.Sort(out)
	return out
}

// refresh tells the sessions that see an instance that their tool list
// changed, when it did.
func (g *Gate) refresh(ctx context.Context, m *workflow.Workflow, handle string) {
	for _, s := range g.sessionsSeeing(m, handle) {
		g.refreshSession(ctx, s)
	}
}

// refreshAfter tells the sessions whose list changed after what the gate
// serves changed. When every client was told already (mcp-go tells them
// as tools are registered, t.all), it records what each session sees
// now and tells it nothing again, but a session that listed since
// mcp-go told it (after t.fence): its list, made before the gate served
// the change, may be the old one, and it is told if it differs.
func (g *Gate) refreshAfter(ctx context.Context, t told) {
	for _, s := range g.allSessions() {
		if t.all && s.listed.Load() < t.fence {
			g.shownTo(ctx, s)
		} else {
			g.refreshSession(ctx, s)
		}
	}
}

// refreshSession tells a session that its tool list changed, if it did
// since it was last shown it.
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
	g.tellListChanged(ctx, s) // mcpgo.go
}
