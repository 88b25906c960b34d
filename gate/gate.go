// Package gate is stategate's MCP side: it serves machines as workflows
// whose events are MCP tools, lists a tool only while the caller's
// instance of the workflow would take its event, refuses a call to a tool
// that is not listed, moves the instance on a call that is, stores the new
// snapshot before answering, and tells every session whose tool list
// changed (notifications/tools/list_changed).
//
// It owns tools from machines, listing and call gating, instances and
// their handles, sessions, and notifications; machines come from the
// xstate package and snapshots are kept by a store.Store.
package gate

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/xstate"
)

// DefaultInstance is the instance of a machine with no handle key that a
// session without its own instance (stdio) uses.
const DefaultInstance = "default"

// Options configure a Gate.
type Options struct {
	// Store keeps the instances; a memory store when nil.
	Store store.Store
	// Logger receives the gate's logs; slog.Default() when nil.
	Logger *slog.Logger
	// SharedInstance, when set, names the one instance that every session
	// uses for machines with no handle key (stdio). When empty, each MCP
	// session has its own (HTTP).
	SharedInstance string
	// Name and Version are the server's, as MCP clients see them.
	Name, Version string
	// EventTimeout bounds the work of one event on an instance (a call's,
	// a timer's, an instance's start), all the steps and the events its
	// actors send one another included; DefaultEventTimeout when zero.
	EventTimeout time.Duration
}

// Gate serves machines over MCP.
type Gate struct {
	opts Options
	log  *slog.Logger

	// srv is the server the gate is bound to (Bind), nil before; bindMu
	// serializes binding.
	bindMu sync.Mutex
	srv    atomic.Pointer[server.MCPServer]

	// bindings are the tools bound to workflow states, by tool name
	// (under setMu).
	bindings map[string]*Binding

	// calls holds the contexts of the tool calls under way between
	// mcp-go's BeforeCallTool hook and its tool filter (see addHooks).
	calls sync.Map

	// served is what the gate serves, replaced whole by SetWorkflows (under
	// setMu) and read without a lock.
	served atomic.Pointer[served]
	setMu  sync.Mutex

	// inst keeps the instances of the workflows served.
	inst *Instances

	sessMu   sync.Mutex
	sessions map[string]*session // by session id
	byName   map[string]*session // by name
	// viewers are the sessions that see an instance of a machine with a
	// handle key: whom a change of the instance concerns.
	viewers map[store.Key]map[*session]bool

	errMu    sync.Mutex
	loadErrs map[string]error // files that fail to load now
	errRoot  string           // the folder they are in

	// nameKey keys the names the gate gives sessions (sessionName): a
	// session id is a client's credential and is never shown or stored.
	nameKey [32]byte

	activity atomic.Uint64 // tool calls and tool lists answered
}

// setErrors records the machine files that fail to load now, for the
// status tool.
func (g *Gate) setErrors(errs map[string]error, root string) {
	g.errMu.Lock()
	g.loadErrs, g.errRoot = errs, root
	g.errMu.Unlock()
}

// publicError renders a file's error for clients: without a line of the
// file (xstate.PublicError), and with its paths relative to the machines
// folder (the server's own folders are not the clients' business).
func (g *Gate) publicError(err error) string {
	s := xstate.PublicError(err)
	g.errMu.Lock()
	root := g.errRoot
	g.errMu.Unlock()
	if root == "" {
		return s
	}
	for _, r := range []string{absPath(root), filepath.Clean(root)} {
		s = strings.ReplaceAll(s, r+string(filepath.Separator), "")
		s = strings.ReplaceAll(s, " "+r, "")
	}
	return s
}

// loadError returns the error of a machine's file, if it fails to load
// now (its last good version is served).
func (g *Gate) loadError(m *Workflow) error {
	g.errMu.Lock()
	defer g.errMu.Unlock()
	return g.loadErrs[m.File]
}

// toolRef is what a tool name stands for.
type toolRef struct {
	m    *Workflow
	kind toolKind
	tool *Tool // for event tools
	// binding is a bound tool's.
	binding *Binding
	// full and compact are the tool as listed, outside and in the
	// machine's initial state.
	full, compact mcp.Tool
}

type toolKind uint8

const (
	eventTool toolKind = iota
	statusTool
	resetTool
	boundTool // a tool with a handler of its own, bound to states
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
	mu        sync.Mutex
	// handles are the instances the session used last, by machine (for
	// machines with a handle key).
	handles map[string]string
	// last is the tool list the session was last shown or told about.
	last []shown
}

// served is the machines a gate serves and their tools.
type served struct {
	machines map[string]*Workflow  // by id
	sorted   []*Workflow           // the same, sorted by id
	tools    map[string]*toolRef   // by tool name
	bound    map[string][]*Binding // the bindings to each workflow, by its id
	// boundEvents are the events bound to tools (which have no event
	// tool), by workflow id.
	boundEvents map[string]map[string]bool
	// initial caches what a session that has no instance of a workflow
	// sees, by *Workflow (views are computed for what is served).
	initial sync.Map
}

// New makes a gate serving no workflow yet. Plug it into an mcp-go server
// with Bind; Server, HTTPHandler and ServeStdio make one of its own when it
// was bound to none.
func New(opts Options) *Gate {
	g := &Gate{opts: opts, log: opts.Logger, sessions: map[string]*session{}, byName: map[string]*session{}, viewers: map[store.Key]map[*session]bool{},
		bindings: map[string]*Binding{}}
	_, _ = rand.Read(g.nameKey[:])
	g.served.Store(&served{machines: map[string]*Workflow{}, tools: map[string]*toolRef{}})
	if g.log == nil {
		g.log = slog.Default()
	}
	g.inst = NewInstances(InstancesOptions{Store: opts.Store, Logger: g.log, EventTimeout: opts.EventTimeout})
	g.inst.changed = g.refresh
	return g
}

// ErrBound is returned by Bind for a gate bound to a server already.
var ErrBound = errors.New("the gate is bound to a server already")

// Bind plugs the gate into an mcp-go server, the host's: the host's own
// tools stay as they are (unless bound to states with Bound or Tool), and
// the gate adds its workflows' tools, lists each of them only while the
// caller's instance allows it (a tool filter), gates the calls of bound
// tools (a tool handler middleware), follows the sessions (hooks), and
// tells each session when its tool list changed. It takes over the tools
// capability's listChanged: mcp-go would tell every session whenever a
// tool is registered, and the gate tells only those whose list changed.
// Bind before serving; a gate binds to one server.
func (g *Gate) Bind(srv *server.MCPServer) error {
	g.bindMu.Lock()
	defer g.bindMu.Unlock()
	if g.srv.Load() != nil {
		return ErrBound
	}
	hooks := srv.GetHooks()
	if hooks == nil {
		hooks = &server.Hooks{}
		server.WithHooks(hooks)(srv)
	}
	g.addHooks(hooks)
	server.WithToolCapabilities(false)(srv) // listChanged: see addHooks
	server.WithToolFilter(g.filterTools)(srv)
	srv.Use(g.gateBound)
	srv.AddTool(mcp.NewTool(unknownTool, mcp.WithDescription("(never listed: answers calls to unknown tools)")), g.handleUnknown)
	g.setMu.Lock()
	g.srv.Store(srv)
	g.registerTools(g.served.Load().tools)
	g.setMu.Unlock()
	return nil
}

// Server returns the MCP server the gate is bound to; a gate bound to none
// gets one of its own (named by Options.Name and Version, with
// instructions for agents and mcp-go's panic recovery).
func (g *Gate) Server() *server.MCPServer {
	if srv := g.srv.Load(); srv != nil {
		return srv
	}
	name := cmp.Or(g.opts.Name, "stategate")
	srv := server.NewMCPServer(name, g.opts.Version, server.WithRecovery(), server.WithInstructions(Instructions))
	if err := g.Bind(srv); err != nil { // bound meanwhile
		return g.Server()
	}
	return srv
}

// Instructions tell agents how a gated server behaves (the server's own,
// when the gate makes it).
const Instructions = "Each tool moves a workflow one step. Only the tools that the workflow accepts in its current state are listed; call the status tool of a workflow to see where it is and what it allows."

// addHooks adds the gate's hooks to a server's.
func (g *Gate) addHooks(hooks *server.Hooks) {
	hooks.AddOnRegisterSession(func(ctx context.Context, s server.ClientSession) { g.addSession(ctx, s.SessionID()) })
	hooks.AddOnUnregisterSession(func(ctx context.Context, s server.ClientSession) { g.dropSession(s.SessionID()) })
	// A request's answer carries the notifications that waited for the
	// session, and those sent while it ran (see session.notified).
	delivered := func(ctx context.Context) {
		if s := g.sessionOf(ctx); s != nil {
			s.notified.Store(false)
		}
	}
	hooks.AddBeforeAny(func(ctx context.Context, _ any, _ mcp.MCPMethod, _ any) { delivered(ctx) })
	hooks.AddOnSuccess(func(ctx context.Context, _ any, _ mcp.MCPMethod, _ any, _ any) { delivered(ctx) })
	hooks.AddOnError(func(ctx context.Context, _ any, _ mcp.MCPMethod, _ any, _ error) {
		delivered(ctx)
		g.calls.Delete(ctx)
	})
	hooks.AddAfterCallTool(func(ctx context.Context, _ any, _ *mcp.CallToolRequest, _ any) { g.calls.Delete(ctx) })
	// The server advertises tools.listChanged, but mcp-go must not know:
	// it would tell every session whenever tools are registered, and the
	// gate tells only the sessions whose list changed.
	hooks.AddAfterInitialize(func(ctx context.Context, _ any, _ *mcp.InitializeRequest, result *mcp.InitializeResult) {
		if result == nil {
			return
		}
		if result.Capabilities.Tools != nil {
			result.Capabilities.Tools.ListChanged = true
		}
		negotiate(ctx, result)
	})
	hooks.AddBeforeCallTool(func(ctx context.Context, _ any, req *mcp.CallToolRequest) {
		if req == nil {
			return
		}
		// The tool filter is asked about the tool of a call too: a call
		// is let through, and its handler (the gate's, or the bound
		// tools' middleware) refuses it with the tools allowed now,
		// rather than mcp-go's bare "tool not found". The context of the
		// call is the filter's.
		g.calls.Store(ctx, struct{}{})
		// A call to a tool nobody serves is answered by the gate
		// (UNKNOWN, with the tools available now): mcp-go has no handler
		// for unknown tools, so the call is routed to a hidden one that
		// knows the name asked for.
		if g.srv.Load().GetTool(req.Params.Name) == nil {
			if req.Params.Meta == nil {
				req.Params.Meta = &mcp.Meta{}
			}
			req.Params.Meta.SetMetaField(metaRequestedTool, req.Params.Name)
			req.Params.Name = unknownTool
		}
	})
}

// unknownTool is the hidden tool that calls to unknown tools are routed
// to, with the name asked for in their _meta (metaRequestedTool).
const (
	unknownTool       = "stategate.unknown-tool"
	metaRequestedTool = "stategate/requestedTool"
)

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

// Instances returns the instances of the workflows the gate serves: send
// them events from Go, read their state, run their timers.
func (g *Gate) Instances() *Instances { return g.inst }

// RunTimers fires the instances' timers as they fall due, until ctx ends
// (Instances.RunTimers).
func (g *Gate) RunTimers(ctx context.Context) error { return g.inst.RunTimers(ctx) }

// Activity counts the tool calls and tool lists the gate has answered: a
// value that does not change tells the gate has been idle since it was
// read.
func (g *Gate) Activity() uint64 { return g.activity.Load() }

// Workflows returns the served machines, sorted by id.
func (g *Gate) Workflows() []*Workflow {
	return slices.Clone(g.workflowList())
}

// workflowList returns the served machines sorted by id; the slice is
// shared and must not be changed.
func (g *Gate) workflowList() []*Workflow { return g.served.Load().sorted }

// ErrToolClash is returned by SetWorkflows when two workflows make tools of
// one name.
var ErrToolClash = errors.New("tool name clash")

// SetWorkflows replaces the served machines. Tools of machines no longer
// served are removed; sessions whose tool list changes are told.
func (g *Gate) SetWorkflows(ms []*Workflow) error {
	if err := g.setWorkflows(ms); err != nil {
		return err
	}
	g.refreshAll(context.Background())
	return nil
}

// setWorkflows replaces what the gate serves; calls are serialized.
func (g *Gate) setWorkflows(ms []*Workflow) error {
	g.setMu.Lock()
	defer g.setMu.Unlock()
	return g.serve(ms)
}

// serve makes the tools of workflows and of the bindings to them, and
// serves them (under setMu).
func (g *Gate) serve(ms []*Workflow) error {
	tools := map[string]*toolRef{}
	ids := map[string]*Workflow{}
	add := func(name string, ref toolRef) error {
		if other, dup := tools[name]; dup {
			return fmt.Errorf("%w: %s is a tool of %s (%s) and of %s (%s)", ErrToolClash, name, other.m.ID, other.m.File, ref.m.ID, ref.m.File)
		}
		ref.full = g.mcpTool(name, ref, false)
		ref.compact = g.mcpTool(name, ref, true)
		tools[name] = &ref
		return nil
	}
	// An event bound to a tool (or sent when it fails) has no tool of its
	// own: the agent sends it by calling the bound tool, whose handler
	// does the work.
	boundEvents := map[string]map[string]bool{}
	for _, b := range g.bindings {
		if boundEvents[b.workflow] == nil {
			boundEvents[b.workflow] = map[string]bool{}
		}
		boundEvents[b.workflow][b.event] = true
		if b.errorEvent != "" {
			boundEvents[b.workflow][b.errorEvent] = true
		}
	}
	for _, m := range ms {
		if other, dup := ids[m.ID]; dup {
			return fmt.Errorf("%w: machine id %q is used by %s and %s", ErrToolClash, m.ID, other.File, m.File)
		}
		ids[m.ID] = m
		for _, t := range m.Tools {
			if boundEvents[m.ID][t.Event] {
				continue
			}
			if err := add(t.Name, toolRef{m: m, kind: eventTool, tool: t}); err != nil {
				return err
			}
		}
		if err := add(m.StatusTool, toolRef{m: m, kind: statusTool}); err != nil {
			return err
		}
		if err := add(m.ResetTool, toolRef{m: m, kind: resetTool}); err != nil {
			return err
		}
	}
	bound := map[string][]*Binding{}
	for _, name := range slices.Sorted(maps.Keys(g.bindings)) {
		b := g.bindings[name]
		m := ids[b.workflow]
		if m == nil {
			continue // not served (now): the tool is not listed
		}
		if err := add(name, toolRef{m: m, kind: boundTool, binding: b}); err != nil {
			return err
		}
		bound[m.ID] = append(bound[m.ID], b)
	}
	sorted := slices.SortedFunc(maps.Values(ids), func(a, b *Workflow) int { return strings.Compare(a.ID, b.ID) })
	prev := g.served.Load().tools
	// New tools are registered with the MCP server before the gate serves
	// them, and old ones removed after, so that a call never finds a tool
	// in one and not the other.
	g.registerTools(tools)
	g.inst.setWorkflows(ids)
	g.served.Store(&served{machines: ids, tools: tools, sorted: sorted, bound: bound, boundEvents: boundEvents})
	g.unregisterTools(prev, tools)
	return nil
}

// registerTools registers the tools with the bound server (if any): the
// workflows' own tools with the gate's handler, and bound tools with
// their handler (and the handle argument in their schema when the
// workflow has a handle key).
func (g *Gate) registerTools(tools map[string]*toolRef) {
	srv := g.srv.Load()
	if srv == nil {
		return
	}
	var add []server.ServerTool
	for _, name := range slices.Sorted(maps.Keys(tools)) {
		ref := tools[name]
		h := server.ToolHandlerFunc(g.handle)
		if ref.kind == boundTool {
			if h = ref.binding.handlerFor(srv); h == nil {
				continue // the host has not registered it (yet)
			}
		}
		add = append(add, server.ServerTool{Tool: ref.full, Handler: h})
	}
	if len(add) > 0 {
		srv.AddTools(add...)
	}
}

// unregisterTools removes from the bound server the workflows' own tools
// that are gone (a bound tool stays registered: its handler is the host's).
func (g *Gate) unregisterTools(prev, now map[string]*toolRef) {
	srv := g.srv.Load()
	if srv == nil {
		return
	}
	var gone []string
	for name, ref := range prev {
		if _, ok := now[name]; !ok && ref.kind != boundTool {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		srv.DeleteTools(gone...)
	}
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
		schema, readOnly = ref.m.statusSchema(), true
	case resetTool:
		desc = fmt.Sprintf("Start the %s workflow afresh: it is finished (done or failed) and takes no other step.", ref.m.ID)
		schema = ref.m.statusSchema()
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
		hint := func(v bool) *bool { return &v }
		for h, v := range ref.tool.Hints {
			switch h {
			case "readOnlyHint":
				t.Annotations.ReadOnlyHint = hint(v)
			case "destructiveHint":
				t.Annotations.DestructiveHint = hint(v)
			case "idempotentHint":
				t.Annotations.IdempotentHint = hint(v)
			case "openWorldHint":
				t.Annotations.OpenWorldHint = hint(v)
			}
		}
	}
	return t
}

func (g *Gate) lookup(name string) (*toolRef, bool) {
	ref, ok := g.served.Load().tools[name]
	return ref, ok
}

// --- sessions ---

func (g *Gate) sessionOf(ctx context.Context) *session {
	cs := server.ClientSessionFromContext(ctx)
	if cs == nil {
		return nil
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
	return &session{id: id, name: g.sessionName(id), handles: map[string]string{}}
}

// streamingKey marks the context of a session registered by a transport
// that writes notifications as they are sent (stdio).
type streamingKey struct{}

// setStreaming records whether a session has a stream that takes its
// notifications as they are sent (an HTTP GET stream).
func (g *Gate) setStreaming(id string, on bool) {
	g.sessMu.Lock()
	s := g.sessions[id]
	g.sessMu.Unlock()
	if s != nil {
		s.streaming.Store(on)
		if on {
			s.notified.Store(false)
		}
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
	s.streaming.Store(ctx.Value(streamingKey{}) != nil)
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
}

// useHandle makes a session see an instance of a handle-key machine; it
// reports whether that is a change.
func (g *Gate) useHandle(s *session, m *Workflow, h string) bool {
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
func (g *Gate) sessionsSeeing(m *Workflow, handle string) []*session {
	g.sessMu.Lock()
	defer g.sessMu.Unlock()
	switch {
	case m.HandleKey != "":
		out := make([]*session, 0, len(g.viewers[instanceKey(m, handle)]))
		for s := range g.viewers[instanceKey(m, handle)] {
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
func (g *Gate) instanceOf(s *session, m *Workflow) string {
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

// --- listing ---

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
	out := make([]shown, len(ms))
	for i, m := range ms {
		out[i] = shown{id: m.ID, version: m.listing}
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

func (g *Gate) refreshAll(ctx context.Context) {
	for _, s := range g.allSessions() {
		g.refreshSession(ctx, s)
	}
}

func (g *Gate) refreshSession(ctx context.Context, s *session) {
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
	if err := srv.SendNotificationToSpecificClient(s.id, "notifications/tools/list_changed", nil); err != nil {
		s.notified.Store(false) // not told: the next change tries again
		g.log.Debug("cannot notify session", "session", s.name, "err", err)
	}
}

func joinTools(names []string) string {
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}
