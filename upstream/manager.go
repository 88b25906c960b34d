package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// ErrUnavailable is the error of a call to a server that cannot take it:
// not configured, not up (starting, restarting, exited, unreachable) or
// stopped while the call ran. It comes wrapped with the server's name and
// why.
var ErrUnavailable = errors.New("upstream unavailable")

// ErrTimeout is the error of a call the server did not answer within its
// Timeout; errors.Is finds context.DeadlineExceeded in it too.
var ErrTimeout = errors.New("upstream call timed out")

// RPCError is a JSON-RPC error the server answered a call with. It wraps
// the error mcp-go makes of it (mcp.ErrMethodNotFound, ...).
type RPCError struct {
	Server  string
	Code    int
	Message string
	Data    any
	err     error
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("upstream %q answered error %d: %s", e.Server, e.Code, e.Message)
}

func (e *RPCError) Unwrap() error { return e.err }

// MaxMessage bounds one message from a server, as the gate bounds its
// clients' (4 MiB): a line from a child, an HTTP response's body, an event
// of its event stream. A server that sends a longer one is read no
// further: its calls in flight fail with ErrTooLarge (and ErrUnavailable),
// and it is restarted (or reconnected) with the backoff.
const MaxMessage = 4 << 20

// ErrTooLarge is the error of the calls in flight to a server that sent a
// message longer than MaxMessage; it comes with ErrUnavailable.
var ErrTooLarge = errors.New("upstream message too large")

type tooLargeError struct {
	server string
	limit  int
	lines  bool // an event of too many lines, rather than too many bytes
}

func (e *tooLargeError) Error() string {
	if e.lines {
		return fmt.Sprintf("%v: %q sent an event of more data lines than stategate reads (joining them would cost more than copying %d MiB); it is read no further",
			ErrTooLarge, e.server, linesCost*e.limit>>20)
	}
	return fmt.Sprintf("%v: %q sent a message of more than %d bytes (%d MiB), stategate's limit; it is read no further",
		ErrTooLarge, e.server, e.limit, e.limit>>20)
}

func (e *tooLargeError) Is(target error) bool { return target == ErrTooLarge }

type timeoutError struct {
	server  string
	timeout time.Duration
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("%v: %q gave no answer within its timeout of %v", ErrTimeout, e.server, e.timeout)
}

func (e *timeoutError) Is(target error) bool {
	return target == ErrTimeout || target == context.DeadlineExceeded
}

func unavailable(server, why string) error {
	return fmt.Errorf("%w: %q: %s", ErrUnavailable, server, why)
}

var (
	errStopped  = errors.New("stopped")
	errDeadline = errors.New("deadline") // the cause of a call's own deadline
)

const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 30 * time.Second
	resetAfter = 10 * time.Second // up this long, the next restart is quick again
	grace      = 2 * time.Second  // a child's time to exit after its stdin closes, then after SIGTERM

	// A server's list_changed are settled before its tools are listed
	// again: one re-list after relistQuiet without another, at most
	// relistMax after the first, however many came.
	relistQuiet = 100 * time.Millisecond
	relistMax   = time.Second
)

// Options configure a Manager.
type Options struct {
	Log *slog.Logger // nil: slog.Default()
}

// Manager runs the servers of an upstreams file and forwards calls to
// them. Its methods are safe for concurrent use.
type Manager struct {
	log    *slog.Logger
	grace  time.Duration
	quiet  time.Duration // relistQuiet
	most   time.Duration // relistMax
	limit  int           // MaxMessage
	hooks  *testHooks    // nil but in tests
	tokens atomic.Uint64 // the progress tokens given to servers so far

	changed      chan struct{} // a change not yet told; capacity 1
	quit         chan struct{}
	notifierDone chan struct{}

	mu      sync.Mutex
	servers map[string]*server
	closed  bool

	// subMu guards subs, the functions Subscribe gave.
	subMu sync.Mutex
	subs  map[int]func()
	nsub  int
}

// Subscribe calls f after the tools of a server changed: it came up,
// came back, said its list changed (once the burst settled, and only if
// the list differs), went down, or was stopped or removed. f is called
// never under a lock of the Manager's, one call at a time. The returned
// function ends the subscription.
func (m *Manager) Subscribe(f func()) (cancel func()) {
	m.subMu.Lock()
	defer m.subMu.Unlock()
	if m.subs == nil {
		m.subs = map[int]func(){}
	}
	id := m.nsub
	m.nsub++
	m.subs[id] = f
	return func() {
		m.subMu.Lock()
		delete(m.subs, id)
		m.subMu.Unlock()
	}
}

// tell calls the subscribers.
func (m *Manager) tell() {
	m.subMu.Lock()
	fns := make([]func(), 0, len(m.subs))
	for _, f := range m.subs {
		fns = append(fns, f)
	}
	m.subMu.Unlock()
	for _, f := range fns {
		f()
	}
}

// New returns a Manager with no servers; Apply gives it some.
func New(o Options) *Manager {
	m := &Manager{
		log:          o.Log,
		grace:        grace,
		quiet:        relistQuiet,
		most:         relistMax,
		limit:        MaxMessage,
		changed:      make(chan struct{}, 1),
		quit:         make(chan struct{}),
		notifierDone: make(chan struct{}),
		servers:      map[string]*server{},
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	go m.notifier()
	return m
}

func (m *Manager) notifier() {
	defer close(m.notifierDone)
	for {
		select {
		case <-m.changed:
			m.tell()
		case <-m.quit:
			select {
			case <-m.changed:
				m.tell()
			default:
			}
			return
		}
	}
}

func (m *Manager) changedNow() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// Apply makes the running servers those of c: it starts the new entries,
// stops the removed ones and restarts the changed ones; the others are
// left alone. It does not wait for servers to come up (see Ready). ctx
// gives its values, not its end, to the servers.
func (m *Manager) Apply(ctx context.Context, c *Config) {
	base := context.WithoutCancel(ctx)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	changed := false
	for _, name := range slices.Sorted(maps.Keys(m.servers)) {
		s := m.servers[name]
		n, ok := c.Servers[name]
		if ok && n.Equal(s.cfg) {
			continue
		}
		s.stop()
		delete(m.servers, name)
		changed = true
		if ok {
			m.log.Info("restarting upstream: its entry changed", "upstream", name)
			m.servers[name] = m.newServer(base, n, s.done)
		} else {
			m.log.Info("stopping upstream: its entry was removed", "upstream", name)
		}
	}
	for _, name := range c.sortedNames() {
		if _, ok := m.servers[name]; !ok {
			m.servers[name] = m.newServer(base, c.Servers[name], nil)
			changed = true
		}
	}
	m.mu.Unlock()
	if changed {
		m.changedNow()
	}
}

// ApplyFile loads an upstreams file (Load) and applies it (Apply). A file
// that does not load is logged, the servers stay as they are, and its
// error is returned.
func (m *Manager) ApplyFile(ctx context.Context, file string) error {
	c, err := Load(file)
	if err != nil {
		m.log.Error("upstreams file not applied; the servers stay as they were", "file", file, "err", err)
		return err
	}
	m.log.Info("upstreams file applied", "file", file, "servers", len(c.Servers))
	m.Apply(ctx, c)
	return nil
}

// Ready waits until every server configured now has been tried once (it
// came up or failed to), or ctx ends.
func (m *Manager) Ready(ctx context.Context) error {
	m.mu.Lock()
	var tried []chan struct{}
	for _, s := range m.servers {
		tried = append(tried, s.tried)
	}
	m.mu.Unlock()
	for _, t := range tried {
		select {
		case <-t:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Close stops every server and waits for them: a child process has its
// stdin closed, then after a grace period SIGTERM, then SIGKILL (its
// process group, on Unix); an HTTP session is ended. Calls in flight fail
// with ErrUnavailable. The Manager takes no more servers.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	servers := m.servers
	m.servers = map[string]*server{}
	m.mu.Unlock()
	for _, s := range servers {
		s.stop()
	}
	for _, s := range servers {
		<-s.done
	}
	m.changedNow()
	close(m.quit)
	<-m.notifierDone
	return nil
}

// Tool is a tool and the server that offers it.
type Tool struct {
	Server string
	Tool   mcp.Tool
}

// ServerStatus is what Servers tells of one server.
type ServerStatus struct {
	Name   string
	Up     bool
	Err    string // why it is down ("" while up)
	Expose string
	Tools  []mcp.Tool // the last list it gave, kept while it is down
}

// Servers returns the configured servers, sorted by name.
func (m *Manager) Servers() []ServerStatus {
	m.mu.Lock()
	servers := make([]*server, 0, len(m.servers))
	for _, s := range m.servers {
		servers = append(servers, s)
	}
	m.mu.Unlock()
	out := make([]ServerStatus, 0, len(servers))
	for _, s := range servers {
		s.mu.Lock()
		st := ServerStatus{Name: s.cfg.Name, Up: s.conn != nil, Expose: s.cfg.Expose, Tools: slices.Clone(s.tools)}
		if s.conn == nil {
			st.Err = s.why
		}
		s.mu.Unlock()
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b ServerStatus) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// Tools returns the last list of tools the server gave (kept while it is
// down); false if no such server is configured.
func (m *Manager) Tools(server string) ([]mcp.Tool, bool) {
	s := m.server(server)
	if s == nil {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.tools), true
}

func (m *Manager) server(name string) *server {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.servers[name]
}

type notifyKey struct{}

// WithNotify returns a context whose calls with a progress token relay the
// server's notifications/progress for that call to f, under the caller's
// token. f runs on the connection's reader: it must not block. It is not
// called once Call has returned.
//
// A server's notifications/message go to stategate's log only: with
// several calls in flight on one server, from several clients, a log line
// cannot be told to be one call's (a server may even send it after the
// result), and another client's must not see it.
func WithNotify(ctx context.Context, f func(method string, params map[string]any)) context.Context {
	return context.WithValue(ctx, notifyKey{}, f)
}

// Call calls a tool of a server, under the server's Timeout. The server
// is sent the tool's name and arguments, and of the request's _meta only
// the keys the server's entry forwards (ForwardMeta) and, when the request
// has a progress token and ctx a WithNotify function, a progress token of
// the Manager's own, unique to the call (its progress goes back under the
// caller's token); nothing else of the request (its HTTP headers, a task)
// goes. A result with isError is a result; a JSON-RPC error is an
// *RPCError; a server that cannot take the call gives ErrUnavailable, one
// that does not answer in time ErrTimeout, one that sends a message over
// MaxMessage ErrTooLarge. When ctx ends first the server is sent
// notifications/cancelled for the call, and Call returns ctx's error.
func (m *Manager) Call(ctx context.Context, server string, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	s := m.server(server)
	if s == nil {
		return nil, unavailable(server, "not configured")
	}
	s.mu.Lock()
	cn, why, cfg := s.conn, s.why, s.cfg
	if cn == nil {
		s.mu.Unlock()
		return nil, unavailable(server, why)
	}
	out := mcp.CallToolRequest{}
	out.Params.Name = req.Params.Name
	out.Params.Arguments = req.Params.Arguments
	out.Params.RawArguments = req.Params.RawArguments
	out.Params.Meta = forwardedMeta(req.Params.Meta, cfg.ForwardMeta)
	var cl *call
	if sink := notifyFrom(ctx); sink != nil && req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
		cl = &call{token: fmt.Sprintf("stategate-%d", m.tokens.Add(1)), callerToken: req.Params.Meta.ProgressToken, sink: sink}
		if out.Params.Meta == nil {
			out.Params.Meta = &mcp.Meta{}
		}
		out.Params.Meta.ProgressToken = cl.token
		s.calls[cl.token] = cl
	}
	s.mu.Unlock()
	if cl != nil {
		defer func() {
			s.mu.Lock()
			delete(s.calls, cl.token)
			s.mu.Unlock()
			cl.end()
		}()
	}

	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(cn.ctx, func() { cancel(errStopped) })()
	tctx, tcancel := context.WithTimeoutCause(cctx, cfg.Timeout, errDeadline)
	defer tcancel()
	note := &callNote{}
	res, err := cn.c.CallTool(context.WithValue(tctx, callNoteKey{}, note), out)
	if err == nil {
		return res, nil
	}
	var te *transport.Error
	// The call's own end comes first: a call that was cancelled, whose
	// server was stopped, or that ran out of time gets the upstream's
	// answer to the cancellation ("context canceled") as an error too.
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("upstream %q: call to %s: %w", server, req.Params.Name, ctx.Err())
	case cn.ctx.Err() != nil:
		return nil, fmt.Errorf("%w: %q: %w", ErrUnavailable, server, context.Cause(cn.ctx))
	case errors.Is(context.Cause(tctx), errDeadline):
		return nil, &timeoutError{server: server, timeout: cfg.Timeout}
	case note.rpcErr != nil:
		return nil, &RPCError{Server: server, Code: note.rpcErr.Code, Message: note.rpcErr.Message, Data: note.rpcErr.Data, err: err}
	case errors.As(err, &te):
		cn.failed(fmt.Errorf("connection failed: %w", te.Err))
		return nil, fmt.Errorf("%w: %q: %w", ErrUnavailable, server, te.Err)
	}
	return nil, fmt.Errorf("upstream %q: call to %s: %w", server, req.Params.Name, err)
}

// forwardedMeta is the _meta a call sends: the keys of the caller's that
// the server's entry forwards; nil when there are none.
func forwardedMeta(meta *mcp.Meta, keys []string) *mcp.Meta {
	if meta == nil {
		return nil
	}
	var out map[string]any
	for _, k := range keys {
		if v, ok := meta.AdditionalFields[k]; ok {
			if out == nil {
				out = map[string]any{}
			}
			out[k] = v
		}
	}
	if out == nil {
		return nil
	}
	return &mcp.Meta{AdditionalFields: out}
}

func notifyFrom(ctx context.Context) func(string, map[string]any) {
	f, _ := ctx.Value(notifyKey{}).(func(string, map[string]any))
	return f
}

// testHooks let the tests see a server's list_changed heard and its tools
// re-listed, and end a settling burst at once (with a quiet time too long
// to end one).
type testHooks struct {
	heard    func()             // after each list_changed
	settle   <-chan struct{}    // ends a burst
	relisted func(changed bool) // after each re-list that got a list
}
