package gate

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/stategate/stategate/upstream"
	"github.com/stategate/stategate/workflow"
)

// Upstreams are the tools of other MCP servers that workflows gate: a
// transition's meta.tool.upstream ("server/tool") makes its event's tool
// that upstream tool, a bound tool whose handler forwards the call; a
// state's meta.tools lists upstream tools while it is active, forwarded
// with no event; a server that exposes its tools ("expose": "always")
// has the ones no workflow names listed always. Other upstream tools are
// neither listed nor callable. *upstream.Manager is one.
type Upstreams interface {
	// Servers returns the servers configured, with their tools as last
	// listed (kept while a server is down).
	Servers() []upstream.ServerStatus
	// Call calls a server's tool; upstream.ErrUnavailable when the server
	// is down, upstream.ErrTimeout past its deadline.
	Call(ctx context.Context, server string, req mcp.CallToolRequest) (*mcp.CallToolResult, error)
	// Subscribe calls f after the tools of a server changed (it came up,
	// restarted, went down, or said its list changed); the gate then
	// serves the upstream tools anew. It returns a function that ends the
	// subscription.
	Subscribe(f func()) (cancel func())
}

// upstreamsChanged serves the upstream tools anew, after an upstream
// server's tools changed (Upstreams.Subscribe). Sessions whose tool list
// changes are told.
func (g *Gate) upstreamsChanged() {
	g.setMu.Lock()
	t, err := g.serve(g.served.Load().sorted)
	g.setMu.Unlock()
	if err != nil {
		g.log.Error("cannot serve the upstream tools", "err", err)
		return
	}
	g.refreshAfter(context.Background(), t)
}

// upstreamSet is the upstream tools as one serve sees them.
type upstreamSet struct {
	servers map[string]upstream.ServerStatus
	version string // hash of the tools, for listings
}

func (g *Gate) upstreamSet() upstreamSet {
	us := upstreamSet{servers: map[string]upstream.ServerStatus{}}
	if g.opts.Upstreams == nil {
		return us
	}
	h := sha256.New()
	for _, s := range g.opts.Upstreams.Servers() {
		us.servers[s.Name] = s
		_ = json.NewEncoder(h).Encode([]any{s.Name, s.Expose, s.Tools})
	}
	us.version = hex.EncodeToString(h.Sum(nil))[:16]
	return us
}

// tool returns an upstream tool's definition, false when the server is
// not configured or has not listed it.
func (us upstreamSet) tool(ref string) (mcp.Tool, bool) {
	srv, name, _ := workflow.SplitUpstream(ref)
	for _, t := range us.servers[srv].Tools {
		if t.Name == name {
			return t, true
		}
	}
	return mcp.Tool{}, false
}

// warnMissing logs a workflow's upstream tool that a server which is up
// does not have (one that is down, or not configured, answers
// UPSTREAM_UNAVAILABLE; `stategate check --upstreams` reports both).
func (us upstreamSet) warnMissing(g *Gate, m *workflow.Workflow, ref string) {
	srv, name, _ := workflow.SplitUpstream(ref)
	if s, ok := us.servers[srv]; ok && s.Up {
		g.log.Warn("upstream server has no such tool: its calls will fail", "machine", m.ID, "upstream", srv, "tool", name)
	}
}

// boundUpstream makes the binding of an event to an upstream tool: the
// tool as the upstream defines it, under the event tool's name, with
// what the machine gives (the transition's description, meta.tool's
// title, annotations, input schema) in place of the upstream's.
func (g *Gate) boundUpstream(m *workflow.Workflow, t *workflow.Tool, us upstreamSet) *Binding {
	def, known := us.tool(t.Upstream)
	if !known {
		def = mcp.Tool{InputSchema: mcp.ToolInputSchema{Type: "object"}}
		us.warnMissing(g, m, t.Upstream)
	}
	def.Name = t.Name
	if t.Given.Description || !known {
		def.Description = t.Description
	}
	if t.Given.Title {
		def.Title = t.Title
	}
	if t.Given.Hints {
		setHints(&def.Annotations, t.Hints)
	}
	if t.Given.Schema {
		// The machine's schema, without the handle argument (listedTool
		// adds it).
		s := maps.Clone(t.Schema)
		if m.HandleKey != "" {
			props := maps.Clone(s["properties"].(map[string]any))
			delete(props, m.HandleKey)
			s["properties"] = props
			req, _ := s["required"].([]any)
			s["required"] = slices.DeleteFunc(slices.Clone(req), func(v any) bool { return v == m.HandleKey })
		}
		raw, _ := json.Marshal(s)
		def.InputSchema, def.RawInputSchema = mcp.ToolInputSchema{}, raw
	}
	srv, name, _ := workflow.SplitUpstream(t.Upstream)
	b := &Binding{g: g, name: t.Name, tool: &def, workflow: m.ID, event: t.Event, errorEvent: t.OnError, fromMachine: true, upstream: t.Upstream,
		roles: t.Roles, confirm: t.Confirm}
	b.handler = g.forward(srv, name, m.HandleKey, takesArg(def, m.HandleKey), t, def)
	return b
}

// takesArg reports whether a tool's input schema has a property.
func takesArg(t mcp.Tool, name string) bool {
	if name == "" {
		return false
	}
	if t.RawInputSchema != nil {
		var s struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		_ = json.Unmarshal(t.RawInputSchema, &s)
		_, ok := s.Properties[name]
		return ok
	}
	_, ok := t.InputSchema.Properties[name]
	return ok
}

// forward is the handler of an upstream tool: the call goes to the
// server under the upstream tool's name, without the handle argument
// (unless the tool takes one of that name), with the caller's progress
// token; the server's progress and log notifications during the call go
// to the caller. A call that cannot reach the server, or does not end in
// time, is an error result naming the server. t, when set, is the event
// tool whose machine schema the arguments are checked against first.
func (g *Gate) forward(srv, name, handleKey string, keepHandle bool, t *workflow.Tool, def mcp.Tool) server.ToolHandlerFunc {
	fail := func(code, text string) *mcp.CallToolResult {
		return g.fitOutput(def, errorResult(code, code+": "+text, map[string]any{"server": srv}))
	}
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		up := g.opts.Upstreams
		if up == nil {
			return fail("UPSTREAM_UNAVAILABLE", fmt.Sprintf("%s is a tool of the upstream server %s, and this server has no upstreams file", req.Params.Name, srv)), nil
		}
		args, _ := req.Params.Arguments.(map[string]any)
		if t != nil && t.Given.Schema {
			if err := t.Validate(args); err != nil {
				return g.fitOutput(def, errorResult("INVALID_ARGUMENTS", "INVALID_ARGUMENTS: "+err.Error(), map[string]any{"tool": t.Name})), nil
			}
		}
		out := req
		if handleKey != "" && !keepHandle {
			if _, has := args[handleKey]; has {
				args = maps.Clone(args)
				delete(args, handleKey)
				// mcp-go sends RawArguments (the arguments as they
				// came, the handle too) in place of Arguments when set.
				out.Params.RawArguments = nil
			}
		}
		out.Params.Name = name
		out.Params.Arguments = args
		if s := server.ServerFromContext(ctx); s != nil {
			ctx = upstream.WithNotify(ctx, func(method string, params map[string]any) {
				_ = s.SendNotificationToClient(ctx, method, params)
			})
		}
		res, err := up.Call(ctx, srv, out)
		switch {
		case errors.Is(err, upstream.ErrUnavailable):
			return fail("UPSTREAM_UNAVAILABLE", fmt.Sprintf("%s: %v", req.Params.Name, err)), nil
		case errors.Is(err, upstream.ErrTimeout):
			return fail("UPSTREAM_TIMEOUT", fmt.Sprintf("%s: %v", req.Params.Name, err)), nil
		case err != nil && ctx.Err() != nil:
			return fail("CANCELLED", fmt.Sprintf("%s: the call was cancelled", req.Params.Name)), nil
		case err != nil:
			return fail("UPSTREAM_ERROR", fmt.Sprintf("%s: %v", req.Params.Name, err)), nil
		case res == nil:
			return fail("UPSTREAM_ERROR", fmt.Sprintf("%s: %s answered no result", req.Params.Name, srv)), nil
		}
		return res, nil
	}
}

// stateToolDef is how a state tool is listed: the upstream's tool, with
// the handle argument when the workflow has a handle key.
func (g *Gate) stateToolDef(m *workflow.Workflow, st *workflow.StateTool, us upstreamSet) mcp.Tool {
	def, known := us.tool(st.Upstream)
	if !known {
		def = mcp.NewTool(st.Name, mcp.WithDescription(fmt.Sprintf("%s (a tool of the upstream server, not available now).", st.Upstream)))
		us.warnMissing(g, m, st.Upstream)
	}
	def.Name = st.Name
	return withHandleArg(def, m.HandleKey)
}

// callState forwards a call of a state tool while one of its states is
// active (FORBIDDEN otherwise). It moves nothing: the instance is not
// held while the upstream works.
func (g *Gate) callState(c *call) (*mcp.CallToolResult, error) {
	ref, m, st := c.ref, c.w, c.ref.state
	v, err := g.current(c.ctx, m, c.handle)
	if err != nil {
		return errorResult("ERROR", "ERROR: "+err.Error(), nil), nil
	}
	if !contains(v.tools, st.Name) {
		return g.fitOutput(ref.full, refusal("FORBIDDEN", notAvailable(st.Name, m, v), m, c.handle, v)), nil
	}
	srv, name, _ := workflow.SplitUpstream(st.Upstream)
	return g.forward(srv, name, m.HandleKey, ref.keepHandle, nil, ref.full)(c.ctx, c.req)
}

// fitOutput makes the gate's own error result fit a tool with an output
// schema: clients check structuredContent against it (error results
// included), so the gate's structured answer moves to
// _meta["stategate/error"].
func (g *Gate) fitOutput(t mcp.Tool, res *mcp.CallToolResult) *mcp.CallToolResult {
	if t.OutputSchema.Type == "" && t.RawOutputSchema == nil || res == nil || res.StructuredContent == nil {
		return res
	}
	out := *res
	meta := &mcp.Meta{}
	if res.Meta != nil {
		c := *res.Meta
		c.AdditionalFields = maps.Clone(res.Meta.AdditionalFields)
		meta = &c
	}
	meta.SetMetaField("stategate/error", res.StructuredContent)
	out.Meta, out.StructuredContent = meta, nil
	return &out
}

// passTools are the tools of servers that expose them, which no workflow
// names: listed always, forwarded as they are.
// A tool that two servers expose is the first server's (by name); the
// others' are in clashes, by tool name.
func (g *Gate) passTools(us upstreamSet, named map[string]bool) (out map[string]*toolRef, clashes map[string]string) {
	out, clashes = map[string]*toolRef{}, map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(us.servers)) {
		s := us.servers[name]
		if s.Expose != "always" {
			continue
		}
		for _, t := range s.Tools {
			if named[name+"/"+t.Name] {
				continue
			}
			ref := &toolRef{kind: passTool, server: name, full: t, compact: t}
			if first, dup := out[t.Name]; dup {
				clashes[t.Name] = fmt.Sprintf("%s and %s", ref.owner(), first.owner())
				continue
			}
			out[t.Name] = ref
		}
	}
	return out, clashes
}

// CheckUpstreams checks workflows' upstream tools against the servers
// (as they listed their tools): a binding to a server that is not
// configured, or down, or to a tool it does not have; a tool name that an
// exposed server's tool and a workflow's tool share; an input schema
// given by a machine (meta.tool.inputSchema) that the upstream's breaks:
// a property the upstream requires that it lacks, or types that differ.
// Each problem is one line, naming the workflow's file.
func CheckUpstreams(ws []*workflow.Workflow, servers []upstream.ServerStatus) []string {
	us := upstreamSet{servers: map[string]upstream.ServerStatus{}}
	for _, s := range servers {
		us.servers[s.Name] = s
	}
	var out []string
	where := func(m *workflow.Workflow) string { return cmp.Or(m.File, m.ID) }
	known := func(m *workflow.Workflow, ref, what string) (mcp.Tool, bool) {
		srv, name, _ := workflow.SplitUpstream(ref)
		s, ok := us.servers[srv]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: %s binds %s: there is no server %s in the upstreams file", where(m), what, ref, srv))
		case !s.Up && len(s.Tools) == 0:
			out = append(out, fmt.Sprintf("%s: %s binds %s: the server %s is down (%s)", where(m), what, ref, srv, s.Err))
		default:
			if t, ok := us.tool(ref); ok {
				return t, true
			}
			out = append(out, fmt.Sprintf("%s: %s binds %s: the server %s has no tool %s", where(m), what, ref, srv, name))
		}
		return mcp.Tool{}, false
	}
	named := map[string]bool{}
	names := map[string]string{} // tool name -> workflow file
	for _, m := range ws {
		for _, n := range m.ToolNames() {
			names[n] = where(m)
		}
		for _, t := range m.Tools {
			if t.Upstream == "" {
				continue
			}
			named[t.Upstream] = true
			def, ok := known(m, t.Upstream, "event "+t.Event)
			if ok && t.Given.Schema {
				for _, p := range schemaBreaks(def, t.Schema) {
					out = append(out, fmt.Sprintf("%s: event %s: meta.tool.inputSchema breaks %s's: %s", where(m), t.Event, t.Upstream, p))
				}
			}
		}
		for _, st := range m.StateTools {
			named[st.Upstream] = true
			var states []string
			for _, n := range st.States {
				states = append(states, n.PathString())
			}
			known(m, st.Upstream, "state "+strings.Join(states, ", ")+" (meta.tools)")
		}
	}
	for _, s := range servers {
		if s.Expose != "always" {
			continue
		}
		for _, t := range s.Tools {
			if f, taken := names[t.Name]; taken && !named[s.Name+"/"+t.Name] {
				out = append(out, fmt.Sprintf("%s: tool %s is also a tool of the upstream server %s, which exposes its tools", f, t.Name, s.Name))
			}
		}
	}
	return out
}

// schemaBreaks compares an upstream tool's input schema with the one a
// machine gives in its place: the properties the upstream requires must
// be there, and a property both type must have the same type.
func schemaBreaks(up mcp.Tool, given map[string]any) []string {
	var us struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	raw := up.RawInputSchema
	if raw == nil {
		raw, _ = json.Marshal(up.InputSchema)
	}
	_ = json.Unmarshal(raw, &us)
	props, _ := given["properties"].(map[string]any)
	var out []string
	for _, r := range us.Required {
		if _, ok := props[r]; !ok {
			out = append(out, fmt.Sprintf("it has no property %s, which the upstream requires", r))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(props)) {
		p, _ := props[name].(map[string]any)
		u, ok := us.Properties[name]
		if !ok || p["type"] == nil || u.Type == nil {
			continue
		}
		if a, b := fmt.Sprint(p["type"]), fmt.Sprint(u.Type); a != b {
			out = append(out, fmt.Sprintf("property %s is of type %s, and the upstream's of type %s", name, a, b))
		}
	}
	return out
}
