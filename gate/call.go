package gate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stategate/stategate/internal/jsonenc"
	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
)

// call is one tools/call of a gate's tool, as it goes down: what it
// names, found once; who makes it, looked up once; and the instance it
// acts on.
type call struct {
	ctx    context.Context
	req    mcp.CallToolRequest
	ref    *toolRef
	w      *workflow.Workflow
	sess   *session // nil: none (a 2026-07-28 request over HTTP)
	modern bool     // of revision 2026-07-28
	args   map[string]any
	handle string
	// principal is who calls.
	principal Principal
}

// newCall reads a call of one of the gate's tools: its arguments (an
// object, within MaxArguments) and the instance it acts on (its handle
// argument, the session's own instance, or the shared one). bad answers a
// call that cannot be made so.
func (g *Gate) newCall(ctx context.Context, ref *toolRef, req mcp.CallToolRequest) (c *call, bad *mcp.CallToolResult) {
	g.activity.Add(1)
	c = &call{ctx: ctx, req: req, ref: ref, w: ref.m, sess: g.sessionOf(ctx), modern: modern(ctx), principal: g.principalOf(ctx)}
	if c.sess != nil {
		c.sess.notified.Store(false) // this request's answer delivers what waited
		c.sess.setPrincipal(c.principal)
		if c.modern {
			c.sess.modern.Store(true)
		}
	}
	if c.args, bad = toolArgs(req); bad != nil {
		return nil, bad
	}
	if ref.kind == startTool {
		return c, nil
	}
	if c.handle, bad = g.handleOf(c); bad != nil {
		return nil, bad
	}
	c.withoutModernHandle()
	return c, nil
}

// entry is the audit entry of a call's step.
func (c *call) entry(tool string) store.AuditEntry {
	p := c.principal
	e := store.AuditEntry{Tool: tool, Protocol: protocolOf(c.ctx), Principal: &p}
	if c.sess != nil {
		e.Session = c.sess.name
	}
	return e
}

// handleCall is the handler of the gate's own tools (event, status,
// reset, start and state tools): it finds what the tool stands for and
// gates the call on the instance's state.
func (g *Gate) handleCall(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ref, ok := g.lookup(req.Params.Name)
	if !ok {
		// Removed by a reload since mcp-go found it.
		return errorResult("UNKNOWN", fmt.Sprintf("UNKNOWN: no tool named %s is served", req.Params.Name), nil), nil
	}
	c, bad := g.newCall(ctx, ref, req)
	if bad != nil {
		return bad, nil
	}
	var res *mcp.CallToolResult
	switch ref.kind {
	case startTool:
		res = g.start(c)
	case stateTool:
		return g.callState(c)
	case statusTool:
		res = g.status(c)
	case resetTool:
		res = g.reset(c)
	default:
		res = g.callEvent(c)
	}
	if res.StructuredContent != nil {
		// Encoded here, faster than mcp-go would.
		if raw, err := jsonenc.Append(nil, res.StructuredContent); err == nil {
			res.RawStructuredContent, res.StructuredContent = raw, nil
		}
	}
	return res, nil
}

// handleOf returns the handle of the instance a call acts on: the handle
// argument for a workflow with a handle key (which the session then sees;
// it is told if its tool list changes), else the session's own instance
// or the shared one. bad answers an invalid handle.
func (g *Gate) handleOf(c *call) (handle string, bad *mcp.CallToolResult) {
	m := c.w
	if c.modern {
		return g.modernHandle(c.ctx, m, c.args)
	}
	if m.HandleKey == "" {
		return g.instanceOf(c.sess, m), nil
	}
	h, _ := c.args[m.HandleKey].(string)
	if err := workflow.CheckHandle(h); err != nil {
		return "", errorResult("INVALID_ARGUMENTS", fmt.Sprintf("INVALID_ARGUMENTS: argument %q (the %s instance) %v", m.HandleKey, m.ID, err),
			map[string]any{"argument": m.HandleKey})
	}
	if c.sess != nil && g.useHandle(c.sess, m, h) {
		g.refreshSession(context.WithoutCancel(c.ctx), c.sess)
		g.tellResourcesChanged(context.WithoutCancel(c.ctx), c.sess)
	}
	return h, nil
}

// hold holds a call's instance, or answers why it cannot be (the call's
// client went away while it waited).
func (g *Gate) hold(c *call) (*workflow.Hold, *mcp.CallToolResult) {
	h, err := g.inst.Hold(c.ctx, c.w, c.handle)
	if err != nil {
		return nil, failed(c.req.Params.Name, err)
	}
	return h, nil
}

// callEvent sends the tool's event to the instance: refused (FORBIDDEN)
// when the tool is not allowed now, REJECTED when the machine does not
// take the event, an error when its code fails; else the new snapshot is
// stored before the answer.
func (g *Gate) callEvent(c *call) *mcp.CallToolResult {
	t, m := c.ref.tool, c.w
	if bad := g.forbiddenRole(c, t.Name, t.Roles); bad != nil {
		return bad
	}
	var confirmed *store.Confirmation
	if t.Approval != "" || t.Confirm != "" && !canElicit(c.ctx) && g.opts.InspectLink != nil {
		// An operator approves it: the call waits for that.
		return g.pend(c, t)
	}
	if t.Confirm != "" {
		// Asked before the instance is held: the human's time holds no
		// event of it; what the call may do is checked again once held.
		v, err := g.current(c.ctx, m, c.handle)
		if err != nil {
			return failed(t.Name, err)
		}
		if !contains(g.visible(v.tools, c.principal), t.Name) {
			return refusal("FORBIDDEN", notAvailable(t.Name, m, v), m, c.handle, g.seen(v, c.principal))
		}
		var bad *mcp.CallToolResult
		if confirmed, bad = g.confirm(c, t.Name, t.Confirm, v.snap.Context); bad != nil {
			return bad
		}
	}
	h, bad := g.hold(c)
	if bad != nil {
		return bad
	}
	defer h.Release()
	ev := eventOf(t.Event, c.args, m.HandleKey, c.principal)
	check := func(in *workflow.Instance) error {
		if in.Pending != nil {
			return &refused{res: g.pendingResult(c, in, fmt.Sprintf("%s was not done: ", t.Name))}
		}
		if v := g.view(in); !contains(v.tools, t.Name) {
			return &refused{res: refusal("FORBIDDEN", notAvailable(t.Name, m, v), m, c.handle, g.seen(v, c.principal))}
		}
		if err := t.Validate(c.args); err != nil {
			return &refused{res: errorResult("INVALID_ARGUMENTS", "INVALID_ARGUMENTS: "+err.Error(), map[string]any{"tool": t.Name})}
		}
		return nil
	}
	e := c.entry(t.Name)
	e.Event, e.Confirmed = ev.Object(), confirmed
	saved, emitted, err := h.Apply(c.ctx, ev, e, check)
	if err != nil {
		return g.eventFailed(c, t.Name, t.Event, err)
	}
	return success(m, c.handle, g.seen(g.view(saved), c.principal), emitted)
}

// refused is a check's refusal of a call, with the answer to give.
type refused struct{ res *mcp.CallToolResult }

func (r *refused) Error() string { return "refused" }

// eventFailed answers a call whose event was refused, rejected or failed,
// or whose new state could not be stored.
func (g *Gate) eventFailed(c *call, tool, event string, err error) *mcp.CallToolResult {
	m, handle := c.w, c.handle
	var r *refused
	var ee *workflow.EventError
	var se *workflow.SaveError
	switch {
	case errors.As(err, &r):
		return r.res
	case errors.As(err, &ee) && errors.Is(err, workflow.ErrPending):
		return g.pendingResult(c, ee.Instance, fmt.Sprintf("%s was not done: ", tool))
	case errors.As(err, &ee) && errors.Is(err, workflow.ErrRejected):
		why := fmt.Sprintf("the %s workflow does not take %s with these arguments in state %s", m.ID, event, workflow.StateString(ee.Instance.Snapshot))
		if ee.Cause != nil {
			why += ": " + ee.Cause.Error()
		} else if said := guardsThatSaidNo(ee.Instance.Snapshot, event); said != "" {
			why += ": " + said
		}
		return refusal("REJECTED", why, m, handle, g.seen(g.view(ee.Instance), c.principal))
	case errors.As(err, &ee):
		snap := ee.Instance.Snapshot
		return errorResult("ERROR", fmt.Sprintf("ERROR: %s failed: %v (the instance keeps its state %s)", tool, ee.Cause, workflow.StateString(snap)),
			map[string]any{"error": "ERROR", "message": ee.Cause.Error(), "state": snap.Value()})
	case errors.As(err, &se):
		return saveFailed(tool, se.Instance.Snapshot, se.Err)
	}
	return failed(tool, err)
}

// guardsThatSaidNo says which guards refused an event the instance did
// not take, with their transitions' descriptions: what the agent may fix.
func guardsThatSaidNo(s *interp.Snapshot, event string) string {
	var parts []string
	for _, t := range s.Candidates(event) {
		if t.Guard == nil {
			continue
		}
		name := interp.GuardType(t.Guard)
		if name == "" || strings.HasPrefix(name, "xstate.") {
			name = "an inline guard"
		} else {
			name = "the guard " + name
		}
		part := name + " said no"
		if d := strings.TrimSpace(t.Description); d != "" {
			part += fmt.Sprintf(" (to %q)", strings.TrimSuffix(d, "."))
		}
		if !slices.Contains(parts, part) {
			parts = append(parts, part)
		}
	}
	return strings.Join(parts, "; ")
}

// status answers the status tool.
func (g *Gate) status(c *call) *mcp.CallToolResult {
	m, handle := c.w, c.handle
	in, err := g.inst.Current(c.ctx, m, handle) // as every replica left it
	if err != nil {
		return failed(m.StatusTool, err)
	}
	res := report(m, handle, g.seen(g.view(in), c.principal), nil, "is")
	sc := res.StructuredContent.(map[string]any)
	if trail, err := g.inst.Store().Audit(c.ctx, in.Key(), 5); err == nil && len(trail) > 0 {
		sc["recent"] = trail
	}
	if len(in.Timers) > 0 {
		sc["timers"] = in.Timers
	}
	if in.Migrated != nil {
		sc["migrated"] = in.Migrated
	}
	if p := in.Pending; p != nil {
		sc["pending"] = map[string]any{"tool": p.Tool, "by": p.Principal.Sub, "roles": p.Roles, "confirm": p.Confirm, "time": p.Time, "approval": p.ID}
		res.Content = append(res.Content, mcp.NewTextContent(fmt.Sprintf("Waiting: %s (called by %s) awaits an operator's approval; the workflow takes no other call until it is settled.", p.Tool, p.Principal.Sub)))
	}
	if doubt, err := g.inst.InDoubt(c.ctx, m.ID, handle); err == nil && len(doubt) > 0 {
		list := make([]map[string]any, len(doubt))
		for i, e := range doubt {
			list[i] = map[string]any{"tool": e.Tool, "arguments": e.Intent.Arguments, "event": e.Intent.Event, "time": e.Time, "version": e.Version}
		}
		sc["inDoubt"] = list
		res.Content = append(res.Content, mcp.NewTextContent(fmt.Sprintf(
			"In doubt: %d call(s) of a bound tool began and never ended (the server stopped during them, latest %s at %s): their side effects may have happened, and the workflow did not move. Check before calling again.",
			len(doubt), doubt[len(doubt)-1].Tool, doubt[len(doubt)-1].Time.Format(time.RFC3339))))
	}
	if g.opts.InspectLink != nil {
		link := g.opts.InspectLink(m.ID, handle)
		sc["inspect"] = link
		res.Content = append(res.Content, mcp.NewTextContent("See it in a browser (its diagram and audit trail): "+link))
	}
	if public := g.fileError(m); public != "" {
		sc["fileError"] = public
		res.Content = append(res.Content, mcp.NewTextContent("The machine file has an error; its last good version is served: "+public))
	}
	return res
}

// reset starts an instance afresh; it is allowed only once the instance is
// done or failed.
func (g *Gate) reset(c *call) *mcp.CallToolResult {
	m := c.w
	h, bad := g.hold(c)
	if bad != nil {
		return bad
	}
	defer h.Release()
	in, err := h.Load(c.ctx)
	if err != nil {
		return failed(m.ResetTool, err)
	}
	snap := in.Snapshot
	before := g.seen(g.view(in), c.principal)
	if !contains(before.tools, m.ResetTool) {
		return refusal("FORBIDDEN", fmt.Sprintf("%s is allowed only once the workflow is done or failed; it is %s in state %s", m.ResetTool, snap.Status, workflow.StateString(snap)), m, c.handle, before)
	}
	saved, err := h.Restart(c.ctx, c.entry(m.ResetTool))
	if err != nil {
		if errors.Is(err, interp.ErrStopped) {
			return errorResult("ERROR", "ERROR: "+err.Error(), nil)
		}
		return saveFailed(m.ResetTool, snap, err)
	}
	return success(m, c.handle, g.seen(g.view(saved), c.principal), nil)
}

// eventOf makes the event {type: E, principal: {sub, roles},
// ...arguments}, without the handle: the principal is the caller's, set
// over an argument of that name.
func eventOf(typ string, args map[string]any, handleKey string, p Principal) interp.Event {
	data := make(map[string]any, len(args)+1)
	for k, v := range args {
		if k != "type" && k != handleKey {
			data[k] = v
		}
	}
	return interp.Event{Type: typ, Data: withPrincipal(data, p)}
}

// toolArgs returns a call's arguments, or the answer to arguments that
// are not an object.
func toolArgs(req mcp.CallToolRequest) (map[string]any, *mcp.CallToolResult) {
	args, _ := req.Params.Arguments.(map[string]any)
	if req.Params.Arguments != nil && args == nil {
		return nil, errorResult("INVALID_ARGUMENTS", "INVALID_ARGUMENTS: the arguments must be an object", nil)
	}
	if err := workflow.CheckEventValue("the arguments of "+req.Params.Name, args); err != nil {
		return nil, errorResult("INVALID_ARGUMENTS", "INVALID_ARGUMENTS: "+err.Error(), nil)
	}
	return args, nil
}

// MaxArguments bounds the size of a call's arguments, as JSON
// (workflow.MaxEventSize): the event they make goes into the instance's
// audit trail and often into its context.
const MaxArguments = workflow.MaxEventSize

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
