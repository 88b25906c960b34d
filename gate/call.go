package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"stategate/interp"
	"stategate/store"
	"stategate/xstate"
)

// maxSaveRetries bounds the retries of a call whose save found the
// instance changed by someone else (another process, an operator).
const maxSaveRetries = 5

// handle is the handler of every tool: it finds what the tool stands for
// and gates the call on the instance's state.
func (g *Gate) handle(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	g.activity.Add(1)
	res, err := g.handleTool(ctx, req)
	if res != nil && res.StructuredContent != nil {
		// Encoded here, faster than mcp-go would.
		if raw, err := interp.AppendJSON(nil, res.StructuredContent); err == nil {
			res.RawStructuredContent, res.StructuredContent = raw, nil
		}
	}
	return res, err
}

func (g *Gate) handleTool(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	name := req.Params.Name
	ref, ok := g.lookup(name)
	if !ok {
		return errorResult("UNKNOWN", fmt.Sprintf("UNKNOWN: no tool named %s is served", name), nil), nil
	}
	args, _ := req.Params.Arguments.(map[string]any)
	if req.Params.Arguments != nil && args == nil {
		return errorResult("INVALID_ARGUMENTS", "INVALID_ARGUMENTS: the arguments must be an object", nil), nil
	}
	m := ref.m
	s := g.sessionOf(ctx)
	handle := g.instanceOf(s, m)
	if m.HandleKey != "" {
		h, _ := args[m.HandleKey].(string)
		if h == "" {
			return errorResult("INVALID_ARGUMENTS", fmt.Sprintf("INVALID_ARGUMENTS: argument %q (the %s instance) is required and must be a non-empty string", m.HandleKey, m.ID), nil), nil
		}
		handle = h
		if s != nil && g.useHandle(s, m, h) {
			defer g.refreshSession(context.WithoutCancel(ctx), s)
		}
	}
	switch ref.kind {
	case statusTool:
		return g.status(ctx, m, handle)
	case resetTool:
		return g.reset(ctx, m, handle)
	}
	return g.callEvent(ctx, ref.tool, handle, args)
}

// callEvent sends the tool's event to the instance: refused (FORBIDDEN)
// when the tool is not allowed now, REJECTED when the machine does not
// take the event, an error when its code fails; else the new snapshot is
// stored before the answer.
func (g *Gate) callEvent(ctx context.Context, t *Tool, handle string, args map[string]any) (*mcp.CallToolResult, error) {
	m := t.machine
	unlock := g.locks.lock(instanceKey(m, handle))
	defer unlock()
	for attempt := 0; ; attempt++ {
		in, err := g.load(ctx, m, handle)
		if err != nil {
			return errorResult("ERROR", "ERROR: "+err.Error(), nil), nil
		}
		snap := in.snap
		if !contains(g.view(in).tools, t.Name) {
			return refusal("FORBIDDEN", fmt.Sprintf("%s is not available in state %s", t.Name, stateString(snap)), m, handle, g.view(in)), nil
		}
		if err := validate(t, args); err != nil {
			return errorResult("INVALID_ARGUMENTS", "INVALID_ARGUMENTS: "+err.Error(), map[string]any{"tool": t.Name}), nil
		}
		ev := eventOf(t.Event, args, m.HandleKey)
		if ok, err := snap.Can(ev); err != nil || !ok {
			why := fmt.Sprintf("the %s workflow does not take %s with these arguments in state %s", m.ID, t.Event, stateString(snap))
			if err != nil {
				why += ": " + err.Error()
			}
			return refusal("REJECTED", why, m, handle, g.view(in)), nil
		}
		out := g.step(ctx, in, ev, nil)
		if out.crash != nil {
			return errorResult("ERROR", fmt.Sprintf("ERROR: %s failed: %v (the instance keeps its state %s)", t.Name, out.crash, stateString(snap)),
				map[string]any{"error": "ERROR", "message": out.crash.Error(), "state": snap.Value()}), nil
		}
		next, emitted := out.snap, out.emitted
		if next.Status == interp.StatusError && snap.Status != interp.StatusError {
			msg := "the machine failed"
			if err := next.Err(); err != nil {
				msg = err.Error()
			}
			return errorResult("ERROR", fmt.Sprintf("ERROR: %s failed: %s (the instance keeps its state %s)", t.Name, msg, stateString(snap)),
				map[string]any{"error": "ERROR", "message": msg, "state": snap.Value()}), nil
		}
		audit := &store.AuditEntry{Tool: t.Name, Event: ev.Object(), Session: sessionID(ctx)}
		saved, err := g.save(ctx, in, next, out.timers, audit)
		if errors.Is(err, store.ErrConflict) && attempt < maxSaveRetries {
			continue
		}
		if err != nil {
			return errorResult("ERROR", "ERROR: cannot store the instance: "+err.Error(), nil), nil
		}
		after := g.view(saved)
		g.refresh(context.WithoutCancel(ctx), m, handle)
		return success(m, handle, after, emitted), nil
	}
}

// status answers the status tool.
func (g *Gate) status(ctx context.Context, m *Machine, handle string) (*mcp.CallToolResult, error) {
	in, err := g.load(ctx, m, handle)
	if err != nil {
		return errorResult("ERROR", "ERROR: "+err.Error(), nil), nil
	}
	res := success(m, handle, g.view(in), nil)
	sc := res.StructuredContent.(map[string]any)
	if trail, err := g.store.Audit(ctx, instanceKey(m, handle), 5); err == nil && len(trail) > 0 {
		sc["recent"] = trail
	}
	if len(in.timers) > 0 {
		sc["timers"] = in.timers
	}
	if in.migrated != nil {
		sc["migrated"] = in.migrated
	}
	if lerr := g.loadError(m); lerr != nil {
		public := xstate.PublicError(lerr) // never a line of the file
		sc["fileError"] = public
		res.Content = append(res.Content, mcp.NewTextContent("The machine file has an error; its last good version is served: "+public))
	}
	return res, nil
}

// reset starts an instance afresh; it is allowed only once the instance is
// done or failed.
func (g *Gate) reset(ctx context.Context, m *Machine, handle string) (*mcp.CallToolResult, error) {
	unlock := g.locks.lock(instanceKey(m, handle))
	defer unlock()
	in, err := g.load(ctx, m, handle)
	if err != nil {
		return errorResult("ERROR", "ERROR: "+err.Error(), nil), nil
	}
	snap := in.snap
	before := g.view(in)
	if !contains(before.tools, m.ResetTool) {
		return refusal("FORBIDDEN", fmt.Sprintf("%s is allowed only once the workflow is done or failed; it is %s in state %s", m.ResetTool, snap.Status, stateString(snap)), m, handle, before), nil
	}
	fresh, timers, err := g.fresh(ctx, m)
	if err != nil {
		return errorResult("ERROR", "ERROR: "+err.Error(), nil), nil
	}
	saved, err := g.save(ctx, in, fresh, timers, &store.AuditEntry{Tool: m.ResetTool, Session: sessionID(ctx)})
	if err != nil {
		return errorResult("ERROR", "ERROR: cannot store the instance: "+err.Error(), nil), nil
	}
	after := g.view(saved)
	g.refresh(context.WithoutCancel(ctx), m, handle)
	return success(m, handle, after, nil), nil
}

// allows reports whether an instance lists an event's tool now (viewOf's
// rule for one tool).
func allows(s *interp.Snapshot, t *Tool) bool {
	if s.Status != interp.StatusActive {
		return false
	}
	ev, probe := interp.ProbeEvent(t.Event)
	ok, _ := s.Can(ev)
	return ok || probe.Read()
}

// eventOf makes the event {type: E, ...arguments}, without the handle.
func eventOf(typ string, args map[string]any, handleKey string) interp.Event {
	var data map[string]any
	if len(args) > 0 {
		data = maps.Clone(args)
		delete(data, "type")
		if handleKey != "" {
			delete(data, handleKey)
		}
		if len(data) == 0 {
			data = nil
		}
	}
	return interp.Event{Type: typ, Data: data}
}

func validate(t *Tool, args map[string]any) error {
	var inst any = map[string]any{}
	if plainJSON(args) {
		inst = args
	} else if args != nil {
		// The validator wants plain JSON values.
		data, err := json.Marshal(args)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &inst); err != nil {
			return err
		}
	}
	if err := t.schema.Validate(inst); err != nil {
		return fmt.Errorf("the arguments of %s do not match its input schema: %s", t.Name, schemaError(err))
	}
	return nil
}

// plainJSON reports whether v holds only the values encoding/json decodes
// to (as arguments that came over the wire do), which the validator takes
// as they are.
func plainJSON(v any) bool {
	switch x := v.(type) {
	case nil, bool, string, float64, json.Number:
		return true
	case map[string]any:
		if x == nil {
			return false
		}
		for _, e := range x {
			if !plainJSON(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range x {
			if !plainJSON(e) {
				return false
			}
		}
		return true
	}
	return false
}

// schemaError renders a validation error without the schema's URL.
func schemaError(err error) string {
	lines := strings.Split(err.Error(), "\n")
	var out []string
	for _, l := range lines[1:] {
		if l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "-")); l != "" {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return lines[0]
	}
	return strings.Join(out, "; ")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// stateString renders a state value for messages: "review", or
// {"a":"x","b":"y"}.
func stateString(s *interp.Snapshot) string {
	v := s.Value()
	if str, ok := v.(string); ok {
		return str
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func textResult(text string, structured any, isError bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Content:           []mcp.Content{mcp.NewTextContent(text)},
		StructuredContent: structured,
		IsError:           isError,
	}
}

func errorResult(code, text string, structured map[string]any) *mcp.CallToolResult {
	if structured == nil {
		structured = map[string]any{}
	}
	if _, ok := structured["error"]; !ok {
		structured["error"] = code
	}
	return textResult(text, structured, true)
}

// refusal is a FORBIDDEN or REJECTED result: it names the state and the
// tools allowed now, and the machine does not move.
func refusal(code, why string, m *Machine, handle string, v view) *mcp.CallToolResult {
	text := fmt.Sprintf("%s: %s. Allowed now: %s.", code, why, joinTools(v.tools))
	return textResult(text, map[string]any{
		"error": code, "machine": m.ID, "handle": handle, "state": v.snap.Value(), "allowed": v.tools,
	}, true)
}

// success reports an instance after a call: its state, status, context,
// output when done, and the tools it allows now.
func success(m *Machine, handle string, v view, emitted []map[string]any) *mcp.CallToolResult {
	s := v.snap
	sc := map[string]any{
		"machine": m.ID, "handle": handle, "state": s.Value(), "status": s.Status.String(),
		"context": s.Context, "tools": v.tools,
	}
	if s.Status == interp.StatusDone {
		sc["output"] = s.Output()
	}
	if s.Status == interp.StatusError && s.Err() != nil {
		sc["error"] = s.Err().Error()
	}
	if len(emitted) > 0 {
		sc["emitted"] = emitted
	}
	text := fmt.Sprintf("%s %s is now in state %s (%s). Tools available now: %s.", m.ID, handle, stateString(s), s.Status, joinTools(v.tools))
	if s.Status == interp.StatusDone {
		out, _ := json.Marshal(s.Output())
		text += " Output: " + string(out) + "."
	}
	return textResult(text, sc, false)
}

// sessionID names the MCP session of a request, "" when none.
func sessionID(ctx context.Context) string {
	if cs := server.ClientSessionFromContext(ctx); cs != nil {
		return cs.SessionID()
	}
	return ""
}
