// Package gate is the MCP adapter of workflows: it serves the workflows
// of a workflow.Instances as the tools of an mcp-go server (its own, or a
// host's: Bind). Each workflow's events are tools; a tool is listed only
// while the caller's instance would take its event; a call to a tool that
// is not listed is refused with the tools allowed now; a call that is
// moves the instance, stored before the answer; and every session whose
// tool list changed is told (notifications/tools/list_changed). Tools
// with handlers of their own (a Go function, a host's tool, an upstream
// server's tool) are gated the same way (Binding, Upstreams). Both
// protocol eras are served: sessions (up to 2025-11-25) and handles
// (2026-07-28). The transports are mcp-go's Streamable HTTP and stdio,
// behind the checks a server reachable by others needs.
//
// Each workflow's diagram and each instance's state and audit trail are
// MCP resources, read by the sessions that could act on the instance
// (resources.go).
//
// Where things are: tools.go makes the tools of what is served;
// listing.go decides what a session sees and tells it when that
// changes; call.go answers a call, once down and once back; bound.go and
// upstreams.go gate tools with handlers of their own; resources.go the
// resources; modern.go is
// revision 2026-07-28; sessions.go, http.go and stdio.go the sessions and
// transports, httpsessions.go the HTTP sessions' bound and which one a new
// one may take the place of; replicas.go what several servers on one
// shared store add (UNAVAILABLE, BUSY, routed session ids); mcpgo.go every
// workaround of what mcp-go v1.2.1 lacks.
//
// It knows nothing of how instances are kept (package store's
// interface), of machine files on disk (package workflow's Library hands
// it reloads), or of JavaScript.
package gate

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
)

// DefaultInstance is the instance of a machine with no handle key that a
// session without its own instance (stdio) uses.
const DefaultInstance = "default"

// Options configure a Gate.
type Options struct {
	// Instances keeps the workflows' instances; when nil, the gate makes
	// its own of Store, Logger, EventTimeout and Clock.
	Instances *workflow.Instances
	// Store keeps the instances of a gate that makes its own Instances;
	// a memory store when nil.
	Store store.Store
	// Logger receives the gate's logs; slog.Default() when nil.
	Logger *slog.Logger
	// SharedInstance, when set, names the one instance that every session
	// uses for machines with no handle key (stdio). When empty, each MCP
	// session has its own (HTTP).
	SharedInstance string
	// Name and Version are the server's, as MCP clients see them.
	Name, Version string
	// EventTimeout bounds the work of one event on an instance, for a
	// gate that makes its own Instances (InstancesOptions.EventTimeout).
	EventTimeout time.Duration
	// Upstreams, when set, are the other MCP servers whose tools the
	// workflows gate (see Upstreams).
	Upstreams Upstreams
	// ConfirmTimeout bounds how long a call waits for its human's yes
	// (meta.tool.confirm); DefaultConfirmTimeout when zero. Other
	// instances go on meanwhile; the call's own instance is not held.
	ConfirmTimeout time.Duration
	// InspectLink, when set, is the address of an instance's page in an
	// inspector: the status tool's result links to it, in its
	// structured content ("inspect") and its text.
	InspectLink func(workflow, handle string) string
	// Mermaid, when set, draws a machine as Mermaid stateDiagram-v2 text
	// (graph.Mermaid does: the gate links no drawing code itself), tools
	// naming the tool of each event, active (when not nil) an instance's
	// active states: each workflow's diagram is then a resource, and each
	// instance's drawing a resource template (resources.go).
	Mermaid func(m *interp.Machine, tools map[string]string, active func(*interp.StateNode) bool) string
}

// Gate serves workflows over MCP.
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
	// bindErrs are the bindings not served, with why; bindWaits those
	// waiting for their workflow, with its name (under setMu).
	bindErrs  map[string]error
	bindWaits map[string]string
	// passClashes are the exposed upstream tools not served for a name
	// taken, with what they clash with (under setMu), said once.
	passClashes map[string]string

	// served is what the gate serves, replaced whole by serve (under
	// setMu) and read without a lock.
	served atomic.Pointer[served]
	setMu  sync.Mutex

	// inst keeps the instances of the workflows served.
	inst *workflow.Instances

	// views caches what instances allow (listing.go).
	views viewCache

	sessMu   sync.Mutex
	sessions map[string]*session // by session id
	byName   map[string]*session // by name
	// viewers are the sessions that see an instance of a machine with a
	// handle key: whom a change of the instance concerns.
	viewers map[store.Key]map[*session]bool
	// resWatchers are the sessions subscribed to a resource of an
	// instance (or of a workflow: no handle), under sessMu.
	resWatchers map[store.Key]map[*session]bool

	// failed are the machine files that fail to load now, and the folder
	// they are in (Reloaded).
	failedMu  sync.Mutex
	failed    map[string]error
	failedDir string

	// secret tags the handles the start tool makes (handleSecret).
	secretMu sync.Mutex
	secret   []byte

	// nameKey keys the names the gate gives sessions (sessionName): a
	// session id is a client's credential and is never shown or stored.
	nameKey [32]byte

	activity atomic.Uint64 // tool calls, tool lists and resource reads answered
	// lists counts the tool lists of sessions begun and the serves that
	// had mcp-go tell every client (see told): which lists came after
	// that told.
	lists atomic.Uint64
	// registered, when set (by a test), runs between the registration of
	// a serve's tools with mcp-go and the swap of what is served.
	registered func()
	origins    atomic.Uint64 // the bindings made (Binding.origin)
}

// New makes a gate serving no workflow yet. Plug it into an mcp-go server
// with Bind; Server, HTTPHandler and ServeStdio make one of its own when it
// was bound to none.
func New(opts Options) *Gate {
	g := &Gate{opts: opts, log: opts.Logger, sessions: map[string]*session{}, byName: map[string]*session{},
		viewers: map[store.Key]map[*session]bool{}, bindings: map[string]*Binding{}}
	_, _ = rand.Read(g.nameKey[:])
	g.served.Store(&served{machines: map[string]*workflow.Workflow{}, tools: map[string]*toolRef{}})
	if g.log == nil {
		g.log = slog.Default()
	}
	g.inst = opts.Instances
	if g.inst == nil {
		g.inst = workflow.NewInstances(workflow.InstancesOptions{Store: opts.Store, Logger: g.log, EventTimeout: opts.EventTimeout})
	}
	g.inst.Subscribe(g.changed)
	if opts.Upstreams != nil {
		opts.Upstreams.Subscribe(g.upstreamsChanged)
	}
	return g
}

// ErrBound is returned by Bind for a gate bound to a server already.
var ErrBound = errors.New("the gate is bound to a server already")

// Bind plugs the gate into an mcp-go server, the host's: the host's own
// tools stay as they are (unless bound to states with Bound or Tool), and
// the gate adds its workflows' tools, lists each of them only while the
// caller's instance allows it, gates the calls of bound tools (a tool
// handler middleware), follows the sessions (hooks), and tells each
// session when its tool list changed. Bind before serving; a gate binds
// to one server.
func (g *Gate) Bind(srv *server.MCPServer) error {
	g.bindMu.Lock()
	defer g.bindMu.Unlock()
	if g.srv.Load() != nil {
		return ErrBound
	}
	g.plug(srv) // mcpgo.go
	g.setMu.Lock()
	g.srv.Store(srv)
	g.registerTools(g.served.Load().tools, nil)
	g.registerResources(&served{}, g.served.Load())
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

// Instances returns the instances of the workflows the gate serves: send
// them events from Go, read their state, run their timers.
func (g *Gate) Instances() *workflow.Instances { return g.inst }

// RunTimers fires the instances' timers as they fall due, until ctx ends
// (Instances.RunTimers).
func (g *Gate) RunTimers(ctx context.Context) error { return g.inst.RunTimers(ctx) }

// Activity counts the tool calls, tool lists and resource reads the gate
// has answered: a value that does not change tells the gate has been
// idle since it was read.
func (g *Gate) Activity() uint64 { return g.activity.Load() }

// Workflows returns the served workflows, sorted by id.
func (g *Gate) Workflows() []*workflow.Workflow {
	return slices.Clone(g.workflowList())
}

// workflowList returns the served workflows sorted by id; the slice is
// shared and must not be changed.
func (g *Gate) workflowList() []*workflow.Workflow { return g.served.Load().sorted }

// SetWorkflows replaces the served workflows. Tools of workflows no longer
// served are removed; sessions whose tool list changes are told. Two
// workflows of one id, or making tools of one name, are an error
// (workflow.ErrToolClash), and nothing changes.
func (g *Gate) SetWorkflows(ws []*workflow.Workflow) error {
	g.setMu.Lock()
	before := g.served.Load()
	t, err := g.serve(ws)
	if err == nil {
		g.registerResources(before, g.served.Load())
	}
	g.setMu.Unlock()
	if err != nil {
		return err
	}
	g.refreshAfter(context.Background(), t)
	return nil
}

// Reloaded serves what a library of machine files loaded
// (workflow.LibraryOptions.Serve): its workflows, and the errors of the
// files that fail to load now, which the status tool of their workflows
// shows (their last good version is served).
func (g *Gate) Reloaded(r workflow.Reload) error {
	g.failedMu.Lock()
	g.failed, g.failedDir = r.Failed, r.Dir
	g.failedMu.Unlock()
	return g.SetWorkflows(r.Workflows)
}

// fileError returns the error of a workflow's file, rendered for clients,
// "" when it loads.
func (g *Gate) fileError(w *workflow.Workflow) string {
	g.failedMu.Lock()
	defer g.failedMu.Unlock()
	if err := g.failed[w.File]; err != nil && w.File != "" {
		return workflow.PublicError(g.failedDir, err)
	}
	return ""
}

// changed is told of every change of a stored instance
// (Instances.Subscribe; another replica's too): the sessions that see it
// are told when their list changed; after a Resync, every session whose
// list changed.
func (g *Gate) changed(ctx context.Context, c workflow.Change) {
	g.resourceChanged(ctx, c)
	if c.Resync {
		g.refreshAfter(ctx, told{})
		return
	}
	if !c.Moved {
		return
	}
	if w := g.served.Load().machines[c.Workflow]; w != nil {
		g.refresh(ctx, w, c.Handle)
	}
}

func joinTools(names []string) string {
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}
