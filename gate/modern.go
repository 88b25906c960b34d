package gate

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/stategate/stategate/workflow"
)

// Protocol revision 2026-07-28 has no sessions (SEP-2567) and no
// initialize (SEP-2575); its tool list "MUST NOT vary per-connection or
// as a side effect of other requests". Its clients get a list that is the
// same for everyone: every tool of every workflow, each taking the
// instance's handle (ModernHandleKey), described with the states it is
// available in, and a start tool per workflow that makes an instance with
// a new handle. A call goes through the same gate (FORBIDDEN, REJECTED,
// the transition stored before the answer), and its result says where
// the workflow is now and which tools it allows: the agent's menu lives
// in results, not in the list. Clients of earlier revisions keep
// per-session lists and list_changed.

// ListTTL is how long clients of revision 2026-07-28 may cache the tool
// list (ttlMs): a reload is seen within it, or at once by those that
// listen (subscriptions/listen, toolsListChanged).
const ListTTL = 5 * time.Second

// modern reports whether a request speaks revision 2026-07-28 (or later).
func modern(ctx context.Context) bool { return server.IsModernRequest(ctx) }

// handlePrefix starts the handles the start tool makes for workflows
// with no handle key: the only ones a client of revision 2026-07-28 may
// name for them (the instances of sessions, and the shared one, are not
// theirs to reach).
const handlePrefix = "wf-"

// newHandle makes a handle no one can guess: 128 random bits.
func newHandle() string { return handlePrefix + strings.ToLower(rand.Text()) }

// modernTool is a tool as clients of revision 2026-07-28 see it: with
// the handle argument required, and a description that says when it is
// available.
func (g *Gate) modernTool(ref *toolRef) mcp.Tool {
	var t mcp.Tool
	var when string
	switch ref.kind {
	case passTool:
		return ref.full
	case stateTool:
		t = ref.full
		var states []string
		for _, n := range ref.state.States {
			states = append(states, n.PathString())
		}
		when = availableIn(ref.m.ID, states)
	case startTool:
		t = ref.full
		return t
	case statusTool:
		t, when = ref.full, "Available always."
	case resetTool:
		t, when = ref.full, fmt.Sprintf("Available when the %s workflow is done or failed.", ref.m.ID)
	case boundTool:
		t = ref.full
		b := ref.binding
		states := b.states
		if len(states) == 0 {
			if et := ref.m.ToolOf(b.event); et != nil {
				states = et.Accepting
			}
		}
		when = availableIn(ref.m.ID, states)
	case eventTool:
		t, when = ref.full, availableIn(ref.m.ID, ref.tool.Accepting)
	}
	t.Description = strings.TrimSpace(t.Description + " " + when)
	return withHandleArg(t, ref.m.ModernHandleKey())
}

// availableIn says in which states a tool is available.
func availableIn(workflow string, states []string) string {
	if len(states) == 0 {
		return ""
	}
	return fmt.Sprintf("Available when the %s workflow is in %s.", workflow, orList(states))
}

func orList(xs []string) string {
	switch len(xs) {
	case 1:
		return xs[0]
	case 2:
		return xs[0] + " or " + xs[1]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
}

// modernHandle returns the handle a call of revision 2026-07-28 names:
// the handle key's argument; for a workflow with no handle key, one the
// start tool made.
func modernHandle(m *workflow.Workflow, args map[string]any) (string, *mcp.CallToolResult) {
	key := m.ModernHandleKey()
	h, _ := args[key].(string)
	if err := workflow.CheckHandle(h); err != nil {
		return "", errorResult("INVALID_ARGUMENTS", fmt.Sprintf("INVALID_ARGUMENTS: argument %q (the %s instance) %v; %s makes one", key, m.ID, err, m.StartTool),
			map[string]any{"argument": key})
	}
	if m.HandleKey == "" && (!strings.HasPrefix(h, handlePrefix) || len(h) != len(handlePrefix)+26) {
		return "", errorResult("INVALID_ARGUMENTS", fmt.Sprintf("INVALID_ARGUMENTS: argument %q is not a handle of the %s workflow: call %s for one", key, m.ID, m.StartTool),
			map[string]any{"argument": key})
	}
	return h, nil
}

// withoutModernHandle removes the handle argument of a workflow with no
// handle key from a call of revision 2026-07-28: the machine and the
// tool's handler never see it.
func (c *call) withoutModernHandle() {
	m := c.w
	key := m.ModernHandleKey()
	if !c.modern || m.HandleKey != "" {
		return
	}
	if _, ok := c.args[key]; !ok {
		return
	}
	c.args = maps.Clone(c.args)
	delete(c.args, key)
	// mcp-go sends RawArguments (the arguments as they came) in place of
	// Arguments when set: a handler that forwards the request must not
	// pass the handle on.
	c.req.Params.Arguments, c.req.Params.RawArguments = c.args, nil
}

// start makes an instance with a new handle, stored in its initial
// state, and reports it.
func (g *Gate) start(c *call) *mcp.CallToolResult {
	m := c.w
	if !c.modern {
		return errorResult("FORBIDDEN", fmt.Sprintf("FORBIDDEN: %s is for clients of protocol revision 2026-07-28, which have no sessions; this session has an instance of its own (see %s)", m.StartTool, m.StatusTool), nil)
	}
	if err := g.inst.CanCreate(c.ctx, m); err != nil {
		// Refused before the machine's entry actions run (the save
		// checks again).
		return saveFailed(m.StartTool, nil, err)
	}
	c.handle = newHandle()
	if m.HandleKey != "" {
		c.handle = strings.TrimPrefix(c.handle, handlePrefix)
	}
	h, bad := g.hold(c)
	if bad != nil {
		return bad
	}
	defer h.Release()
	in, err := h.Load(c.ctx)
	if err != nil {
		return errorResult("ERROR", "ERROR: "+err.Error(), nil)
	}
	saved, err := h.Save(c.ctx, c.entry(m.StartTool))
	if err != nil {
		return saveFailed(m.StartTool, in.Snapshot, err)
	}
	res := report(m, c.handle, g.view(saved), nil, "is")
	res.Content = append(res.Content, mcp.NewTextContent(fmt.Sprintf("Pass %s: %q to the %s tools to act on this instance. Anyone holding the handle can drive it.", m.ModernHandleKey(), c.handle, m.ID)))
	return res
}

// protocolOf is the protocol revision a request came in with, for the
// audit trail.
func protocolOf(ctx context.Context) string { return server.RequestProtocolVersion(ctx) }

// staticList is the tool list of revision 2026-07-28: the host's own
// tools, and every tool of the gate's in its modern form.
func (g *Gate) staticList(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	if s := g.sessionOf(ctx); s != nil {
		s.modern.Store(true)
	}
	sv := g.served.Load()
	out := make([]mcp.Tool, 0, len(tools))
	for _, t := range tools {
		ref, ours := sv.tools[t.Name]
		switch {
		case t.Name == unknownTool:
		case !ours:
			out = append(out, t)
		default:
			out = append(out, ref.modern)
		}
	}
	return out
}
