// Package mcptest is the MCP client of the module's tests: mcp-go's client
// over Streamable HTTP, stdio (a command, or a pair of pipes) or in
// process, initialized for a protocol revision, with the tool lists and
// calls a test makes and the list_changed notifications it waits for.
//
// It knows nothing of stategate: it is a client of any MCP server.
package mcptest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Wait bounds how long a test waits for something it expects (a
// notification, a state): far longer than it takes on a loaded machine;
// it matters only when the thing never comes.
const Wait = 30 * time.Second

// Quiet is the time a test gives something it expects not to happen
// (an absence cannot be awaited): a failure is then a false pass at
// worst, never a false failure.
const Quiet = 300 * time.Millisecond

// Client is an MCP client session of a test.
type Client struct {
	*client.Client
	t       testing.TB
	changed chan struct{}
	note    chan struct{} // a notification came (cap 1)
	*notes
}

// notes are the notifications a session got, shared by its clients (For).
type notes struct {
	mu   sync.Mutex
	list []mcp.JSONRPCNotification
}

// Options configure a client.
type Options struct {
	// Version is the protocol revision asked for in initialize;
	// mcp.ProtocolVersion20251125 when empty. mcp.ProtocolVersion20260728
	// makes a client of that revision (mcp-go probes with server/discover).
	Version string
	// Listen opens the session's GET stream (Streamable HTTP, session
	// revisions): notifications reach it as they are sent.
	Listen bool
	// Name is the client's name in initialize; "test" when empty.
	Name string
	// Capabilities are the client's, in initialize.
	Capabilities mcp.ClientCapabilities
	// Header holds HTTP headers for every request (Streamable HTTP).
	Header map[string]string
	// NoInit leaves the session uninitialized (Init does it).
	NoInit bool
	// Client options (an elicitation handler, ...) for the client made.
	ClientOptions []client.ClientOption
}

// HTTP connects a session to a Streamable HTTP endpoint.
func HTTP(t testing.TB, url string, o Options) *Client {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := []transport.StreamableHTTPCOption{transport.WithHTTPLogger(quiet)}
	if o.Listen {
		// The GET stream of the revisions with sessions, which the gate
		// serves to them (2026-07-28 clients use Client.Listen).
		//lint:ignore SA1019 the session revisions' stream is what is tested
		opts = append(opts, transport.WithContinuousListening())
	}
	if len(o.Header) > 0 {
		opts = append(opts, transport.WithHTTPHeaders(o.Header))
	}
	tr, err := transport.NewStreamableHTTP(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return Start(t, client.NewClient(tr, o.ClientOptions...), o)
}

// Stdio starts a command as an MCP client starts a server, and connects a
// session to it over its standard input and output.
func Stdio(t testing.TB, command string, env []string, args []string, o Options) *Client {
	t.Helper()
	tr := transport.NewStdio(command, env, args...)
	return Start(t, client.NewClient(tr, o.ClientOptions...), o)
}

// Pipes connects a session over a pair of pipes: out is what the server
// writes, in what it reads.
func Pipes(t testing.TB, out io.Reader, in io.WriteCloser, o Options) *Client {
	t.Helper()
	return Start(t, client.NewClient(transport.NewIO(out, in, io.NopCloser(strings.NewReader(""))), o.ClientOptions...), o)
}

// InProcess connects a session to a server in the same process.
func InProcess(t testing.TB, srv *server.MCPServer, o Options) *Client {
	t.Helper()
	c, err := client.NewInProcessClient(srv)
	if err != nil {
		t.Fatal(err)
	}
	return Start(t, c, o)
}

// Start starts a client made elsewhere, watches its notifications, and
// initializes its session (unless o.NoInit); it is closed when the test
// ends.
func Start(t testing.TB, c *client.Client, o Options) *Client {
	t.Helper()
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	mc := &Client{Client: c, t: t, changed: make(chan struct{}, 100), note: make(chan struct{}, 1), notes: &notes{}}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		mc.mu.Lock()
		mc.list = append(mc.list, n)
		mc.mu.Unlock()
		select {
		case mc.note <- struct{}{}:
		default:
		}
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			// A full buffer must not block the client's reader (its
			// answers would wait behind it): the signal is there already.
			select {
			case mc.changed <- struct{}{}:
			default:
			}
		}
	})
	t.Cleanup(func() { c.Close() })
	if !o.NoInit {
		mc.Init(o)
	}
	return mc
}

// Init initializes the session as o says.
func (c *Client) Init(o Options) *mcp.InitializeResult {
	c.t.Helper()
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = o.Version
	if req.Params.ProtocolVersion == "" {
		req.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	}
	if o.Version == mcp.ProtocolVersion20260728 {
		req.Params.ProtocolVersion = "" // mcp-go's default: it probes
	}
	req.Params.ClientInfo = mcp.Implementation{Name: o.Name, Version: "1"}
	if req.Params.ClientInfo.Name == "" {
		req.Params.ClientInfo.Name = "test"
	}
	req.Params.Capabilities = o.Capabilities
	res, err := c.Initialize(context.Background(), req)
	if err != nil {
		c.t.Fatal(err)
	}
	if o.Version == mcp.ProtocolVersion20260728 && c.ProtocolVersion() != mcp.ProtocolVersion20260728 {
		c.t.Fatalf("negotiated %q, want %s", c.ProtocolVersion(), mcp.ProtocolVersion20260728)
	}
	return res
}

// Tools lists the tools, by name.
func (c *Client) Tools() map[string]mcp.Tool {
	c.t.Helper()
	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]mcp.Tool{}
	for _, tl := range res.Tools {
		out[tl.Name] = tl
	}
	return out
}

// Result calls a tool and returns its whole result; a protocol error
// fails the test.
func (c *Client) Result(name string, args map[string]any) *mcp.CallToolResult {
	c.t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		c.t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// Call calls a tool and returns its result's first text, its structured
// content and whether it is an error.
func (c *Client) Call(name string, args map[string]any) (text string, sc map[string]any, isError bool) {
	c.t.Helper()
	res := c.Result(name, args)
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(mcp.TextContent); ok {
			text = tc.Text
		}
	}
	return text, Structured(res), res.IsError
}

// Structured returns a result's structured content as plain JSON values.
func Structured(res *mcp.CallToolResult) map[string]any {
	var sc map[string]any
	data := res.RawStructuredContent
	if data == nil {
		data, _ = json.Marshal(res.StructuredContent)
	}
	_ = json.Unmarshal(data, &sc)
	return sc
}

// Text joins a result's text contents.
func Text(res *mcp.CallToolResult) string {
	var out []string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return strings.Join(out, "\n")
}

// Changed is signalled once per list_changed notification (at most 100
// waiting).
func (c *Client) Changed() <-chan struct{} { return c.changed }

// AwaitChanged waits for a list_changed notification.
func (c *Client) AwaitChanged() {
	c.t.Helper()
	select {
	case <-c.changed:
	case <-time.After(Wait):
		c.t.Fatal("no notifications/tools/list_changed")
	}
}

// NoChange checks that no list_changed arrives within Quiet.
func (c *Client) NoChange() {
	c.t.Helper()
	select {
	case <-c.changed:
		c.t.Fatal("unexpected notifications/tools/list_changed")
	case <-time.After(Quiet):
	}
}

// Drain forgets the list_changed notifications that came.
func (c *Client) Drain() {
	for {
		select {
		case <-c.changed:
		default:
			return
		}
	}
}

// AwaitState waits, notification by notification, until a status tool
// reports a state (notifications of earlier calls may still arrive).
func (c *Client) AwaitState(statusTool, want string) map[string]any {
	c.t.Helper()
	deadline := time.After(Wait)
	for {
		_, sc, _ := c.Call(statusTool, nil)
		if sc["state"] == want {
			return sc
		}
		select {
		case <-c.changed:
		case <-deadline:
			c.t.Fatalf("%s never reported state %s; last %v", statusTool, want, sc)
		}
	}
}

// AwaitTools waits, notification by notification, until the tool list
// satisfies ok.
func (c *Client) AwaitTools(what string, ok func(map[string]mcp.Tool) bool) {
	c.t.Helper()
	deadline := time.After(Wait)
	for {
		tools := c.Tools()
		if ok(tools) {
			return
		}
		select {
		case <-c.changed:
		case <-deadline:
			c.t.Fatalf("the tool list never showed %s: %v", what, Names(tools))
		}
	}
}

// Notifications returns the notifications that came so far, of a method
// ("" for all).
func (c *Client) Notifications(method string) []mcp.JSONRPCNotification {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []mcp.JSONRPCNotification
	for _, n := range c.list {
		if method == "" || n.Method == method {
			out = append(out, n)
		}
	}
	return out
}

// AwaitNotification waits until a notification of a method has come
// that ok accepts (nil: any), and returns it.
func (c *Client) AwaitNotification(method string, ok func(mcp.JSONRPCNotification) bool) mcp.JSONRPCNotification {
	c.t.Helper()
	deadline := time.After(Wait)
	for {
		for _, n := range c.Notifications(method) {
			if ok == nil || ok(n) {
				return n
			}
		}
		select {
		case <-c.note:
		case <-deadline:
			c.t.Fatalf("no %s notification came", method)
		}
	}
}

// Names lists a tool map's names, sorted.
func Names(m map[string]mcp.Tool) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// T returns the test the client belongs to.
func (c *Client) T() testing.TB { return c.t }

// For returns the session as a client of another test (a subtest): its
// failures fail that test.
func (c *Client) For(t testing.TB) *Client {
	return &Client{Client: c.Client, t: t, changed: c.changed, note: c.note, notes: c.notes}
}

// Settle waits until no list_changed has come for Quiet, and forgets
// those that came: what was under way has arrived.
func (c *Client) Settle() {
	for {
		select {
		case <-c.changed:
		case <-time.After(Quiet):
			return
		}
	}
}

// CallErr calls a tool whose call must fail with a JSON-RPC error (not a
// tool result), and returns that error.
func (c *Client) CallErr(name string, args map[string]any) error {
	c.t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err == nil {
		c.t.Fatalf("call %s: a result, not an error: %v", name, Text(res))
	}
	return err
}
