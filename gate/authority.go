package gate

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
)

// Who may take a step: a tool's roles (meta.tool.roles, a binding's
// Roles) hide it from callers who hold none of them and refuse their
// calls (FORBIDDEN, naming the roles); an event carries who calls
// (event.principal: {sub, roles}), set by the gate and never taken from
// the arguments, so guards can tell callers apart (four eyes); a tool
// with meta.tool.confirm asks the calling client's human before each call
// (elicitation/create), and is refused (DECLINED) unless the human says
// yes.

// anonymous is the principal of a request whose transport named none (no
// authentication configured).
func anonymous() Principal { return AnonymousPrincipal() }

// principalOf returns who makes a request: the transport's principal
// (WithPrincipal: the HTTP handler's, or the context ServeStdio was
// given), else anonymous.
func (g *Gate) principalOf(ctx context.Context) Principal {
	if p, ok := PrincipalFrom(ctx); ok {
		return p
	}
	return anonymous()
}

// holds reports whether a principal holds one of the roles (any principal
// does when there are none).
func holds(p Principal, roles []string) bool {
	if len(roles) == 0 {
		return true
	}
	for _, r := range roles {
		if slices.Contains(p.Roles, r) {
			return true
		}
	}
	return false
}

// roles are the roles a tool asks of its callers (none: anyone).
func (r *toolRef) roles() []string {
	switch {
	case r.tool != nil:
		return r.tool.Roles
	case r.binding != nil:
		return r.binding.roles
	}
	return nil
}

// rolesOf returns the roles a served tool asks of its callers, by name.
func (sv *served) rolesOf(name string) []string {
	if ref := sv.tools[name]; ref != nil {
		return ref.roles()
	}
	return nil
}

// visible are the tools of a list a principal may see: those whose roles
// it holds one of.
func (g *Gate) visible(tools []string, p Principal) []string {
	sv := g.served.Load()
	out := tools[:0:0]
	for _, name := range tools {
		if holds(p, sv.rolesOf(name)) {
			out = append(out, name)
		}
	}
	return out
}

// seen is a view as a principal sees it: the tools it may call.
func (g *Gate) seen(v view, p Principal) view {
	v.tools = g.visible(v.tools, p)
	return v
}

// forbiddenRole answers a call of a tool whose roles the caller holds
// none of: FORBIDDEN, naming them; nil when the caller may call it.
func (g *Gate) forbiddenRole(c *call, name string, roles []string) *mcp.CallToolResult {
	if holds(c.principal, roles) {
		return nil
	}
	have := "none"
	if len(c.principal.Roles) > 0 {
		have = strings.Join(c.principal.Roles, ", ")
	}
	return errorResult("FORBIDDEN", fmt.Sprintf("FORBIDDEN: %s needs the role %s; %s holds %s", name, orList(roles), c.principal.Sub, have),
		map[string]any{"tool": name, "roles": roles, "principal": c.principal.Sub})
}

// withPrincipal sets an event's principal: who calls, as {sub, roles}
// (the gate's, whatever the arguments say).
func withPrincipal(data map[string]any, p Principal) map[string]any {
	if data == nil {
		data = map[string]any{}
	}
	roles := make([]any, len(p.Roles))
	for i, r := range p.Roles {
		roles[i] = r
	}
	data["principal"] = map[string]any{"sub": p.Sub, "roles": roles}
	return data
}

// DefaultConfirmTimeout bounds how long a call waits for its human's
// answer (Options.ConfirmTimeout).
const DefaultConfirmTimeout = 5 * time.Minute

// placeholder is an argument a confirmation names: {amount}.
var placeholder = regexp.MustCompile(`\{([A-Za-z0-9_.-]+)\}`)

// confirmText fills a confirmation's {name}s in with the call's
// arguments, else the instance's context (left as they are when neither
// has one).
func confirmText(tmpl string, args map[string]any, instanceContext any) string {
	ctx, _ := instanceContext.(map[string]any)
	return placeholder.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := m[1 : len(m)-1]
		v, ok := args[name]
		if !ok {
			if v, ok = ctx[name]; !ok {
				return m
			}
		}
		if s, ok := v.(string); ok {
			return s
		}
		return fmt.Sprint(v)
	})
}

// confirmSchema is what the human is asked for: a yes or no, and a
// comment.
var confirmSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"approve": map[string]any{"type": "boolean", "title": "Approve", "description": "Take this step."},
		"comment": map[string]any{"type": "string", "title": "Comment", "description": "Why (optional)."},
	},
	"required": []any{"approve"},
}

// confirm asks the calling client's human to confirm a step (elicitation),
// and returns the confirmation, or the answer to give when there is none:
// DECLINED (the human said no, or cancelled), NEEDS_HUMAN (the client
// cannot ask its human, or the answer did not come in time).
func (g *Gate) confirm(c *call, tool, tmpl string, instanceContext any) (*store.Confirmation, *mcp.CallToolResult) {
	text := confirmText(tmpl, c.args, instanceContext)
	srv := g.srv.Load()
	if c.modern || srv == nil || !canElicit(c.ctx) {
		// mcp-go sends elicitation/create even to a client that did not
		// declare it (which answers -32601): the gate asks only those
		// that did. Revision 2026-07-28 has no server-initiated requests.
		return nil, errorResult("NEEDS_HUMAN", fmt.Sprintf("NEEDS_HUMAN: %s needs a human's yes (%q), and this client cannot ask its human (it declared no elicitation capability); nothing was done. Use a client that asks its user (elicitation), or have an operator take the step.", tool, text),
			map[string]any{"tool": tool, "confirm": text})
	}
	ctx, cancel := context.WithTimeout(c.ctx, cmpDuration(g.opts.ConfirmTimeout, DefaultConfirmTimeout))
	defer cancel()
	res, err := srv.RequestElicitation(ctx, mcp.ElicitationRequest{Params: mcp.ElicitationParams{Message: text, RequestedSchema: maps.Clone(confirmSchema)}})
	if err != nil {
		return nil, errorResult("NEEDS_HUMAN", fmt.Sprintf("NEEDS_HUMAN: %s needs a human's yes (%q), and none came: %v; nothing was done", tool, text, err),
			map[string]any{"tool": tool, "confirm": text})
	}
	content, _ := res.Content.(map[string]any)
	comment, _ := content["comment"].(string)
	if res.Action != mcp.ElicitationResponseActionAccept || content["approve"] != true {
		why := "declined"
		if res.Action == mcp.ElicitationResponseActionCancel {
			why = "cancelled"
		}
		text := fmt.Sprintf("DECLINED: the human %s %s (%q); nothing was done", why, tool, text)
		if comment != "" {
			text += ": " + comment
		}
		return nil, errorResult("DECLINED", text, map[string]any{"tool": tool, "comment": comment})
	}
	return &store.Confirmation{By: c.principal, Via: "elicitation", Comment: comment}, nil
}

// canElicit reports whether the client of a request declared that it can
// ask its human (the elicitation capability).
func canElicit(ctx context.Context) bool {
	cs, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo)
	return ok && cs.GetClientCapabilities().Elicitation != nil
}

func cmpDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// pend puts a call to an operator: it waits, stored with its instance,
// until an operator approves it (its event is then sent) or declines it,
// and the instance takes no other call meanwhile. The answer is PENDING,
// with where to approve it.
func (g *Gate) pend(c *call, t *workflow.Tool) *mcp.CallToolResult {
	m := c.w
	if bad := g.forbiddenRole(c, t.Name, t.Roles); bad != nil {
		return bad
	}
	h, bad := g.hold(c)
	if bad != nil {
		return bad
	}
	defer h.Release()
	in, err := h.Load(c.ctx)
	if err != nil {
		return failed(t.Name, err)
	}
	if in.Pending != nil {
		return g.pendingResult(c, in, fmt.Sprintf("%s was not done: ", t.Name))
	}
	if v := g.view(in); !contains(v.tools, t.Name) {
		return refusal("FORBIDDEN", notAvailable(t.Name, m, v), m, c.handle, g.seen(v, c.principal))
	}
	if err := t.Validate(c.args); err != nil {
		return errorResult("INVALID_ARGUMENTS", "INVALID_ARGUMENTS: "+err.Error(), map[string]any{"tool": t.Name})
	}
	ev := eventOf(t.Event, c.args, m.HandleKey, c.principal)
	if ok, err := in.Snapshot.Can(ev); err != nil || !ok {
		why := fmt.Sprintf("the %s workflow does not take %s with these arguments in state %s", m.ID, t.Event, workflow.StateString(in.Snapshot))
		return refusal("REJECTED", why, m, c.handle, g.seen(g.view(in), c.principal))
	}
	var roles []string
	if t.Approval != "" {
		roles = []string{t.Approval}
	}
	confirm := t.Confirm
	if confirm != "" {
		confirm = confirmText(confirm, c.args, in.Snapshot.Context)
	}
	e := c.entry(t.Name)
	e.Note = "awaits an operator's approval"
	saved, err := h.Pend(c.ctx, store.Pending{Tool: t.Name, Event: ev.Object(), Principal: c.principal, Roles: roles, Confirm: confirm}, e)
	if err != nil {
		return g.eventFailed(c, t.Name, t.Event, err)
	}
	return g.pendingResult(c, saved, "")
}

// pendingResult answers a call on an instance whose call waits for an
// operator's approval: PENDING, saying which, and where it is approved.
func (g *Gate) pendingResult(c *call, in *workflow.Instance, prefix string) *mcp.CallToolResult {
	p := in.Pending
	who := "an operator"
	if len(p.Roles) > 0 {
		who = "an operator holding the role " + orList(p.Roles)
	}
	where := ""
	sc := map[string]any{"machine": in.Workflow.ID, "handle": in.Handle, "state": in.Snapshot.Value(), "tool": p.Tool, "approval": p.ID, "by": p.Principal.Sub}
	if g.opts.InspectLink != nil {
		link := g.opts.InspectLink(in.Workflow.ID, in.Handle)
		sc["inspect"] = link
		where = " in the inspector: " + link
	}
	what := p.Tool
	if p.Confirm != "" {
		what += fmt.Sprintf(" (%q)", p.Confirm)
	}
	text := fmt.Sprintf("PENDING: %s%s, called by %s, awaits the approval of %s%s. The %s workflow takes no other call until it is settled; sessions that see it are told (notifications/tools/list_changed) when it is.",
		prefix, what, p.Principal.Sub, who, where, in.Workflow.ID)
	return errorResult("PENDING", text, sc)
}
