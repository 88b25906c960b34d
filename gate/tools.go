package gate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/stategate/stategate/workflow"
)

// toolRef is what a tool name stands for.
type toolRef struct {
	m    *workflow.Workflow
	kind toolKind
	tool *workflow.Tool // for event tools
	// binding is a bound tool's.
	binding *Binding
	// full and compact are the tool as listed, outside and in the
	// machine's initial state; modern as listed to clients of revision
	// 2026-07-28 (the same list for every caller: see modernTool).
	full, compact, modern mcp.Tool
	// state is a state tool's (an upstream tool its states list).
	state *workflow.StateTool
	// server is a passed-through upstream tool's server.
	server string
	// keepHandle is set on an upstream tool that takes an argument of
	// the handle key's name itself: it is forwarded.
	keepHandle bool
	// checkArgs checks a bound tool's arguments against its input schema
	// (nil when it has none the gate could read).
	checkArgs func(map[string]any) error
}

// owner names what made a tool, for errors.
func (r *toolRef) owner() string {
	if r.kind == passTool {
		return fmt.Sprintf("the upstream server %s (expose: always)", r.server)
	}
	if r.m.File == "" {
		return r.m.ID
	}
	return fmt.Sprintf("%s (%s)", r.m.ID, r.m.File)
}

type toolKind uint8

const (
	eventTool toolKind = iota
	statusTool
	resetTool
	boundTool // a tool with a handler of its own, bound to states
	stateTool // an upstream tool that states list, sending no event
	passTool  // an upstream tool passed through, always listed
	startTool // starts an instance with a new handle (revision 2026-07-28)
)

// served is the machines a gate serves and their tools.
type served struct {
	machines map[string]*workflow.Workflow // by id
	sorted   []*workflow.Workflow          // the same, sorted by id
	tools    map[string]*toolRef           // by tool name
	bound    map[string][]*Binding         // the bindings to each workflow, by its id
	// boundEvents are the events bound to tools (which have no event
	// tool), by workflow id.
	boundEvents map[string]map[string]bool
	// upstreams hashes the upstream tools served: a change of one is a
	// change of the listings that show it.
	upstreams string
	// static hashes the tool list of revision 2026-07-28 clients.
	static string
	// initial caches what a session that has no instance of a workflow
	// sees, by *workflow.Workflow (views are computed for what is served).
	initial sync.Map
}

// serve makes the tools of workflows and of the bindings to them, and
// serves them (under setMu). It says what clients were told (told): mcp-go
// tells every client when tools are registered or removed.
func (g *Gate) serve(ms []*workflow.Workflow) (t told, err error) {
	tools := map[string]*toolRef{}
	ids := map[string]*workflow.Workflow{}
	add := func(name string, ref toolRef) error {
		if other, dup := tools[name]; dup {
			return fmt.Errorf("%w: %s is a tool of %s and of %s", workflow.ErrToolClash, name, other.owner(), ref.owner())
		}
		if ref.kind != stateTool && ref.kind != passTool {
			ref.full = g.mcpTool(name, ref, false)
			ref.compact = g.mcpTool(name, ref, true)
		}
		if ref.kind == boundTool {
			schema := ref.full.RawInputSchema
			if schema == nil {
				schema, _ = json.Marshal(ref.full.InputSchema)
			}
			check, err := workflow.ArgsChecker(name, schema)
			if err != nil {
				g.log.Warn("a bound tool's input schema cannot be read: its arguments are not checked", "tool", name, "err", err)
			}
			ref.checkArgs = check
		}
		ref.modern = g.modernTool(&ref)
		tools[name] = &ref
		return nil
	}
	// An event bound to a tool (or sent when it fails) has no tool of its
	// own: the agent sends it by calling the bound tool, whose handler
	// does the work.
	byID := map[string]*workflow.Workflow{}
	for _, m := range ms {
		byID[m.ID] = m
	}
	g.checkBindings(byID)
	boundEvents := map[string]map[string]bool{}
	for name, b := range g.bindings {
		if g.bindErrs[name] != nil {
			continue // not served: its event keeps its own tool
		}
		if boundEvents[b.workflow] == nil {
			boundEvents[b.workflow] = map[string]bool{}
		}
		boundEvents[b.workflow][b.event] = true
		if b.errorEvent != "" {
			boundEvents[b.workflow][b.errorEvent] = true
		}
	}
	us := g.upstreamSet()
	named := map[string]bool{} // upstream tools a workflow names
	for _, m := range ms {
		for _, t := range m.Tools {
			if t.Upstream != "" {
				named[t.Upstream] = true
				if boundEvents[m.ID] == nil {
					boundEvents[m.ID] = map[string]bool{}
				}
				boundEvents[m.ID][t.Event] = true
				if t.OnError != "" {
					boundEvents[m.ID][t.OnError] = true
				}
			}
		}
		for _, st := range m.StateTools {
			named[st.Upstream] = true
		}
	}
	bound := map[string][]*Binding{}
	for _, m := range ms {
		if other, dup := ids[m.ID]; dup {
			return told{}, fmt.Errorf("%w: machine id %q is used by %s and %s", workflow.ErrToolClash, m.ID, other.File, m.File)
		}
		ids[m.ID] = m
		for _, t := range m.Tools {
			if t.Upstream != "" {
				b := g.boundUpstream(m, t, us)
				if err := add(t.Name, toolRef{m: m, kind: boundTool, binding: b}); err != nil {
					return told{}, err
				}
				bound[m.ID] = append(bound[m.ID], b)
				continue
			}
			if boundEvents[m.ID][t.Event] {
				continue
			}
			if err := add(t.Name, toolRef{m: m, kind: eventTool, tool: t}); err != nil {
				return told{}, err
			}
		}
		for _, st := range m.StateTools {
			def := g.stateToolDef(m, st, us)
			orig, _ := us.tool(st.Upstream)
			ref := toolRef{m: m, kind: stateTool, state: st, full: def, compact: def, keepHandle: takesArg(orig, m.HandleKey)}
			if err := add(st.Name, ref); err != nil {
				return told{}, err
			}
		}
		if err := add(m.StatusTool, toolRef{m: m, kind: statusTool}); err != nil {
			return told{}, err
		}
		if err := add(m.ResetTool, toolRef{m: m, kind: resetTool}); err != nil {
			return told{}, err
		}
		if err := add(m.StartTool, toolRef{m: m, kind: startTool}); err != nil {
			return told{}, err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(g.bindings)) {
		b := g.bindings[name]
		m := ids[b.workflow]
		if m == nil || g.bindErrs[name] != nil {
			continue // not served (now): the tool is not listed
		}
		if err := add(name, toolRef{m: m, kind: boundTool, binding: b}); err != nil {
			return told{}, err
		}
		bound[m.ID] = append(bound[m.ID], b)
	}
	// An exposed upstream tool whose name is taken (a workflow's tool,
	// or another server's exposed tool) is dropped, and said once: an
	// upstream's list never blocks the workflows or the other upstreams.
	pass, clashes := g.passTools(us, named)
	for _, name := range slices.Sorted(maps.Keys(pass)) {
		if other, taken := tools[name]; taken {
			clashes[name] = fmt.Sprintf("%s and %s", pass[name].owner(), other.owner())
			continue
		}
		if err := add(name, *pass[name]); err != nil {
			return told{}, err
		}
	}
	for name, both := range clashes {
		if g.passClashes[name] != both {
			g.log.Error("an exposed upstream tool is not served: its name is taken", "tool", name, "by", both)
		}
	}
	g.passClashes = clashes
	sorted := slices.SortedFunc(maps.Values(ids), func(a, b *workflow.Workflow) int { return strings.Compare(a.ID, b.ID) })
	prev := g.served.Load().tools
	// New tools are registered with the MCP server before the gate serves
	// them, and old ones removed after, so that a call never finds a tool
	// in one and not the other.
	static := staticVersion(tools)
	// mcp-go tells every client as it registers tools, before what the
	// gate serves is swapped below: a session that lists between the two
	// is shown what was served, and is to be told again (refreshAfter).
	t.fence = g.lists.Add(1)
	changed := g.registerTools(tools, prev)
	if g.registered != nil {
		g.registered()
	}
	if err := g.inst.SetWorkflows(sorted...); err != nil {
		return told{}, err // the ids were checked above: not reached
	}
	old := g.served.Swap(&served{machines: ids, tools: tools, sorted: sorted, bound: bound, boundEvents: boundEvents, upstreams: us.version, static: static})
	if g.unregisterTools(prev, tools) {
		changed = true
	}
	// Clients of revision 2026-07-28 are told through subscriptions/listen
	// when their list changed: by mcp-go when tools were registered or
	// removed, else here.
	if srv := g.srv.Load(); srv != nil && !changed && old.static != static {
		srv.SendNotificationToAllClients(string(mcp.MethodNotificationToolsListChanged), nil)
		changed = true
	}
	t.all = changed && g.srv.Load() != nil
	return t, nil
}

// told is what a serve told clients: whether mcp-go told every client
// that its list changed (all), and the count of lists at that moment
// (fence): a session's list begun after it was made of what was served
// before.
type told struct {
	all   bool
	fence uint64
}

// staticVersion hashes the tool list of revision 2026-07-28 clients.
func staticVersion(tools map[string]*toolRef) string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	for _, name := range slices.Sorted(maps.Keys(tools)) {
		_ = enc.Encode(tools[name].modern)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// registerTools registers the tools with the bound server (if any): the
// workflows' own tools with the gate's handler, and bound tools with
// their handler (and the handle argument in their schema when the
// workflow has a handle key). A tool registered already as it is stays
// (mcp-go tells every client when tools are registered); it reports
// whether it registered any.
func (g *Gate) registerTools(tools, prev map[string]*toolRef) bool {
	srv := g.srv.Load()
	if srv == nil {
		return false
	}
	var add []server.ServerTool
	for _, name := range slices.Sorted(maps.Keys(tools)) {
		ref := tools[name]
		if p := prev[name]; p != nil && p.kind == ref.kind && sameBinding(p.binding, ref.binding) && p.server == ref.server && srv.GetTool(name) != nil && sameTool(p.full, ref.full) {
			continue
		}
		h := server.ToolHandlerFunc(g.handleCall)
		switch ref.kind {
		case boundTool:
			if h = ref.binding.handlerFor(srv); h == nil {
				continue // the host has not registered it (yet)
			}
		case passTool:
			h = g.forward(ref.server, name, "", false, nil, ref.full)
		}
		add = append(add, server.ServerTool{Tool: ref.full, Handler: h})
	}
	if len(add) > 0 {
		srv.AddTools(add...)
	}
	return len(add) > 0
}

// sameTool reports whether two tools are listed alike.
func sameTool(a, b mcp.Tool) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// unregisterTools removes from the bound server the workflows' own tools
// that are gone (a bound tool stays registered: its handler is the host's).
func (g *Gate) unregisterTools(prev, now map[string]*toolRef) bool {
	srv := g.srv.Load()
	if srv == nil {
		return false
	}
	var gone []string
	for name, ref := range prev {
		if _, ok := now[name]; !ok && (ref.kind != boundTool || ref.binding.fromMachine) {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		srv.DeleteTools(gone...)
	}
	return len(gone) > 0
}

// mcpTool describes a tool to MCP clients.
func (g *Gate) mcpTool(name string, ref toolRef, compact bool) mcp.Tool {
	var desc string
	var schema map[string]any
	readOnly := false
	switch ref.kind {
	case eventTool:
		desc, schema = ref.tool.Description, ref.tool.Schema
		if compact && ref.tool.Compact != "" {
			desc = ref.tool.Compact
		}
	case statusTool:
		desc = fmt.Sprintf("Show where the %s workflow is: its state, status, context, and the tools it allows now.", ref.m.ID)
		schema, readOnly = ref.m.HandleSchema(), true
	case resetTool:
		desc = fmt.Sprintf("Start the %s workflow afresh: it is finished (done or failed) and takes no other step.", ref.m.ID)
		schema = ref.m.HandleSchema()
	case startTool:
		desc, schema = startDescription(ref.m, false), ref.m.StartSchema(true)
	}
	if ref.kind == boundTool {
		return g.listedTool(ref.binding, ref.m)
	}
	raw, _ := json.Marshal(schema)
	t := mcp.NewToolWithRawSchema(name, desc, raw)
	t.Annotations.ReadOnlyHint = &readOnly
	destructive := false
	t.Annotations.DestructiveHint = &destructive
	if ref.kind == eventTool {
		t.Title = ref.tool.Title
		setHints(&t.Annotations, ref.tool.Hints)
	}
	return t
}

// startDescription describes a workflow's start tool, to clients of
// revision 2026-07-28 (modern: it makes the handle) or of earlier ones
// (only for a workflow that takes an input).
func startDescription(m *workflow.Workflow, modern bool) string {
	var d string
	switch {
	case modern:
		d = fmt.Sprintf("Start a new instance of the %s workflow in its initial state: returns its handle (%s), which every other tool of %s takes to act on it.", m.ID, m.ModernHandleKey(), m.ID)
	case m.HandleKey != "":
		d = fmt.Sprintf("Start the %s instance named by %s, with its input: the workflow's other tools act on it once it is started.", m.ID, m.HandleKey)
	default:
		d = fmt.Sprintf("Start the %s workflow with its input: its other tools are available once it is started.", m.ID)
	}
	if m.NeedsInput() {
		if what, _ := m.Input["description"].(string); strings.TrimSpace(what) != "" {
			d += " The input: " + strings.TrimSpace(what)
		} else if modern {
			d += " It takes the workflow's input."
		}
	}
	return d
}

// modernStart is the start tool as clients of revision 2026-07-28 see it:
// it takes the input alone (when the machine has one) and makes the
// handle.
func modernStart(name string, m *workflow.Workflow) mcp.Tool {
	raw, _ := json.Marshal(m.StartSchema(false))
	t := mcp.NewToolWithRawSchema(name, startDescription(m, true), raw)
	readOnly, destructive := false, false
	t.Annotations.ReadOnlyHint, t.Annotations.DestructiveHint = &readOnly, &destructive
	return t
}

// setHints sets a machine's meta.tool.annotations on a tool's.
func setHints(a *mcp.ToolAnnotation, hints map[string]bool) {
	for h, v := range hints {
		switch h {
		case "readOnlyHint":
			a.ReadOnlyHint = &v
		case "destructiveHint":
			a.DestructiveHint = &v
		case "idempotentHint":
			a.IdempotentHint = &v
		case "openWorldHint":
			a.OpenWorldHint = &v
		}
	}
}

func (g *Gate) lookup(name string) (*toolRef, bool) {
	ref, ok := g.served.Load().tools[name]
	return ref, ok
}
