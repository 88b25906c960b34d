// Package gate serves XState workflows as the gate of an MCP server:
// each workflow's events are tools, a tool is listed only while the
// caller's instance would take its event, a call to a tool that is not
// listed is refused with the tools allowed now, a call that is moves the
// instance and stores its new snapshot before the answer, and every
// session whose tool list changed is told (notifications/tools/list_changed).
//
// The package's parts, a file each:
//
//   - Instances (instances.go, timers.go): the workflows' instances in a
//     store.Store, one event at a time per instance, under a deadline, with
//     their timers and audit trail. It knows nothing of MCP; Go code sends
//     events with Send.
//   - Workflow (workflow.go): a machine and the tools its events make,
//     loaded from a file (LoadWorkflow) or made in memory (NewWorkflow);
//     Library (reload.go) keeps a folder's workflows, reloading them as
//     the files change.
//   - Gate (gate.go, tools.go, listing.go, sessions.go, call.go): plugs into
//     a host's mcp-go server (Bind): the workflows' tools, a tool filter
//     that lists them by state, the sessions and their notifications, and
//     the tools' handlers. Bound tools (bound.go) gate tools with handlers
//     of their own by state: a Go function, or a host's tool.
//   - Transports (http.go, serve.go, jsonrpc.go): mcp-go's Streamable HTTP
//     and stdio servers, behind the checks a local server needs.
package gate

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

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
	// Upstreams, when set, are the other MCP servers whose tools the
	// workflows gate (see Upstreams).
	Upstreams Upstreams
	// InspectURL, when set, is the address of the inspector's pages
	// ("http://127.0.0.1:3001/inspect"): the status tool's result links
	// to the instance's page, InspectURL/WORKFLOW/HANDLE (each part
	// path-escaped), in its structured content ("inspect") and its text.
	InspectURL string
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
	// listChanged: mcp-go tells every client when tools are registered or
	// removed (the gate registers them only when they change), which is
	// what clients of revision 2026-07-28 opt in to with
	// subscriptions/listen; the gate tells each session of an earlier
	// revision when its own list changed (refresh).
	server.WithToolCapabilities(true)(srv)
	// Revision 2026-07-28's tool list is the same for every caller, and
	// changes only with the machine files and the upstream servers.
	server.WithMethodCacheHints(mcp.MethodToolsList, ListTTL.Milliseconds(), mcp.CacheScopePrivate)(srv)
	server.WithToolFilter(g.filterTools)(srv)
	srv.Use(g.gateBound)
	srv.AddTool(mcp.NewTool(unknownTool, mcp.WithDescription("(never listed: answers calls to unknown tools)")), g.handleUnknown)
	g.setMu.Lock()
	g.srv.Store(srv)
	g.registerTools(g.served.Load().tools, nil)
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
const Instructions = "Each tool moves a workflow one step. Only the tools that the workflow accepts in its current state are listed; call the status tool of a workflow to see where it is and what it allows. (Under protocol revision 2026-07-28 every tool is listed, each saying when it is available: call a workflow's start tool for a handle, pass it to its other tools, and follow the tools each result names.)"

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

func joinTools(names []string) string {
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}
