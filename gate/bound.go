package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
)

// A Binding binds a tool with a handler of its own (a Go function, or a
// tool the host registers on its server) to states of a workflow: the
// tool is listed, and may be called, only while the caller's instance of
// the workflow is in one of those states and would take the binding's
// event (XState's snapshot.can, guard-aware as event tools are); its
// handler runs with the instance locked and its state in the context
// (StateFrom); a result without isError then sends the event to the
// instance, with the call's arguments and the result as output, and a
// failure sends nothing (or the error event the binding names).
//
//	g.Tool(mcp.NewTool("discharge", ...), discharge).BindState("invoice", []string{"approved"}, "DISCHARGE")
//
// A binding takes effect with BindState; OnError may come before or
// after it.
type Binding struct {
	g          *Gate
	name       string
	tool       *mcp.Tool              // the tool, when Tool gave it
	handler    server.ToolHandlerFunc // its handler, when Tool gave it
	workflow   string
	states     []string
	event      string
	errorEvent string
	// fromMachine is set on a binding a machine file made (an event
	// bound to an upstream tool, upstream): the gate registers its tool,
	// and removes it when it is gone.
	fromMachine bool
	upstream    string
	// roles are the roles a caller needs one of (Roles); confirm what the
	// caller's human is asked before each call (Confirm).
	roles   []string
	confirm string
	// origin names the Tool or Bound call the binding comes from: its
	// copies (one per BindState and OnError) have the tool and handler it
	// gave, and rebinding them to other states registers nothing anew.
	origin uint64
}

// sameBinding reports whether two bindings do the same: the same one, or
// two that a machine made alike (each serve makes its own).
func sameBinding(a, b *Binding) bool {
	switch {
	case a == b:
		return true
	case a == nil || b == nil:
		return false
	case a.fromMachine && b.fromMachine:
		return a.name == b.name && a.workflow == b.workflow && a.event == b.event && a.errorEvent == b.errorEvent && a.upstream == b.upstream &&
			slices.Equal(a.roles, b.roles) && a.confirm == b.confirm
	}
	return a.origin != 0 && a.origin == b.origin
}

// Tool makes a tool with a Go handler, to bind to states (BindState): it
// is registered on the gate's server once bound.
func (g *Gate) Tool(tool mcp.Tool, handler server.ToolHandlerFunc) *Binding {
	return &Binding{g: g, name: tool.Name, tool: &tool, handler: handler, origin: g.origins.Add(1)}
}

// Bound returns a binding for a tool that the host registers on its
// server itself (before or after Bind): BindState gates it as a tool made
// with Tool.
func (g *Gate) Bound(name string) *Binding {
	return &Binding{g: g, name: name, origin: g.origins.Add(1)}
}

// BindState binds the tool to states of a workflow (by id): it is listed
// while the instance matches one of states (as XState's state.matches:
// "approved", "payment.pending"; none: any state) and would take event, and
// a successful call sends event. It replaces an earlier binding of the
// tool. A workflow not served (yet) hides the tool, and its calls are
// refused.
func (b *Binding) BindState(workflow string, states []string, event string) *Binding {
	b.workflow, b.states, b.event = workflow, slices.Clone(states), event
	b.g.bind(b)
	return b
}

// Roles names the roles a caller needs one of to see and call the tool
// (as meta.tool.roles does for an event's tool): others do not see it,
// and their calls are refused (FORBIDDEN, naming the roles).
func (b *Binding) Roles(roles ...string) *Binding {
	b.roles = slices.Sorted(slices.Values(roles))
	if b.event != "" {
		b.g.bind(b)
	}
	return b
}

// Confirm makes each call ask the calling client's human first (as
// meta.tool.confirm does): message says what is confirmed, {argument}
// filling in an argument; the handler runs only on a yes.
func (b *Binding) Confirm(message string) *Binding {
	b.confirm = message
	if b.event != "" {
		b.g.bind(b)
	}
	return b
}

// OnError names the event sent, with {type, error}, when the handler
// fails (its result has isError, or it returns an error).
func (b *Binding) OnError(event string) *Binding {
	b.errorEvent = event
	if b.event != "" {
		b.g.bind(b)
	}
	return b
}

// bind serves a binding (a copy: served bindings do not change), and
// tells the sessions whose list it changes.
func (g *Gate) bind(b *Binding) {
	c := *b
	g.setMu.Lock()
	g.bindings[c.name] = &c
	t, err := g.serve(g.served.Load().sorted)
	g.setMu.Unlock()
	if err != nil {
		g.log.Error("cannot bind tool", "tool", c.name, "workflow", c.workflow, "err", err)
		return
	}
	g.refreshAfter(context.Background(), t)
}

// Err returns why the binding is not served, when its workflow is served
// and names no such state or event (the error names the nearest one);
// nil when it is served, or waits for its workflow. Such a binding's
// tool is refused (FORBIDDEN, with the error), and its event keeps its
// own tool.
func (b *Binding) Err() error {
	b.g.setMu.Lock()
	defer b.g.setMu.Unlock()
	return b.g.bindErrs[b.name]
}

// checkBindings checks the bindings against the workflows served (under
// setMu): a binding to a state or event its workflow does not have is not
// served, and said once; one to a workflow not served waits for it, and
// is said once too, with the nearest workflow's name.
func (g *Gate) checkBindings(ws map[string]*workflow.Workflow) {
	errs, waits := map[string]error{}, map[string]string{}
	ids := slices.Collect(maps.Keys(ws))
	for name, b := range g.bindings {
		if b.fromMachine {
			continue // made by the workflow itself
		}
		m := ws[b.workflow]
		if m == nil {
			waits[name] = b.workflow
			if len(ws) > 0 && g.bindWaits[name] != b.workflow {
				g.log.Warn("a tool is bound to a workflow that is not served: it is not listed until that workflow is", "tool", name, "workflow", b.workflow, "nearest", workflow.Nearest(b.workflow, ids))
			}
			continue
		}
		if err := checkBinding(b, m); err != nil {
			errs[name] = err
			if prev := g.bindErrs[name]; prev == nil || prev.Error() != err.Error() {
				g.log.Error("a tool's binding is not served", "tool", name, "err", err)
			}
		}
	}
	g.bindErrs, g.bindWaits = errs, waits
}

// checkBinding checks a binding's states and events against its workflow.
func checkBinding(b *Binding, m *workflow.Workflow) error {
	var paths []string
	for _, n := range m.Machine.Nodes {
		if p := n.PathString(); p != "" {
			paths = append(paths, p)
		}
	}
	for _, st := range b.states {
		if !slices.Contains(paths, st) {
			return fmt.Errorf("%w: %s is bound to state %q of the %s workflow, which has no such state (the nearest is %q)", ErrBinding, b.name, st, m.ID, workflow.Nearest(st, paths))
		}
	}
	for _, ev := range []string{b.event, b.errorEvent} {
		if ev != "" && !slices.Contains(m.Machine.EventTypes, ev) {
			return fmt.Errorf("%w: %s sends %s to the %s workflow, which takes no such event (the nearest is %s)", ErrBinding, b.name, ev, m.ID, workflow.Nearest(ev, m.Machine.EventTypes))
		}
	}
	return nil
}

// ErrBinding is wrapped by the errors of bindings that are not served
// (Binding.Err).
var ErrBinding = errors.New("a binding names what its workflow does not have")

// inStates reports whether a snapshot is in one of the binding's states.
func (b *Binding) inStates(s *interp.Snapshot) bool {
	if len(b.states) == 0 {
		return true
	}
	for _, st := range b.states {
		if s.Matches(st) {
			return true
		}
	}
	return false
}

// handlerFor returns the tool's handler: Tool's, or the one the host
// registered on srv (nil when it has not).
func (b *Binding) handlerFor(srv *server.MCPServer) server.ToolHandlerFunc {
	if b.handler != nil {
		return b.handler
	}
	if st := srv.GetTool(b.name); st != nil {
		return st.Handler
	}
	return nil
}

// listedTool is a bound tool as listed: Tool's, or the host's, with the
// handle argument added to its schema when the workflow has a handle key
// and the schema does not take it already.
func (g *Gate) listedTool(b *Binding, m *workflow.Workflow) mcp.Tool {
	t := mcp.Tool{Name: b.name}
	switch {
	case b.tool != nil:
		t = *b.tool
	case g.srv.Load() != nil && g.srv.Load().GetTool(b.name) != nil:
		t = g.srv.Load().GetTool(b.name).Tool
	}
	return withHandleArg(t, m.HandleKey)
}

// withHandleArg adds the handle argument to a tool's input schema, unless
// there is no handle key or the schema takes it already.
func withHandleArg(t mcp.Tool, handleKey string) mcp.Tool {
	if handleKey == "" {
		return t
	}
	data, err := json.Marshal(t)
	if err != nil {
		return t
	}
	var raw struct {
		Schema map[string]any `json:"inputSchema"`
	}
	if json.Unmarshal(data, &raw) != nil || raw.Schema == nil {
		raw.Schema = map[string]any{"type": "object"}
	}
	props, _ := raw.Schema["properties"].(map[string]any)
	if _, has := props[handleKey]; has {
		return t
	}
	props = maps.Clone(props)
	if props == nil {
		props = map[string]any{}
	}
	props[handleKey] = workflow.HandleProperty()
	raw.Schema["properties"] = props
	req, _ := raw.Schema["required"].([]any)
	raw.Schema["required"] = append([]any{handleKey}, req...)
	schema, _ := json.Marshal(raw.Schema)
	t.InputSchema, t.RawInputSchema = mcp.ToolInputSchema{}, schema
	return t
}

// stateKey carries a bound tool's instance in its handler's context.
type stateKey struct{}

// StateFrom returns the instance a bound tool's handler runs for (its
// state before the call), set by the gate.
func StateFrom(ctx context.Context) (*workflow.State, bool) {
	s, ok := ctx.Value(stateKey{}).(*workflow.State)
	return s, ok
}

// callBound gates a call of a bound tool: with the instance held, the
// tool must be allowed in its state (FORBIDDEN otherwise, with the tools
// allowed now); its handler runs with the instance's state in the
// context; its result, unless an error, sends the binding's event with
// the arguments and the result as output (a failure sends the error
// event, if any); the answer is the handler's, with a note of where the
// workflow is now (a text, and _meta["stategate/workflow"]: the
// structured content stays the handler's, which an output schema may
// bind).
func (g *Gate) callBound(ctx context.Context, ref *toolRef, req mcp.CallToolRequest, next server.ToolHandlerFunc) (*mcp.CallToolResult, error) {
	c, bad := g.newCall(ctx, ref, req)
	if bad != nil {
		return g.fitOutput(ref.full, bad), nil
	}
	b, m := ref.binding, ref.m
	if bad := g.forbiddenRole(c, b.name, b.roles); bad != nil {
		return g.fitOutput(ref.full, bad), nil
	}
	if ref.checkArgs != nil {
		if err := ref.checkArgs(c.args); err != nil {
			return g.fitOutput(ref.full, errorResult("INVALID_ARGUMENTS", "INVALID_ARGUMENTS: "+err.Error(), map[string]any{"tool": b.name})), nil
		}
	}
	var confirmed *store.Confirmation
	if b.confirm != "" {
		v, err := g.current(ctx, m, c.handle)
		if err != nil {
			return g.fitOutput(ref.full, failed(b.name, err)), nil
		}
		if !contains(g.visible(v.tools, c.principal), b.name) {
			return g.fitOutput(ref.full, refusal("FORBIDDEN", notAvailable(b.name, m, v), m, c.handle, g.seen(v, c.principal))), nil
		}
		var bad *mcp.CallToolResult
		if confirmed, bad = g.confirm(c, b.name, b.confirm, v.snap.Context); bad != nil {
			return g.fitOutput(ref.full, bad), nil
		}
	}
	h, bad := g.hold(c)
	if bad != nil {
		return g.fitOutput(ref.full, bad), nil
	}
	defer h.Release()
	in, err := h.Load(ctx)
	if err != nil {
		return g.fitOutput(ref.full, failed(b.name, err)), nil
	}
	if in.Pending != nil {
		return g.fitOutput(ref.full, g.pendingResult(c, in, fmt.Sprintf("%s was not done: ", b.name))), nil
	}
	if v := g.view(in); !contains(v.tools, b.name) {
		return g.fitOutput(ref.full, refusal("FORBIDDEN", notAvailable(b.name, m, v), m, c.handle, g.seen(v, c.principal))), nil
	}
	// The handler's side effects cannot be undone: an intent goes to the
	// audit trail first, and what ends it (the transition, or a note that
	// none was made) settles it. A crash in between leaves it in doubt,
	// for the status tool and `state show` to show: each call moves the
	// machine at most once.
	ie := c.entry(b.name)
	ie.Intent = &store.Intent{Arguments: callArgs(c.args, m.HandleKey), Event: b.event}
	ie.Confirmed = confirmed
	intended, err := h.Save(ctx, ie)
	if err != nil {
		return g.fitOutput(ref.full, saveFailed(b.name, in.Snapshot, err)), nil
	}
	intent := intended.Version
	settle := func(note string) {
		se := c.entry(b.name)
		se.Settles, se.Note = intent, note
		if _, err := h.Save(context.WithoutCancel(ctx), se); err != nil {
			g.log.Warn("cannot settle intent", "tool", b.name, "machine", m.ID, "handle", c.handle, "err", err)
		}
	}
	res, herr := next(context.WithValue(ctx, stateKey{}, in.State()), c.req)
	var ev interp.Event
	switch {
	case herr == nil && res != nil && !res.IsError:
		data := withPrincipal(callArgs(c.args, m.HandleKey), c.principal)
		data["output"] = outputOf(res)
		if err := workflow.CheckEventValue("the output of "+b.name, data["output"]); err != nil {
			// Done, and known not to be recorded: said, not in doubt.
			settle("done, but not recorded: " + err.Error())
			note := fmt.Sprintf("The %s workflow did not take %s: %v. It stays in state %s.", m.ID, b.event, err, workflow.StateString(in.Snapshot))
			return withNote(res, note, map[string]any{"machine": m.ID, "handle": c.handle, "state": in.Snapshot.Value(), "event": b.event, "error": err.Error()}), herr
		}
		ev = interp.Event{Type: b.event, Data: data}
	case b.errorEvent != "":
		ev = interp.Event{Type: b.errorEvent, Data: withPrincipal(map[string]any{"error": failureOf(res, herr)}, c.principal)}
	default:
		// Nothing sent: the instance stays.
		settle("failed, no event sent: " + brief(failureOf(res, herr)))
		return res, herr
	}
	e := c.entry(b.name)
	e.Event, e.Settles, e.Confirmed = ev.Object(), intent, confirmed
	// The side effect happened: the event is stored even if the client
	// went away meanwhile.
	saved, _, aerr := h.Apply(context.WithoutCancel(ctx), ev, e, nil)
	if aerr != nil && !errors.Is(aerr, store.ErrOutcomeUnknown) && !errors.Is(aerr, store.ErrDiskFailed) {
		// The machine did not take it (a guard, a failed step), or its
		// new state was refused by the store (too large, no space):
		// known, not in doubt. (When the store cannot tell, the intent
		// stays in doubt, as it is.)
		settle(fmt.Sprintf("done, but %s was not taken: %s", ev.Type, brief(aerr.Error())))
	}
	if res == nil {
		return res, herr
	}
	var note string
	var meta map[string]any
	if aerr != nil {
		note = fmt.Sprintf("The %s workflow did not take %s: %v. It stays in state %s.", m.ID, ev.Type, aerr, workflow.StateString(in.Snapshot))
		meta = map[string]any{"machine": m.ID, "handle": c.handle, "state": in.Snapshot.Value(), "event": ev.Type, "error": aerr.Error()}
	} else {
		v := g.seen(g.view(saved), c.principal)
		note = whereNow(m, c.handle, v, "is now")
		meta = map[string]any{"machine": m.ID, "handle": c.handle, "state": v.snap.Value(), "status": v.snap.Status.String(), "tools": v.tools}
		if desc, tags := stateWords(v.snap); desc != "" || len(tags) > 0 {
			meta["description"], meta["tags"] = desc, tags
		}
	}
	return withNote(res, note, meta), herr
}

// callArgs are a call's arguments as its event carries them: without the
// handle argument and "type".
func callArgs(args map[string]any, handleKey string) map[string]any {
	data := make(map[string]any, len(args)+1)
	for k, v := range args {
		if k != "type" && k != handleKey {
			data[k] = v
		}
	}
	return data
}

// outputOf is what a successful result gives its event as output: its
// structured content, else its text (one text content), else its
// contents.
func outputOf(res *mcp.CallToolResult) any {
	if res.StructuredContent != nil {
		return plain(res.StructuredContent)
	}
	if len(res.Content) == 1 {
		if t, ok := res.Content[0].(mcp.TextContent); ok {
			return t.Text
		}
	}
	return plain(res.Content)
}

// failureOf says why a handler failed: its error, else its result's text.
func failureOf(res *mcp.CallToolResult, err error) string {
	if err != nil {
		return err.Error()
	}
	if res != nil {
		for _, c := range res.Content {
			if t, ok := c.(mcp.TextContent); ok {
				return t.Text
			}
		}
	}
	return "the tool failed"
}

// plain converts a value to plain JSON values (maps, slices, strings,
// numbers, booleans, nil), as an event's data holds them.
func plain(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	_ = json.Unmarshal(data, &out)
	return out
}

// withNote adds the gate's note to a result: a text content, and
// _meta["stategate/workflow"].
func withNote(res *mcp.CallToolResult, note string, meta map[string]any) *mcp.CallToolResult {
	out := *res
	out.Content = append(slices.Clip(res.Content), mcp.NewTextContent(note))
	m := &mcp.Meta{}
	if res.Meta != nil {
		c := *res.Meta
		c.AdditionalFields = maps.Clone(res.Meta.AdditionalFields)
		m = &c
	}
	m.SetMetaField(metaWorkflow, meta)
	out.Meta = m
	return &out
}

// metaWorkflow is the _meta key of the gate's note on a bound tool's
// result.
const metaWorkflow = "stategate/workflow"
