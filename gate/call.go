package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stategate/stategate/internal/jsonenc"
	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
)

// handle is the handler of every tool: it finds what the tool stands for
// and gates the call on the instance's state.
func (g *Gate) handle(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	g.activity.Add(1)
	res, err := g.handleTool(ctx, req)
	if res != nil && res.StructuredContent != nil {
		// Encoded here, faster than mcp-go would.
		if raw, err := jsonenc.Append(nil, res.StructuredContent); err == nil {
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
	args, bad := toolArgs(req)
	if bad != nil {
		return bad, nil
	}
	m := ref.m
	if ref.kind == startTool {
		if !modern(ctx) {
			return errorResult("FORBIDDEN", fmt.Sprintf("FORBIDDEN: %s is for clients of protocol revision 2026-07-28, which have no sessions; this session has an instance of its own (see %s)", name, m.StatusTool), nil), nil
		}
		return g.start(ctx, m)
	}
	handle, bad := g.handleOf(ctx, m, args)
	if bad != nil {
		return bad, nil
	}
	args, req = withoutModernHandle(ctx, m, args, req)
	switch ref.kind {
	case stateTool:
		return g.callState(ctx, ref, handle, req)
	case statusTool:
		return g.status(ctx, m, handle)
	case resetTool:
		return g.reset(ctx, m, handle)
	}
	return g.callEvent(ctx, ref.tool, handle, args)
}

// handleOf returns the handle of the instance a call acts on: the handle
// argument for a workflow with a handle key (which the session then sees;
// it is told if its tool list changes), else the session's own instance
// or the shared one. bad answers an invalid handle.
func (g *Gate) handleOf(ctx context.Context, m *Workflow, args map[string]any) (handle string, bad *mcp.CallToolResult) {
	s := g.sessionOf(ctx)
	if modern(ctx) {
		if s != nil {
			s.modern.Store(true)
		}
		return modernHandle(m, args)
	}
	if m.HandleKey == "" {
		return g.instanceOf(s, m), nil
	}
	h, _ := args[m.HandleKey].(string)
	if err := CheckHandle(h); err != nil {
		return "", errorResult("INVALID_ARGUMENTS", fmt.Sprintf("INVALID_ARGUMENTS: argument %q (the %s instance) %v", m.HandleKey, m.ID, err),
			map[string]any{"argument": m.HandleKey})
	}
	if s != nil && g.useHandle(s, m, h) {
		g.refreshSession(context.WithoutCancel(ctx), s)
	}
	return h, nil
}

// callEvent sends the tool's event to the instance: refused (FORBIDDEN)
// when the tool is not allowed now, REJECTED when the machine does not
// take the event, an error when its code fails; else the new snapshot is
// stored before the answer.
func (g *Gate) callEvent(ctx context.Context, t *Tool, handle string, args map[string]any) (*mcp.CallToolResult, error) {
	m := t.machine
	unlock := g.inst.locks.lock(instanceKey(m, handle))
	defer unlock()
	ev := eventOf(t.Event, args, m.HandleKey)
	check := func(in *instance) error {
		if !contains(g.view(in).tools, t.Name) {
			return &refused{res: refusal("FORBIDDEN", fmt.Sprintf("%s is not available in state %s", t.Name, stateString(in.snap)), m, handle, g.view(in))}
		}
		if err := validate(t, args); err != nil {
			return &refused{res: errorResult("INVALID_ARGUMENTS", "INVALID_ARGUMENTS: "+err.Error(), map[string]any{"tool": t.Name})}
		}
		return nil
	}
	saved, emitted, err := g.inst.apply(ctx, m, handle, ev, &store.AuditEntry{Tool: t.Name, Event: ev.Object(), Session: g.sessionNameOf(ctx), Protocol: protocolOf(ctx)}, check)
	if err != nil {
		return g.eventFailed(t.Name, t.Event, m, handle, err), nil
	}
	return success(m, handle, g.view(saved), emitted), nil
}

// refused is a check's refusal of a call, with the answer to give.
type refused struct{ res *mcp.CallToolResult }

func (r *refused) Error() string { return "refused" }

// eventFailed answers a call whose event was refused, rejected or failed,
// or whose new state could not be stored.
func (g *Gate) eventFailed(tool, event string, m *Workflow, handle string, err error) *mcp.CallToolResult {
	var r *refused
	var ee *eventError
	var se *saveError
	switch {
	case errors.As(err, &r):
		return r.res
	case errors.As(err, &ee) && errors.Is(err, ErrRejected):
		why := fmt.Sprintf("the %s workflow does not take %s with these arguments in state %s", m.ID, event, stateString(ee.in.snap))
		if ee.cause != nil {
			why += ": " + ee.cause.Error()
		}
		return refusal("REJECTED", why, m, handle, g.view(ee.in))
	case errors.As(err, &ee):
		snap := ee.in.snap
		return errorResult("ERROR", fmt.Sprintf("ERROR: %s failed: %v (the instance keeps its state %s)", tool, ee.cause, stateString(snap)),
			map[string]any{"error": "ERROR", "message": ee.cause.Error(), "state": snap.Value()})
	case errors.As(err, &se):
		return saveFailed(tool, se.in.snap, se.err)
	}
	return errorResult("ERROR", "ERROR: "+err.Error(), nil)
}

// status answers the status tool.
func (g *Gate) status(ctx context.Context, m *Workflow, handle string) (*mcp.CallToolResult, error) {
	in, err := g.inst.load(ctx, m, handle)
	if err != nil {
		return errorResult("ERROR", "ERROR: "+err.Error(), nil), nil
	}
	res := report(m, handle, g.view(in), nil, "is")
	sc := res.StructuredContent.(map[string]any)
	if trail, err := g.inst.store.Audit(ctx, instanceKey(m, handle), 5); err == nil && len(trail) > 0 {
		sc["recent"] = trail
	}
	if len(in.timers) > 0 {
		sc["timers"] = in.timers
	}
	if in.migrated != nil {
		sc["migrated"] = in.migrated
	}
	if doubt, err := g.inst.inDoubt(ctx, m, handle); err == nil && len(doubt) > 0 {
		list := make([]map[string]any, len(doubt))
		for i, e := range doubt {
			list[i] = map[string]any{"tool": e.Tool, "arguments": e.Intent.Arguments, "event": e.Intent.Event, "time": e.Time, "version": e.Version}
		}
		sc["inDoubt"] = list
		res.Content = append(res.Content, mcp.NewTextContent(fmt.Sprintf(
			"In doubt: %d call(s) of a bound tool began and never ended (the server stopped during them, latest %s at %s): their side effects may have happened, and the workflow did not move. Check before calling again.",
			len(doubt), doubt[len(doubt)-1].Tool, doubt[len(doubt)-1].Time.Format(time.RFC3339))))
	}
	if g.opts.InspectURL != "" {
		link := InspectLink(g.opts.InspectURL, m.ID, handle)
		sc["inspect"] = link
		res.Content = append(res.Content, mcp.NewTextContent("See it in a browser (its diagram and audit trail): "+link))
	}
	if lerr := g.loadError(m); lerr != nil {
		public := g.publicError(lerr)
		sc["fileError"] = public
		res.Content = append(res.Content, mcp.NewTextContent("The machine file has an error; its last good version is served: "+public))
	}
	return res, nil
}

// InspectLink is the address of an instance's page under an inspector's
// base address (Options.InspectURL): base/WORKFLOW/HANDLE, each part
// path-escaped.
func InspectLink(base, workflow, handle string) string {
	return strings.TrimSuffix(base, "/") + "/" + url.PathEscape(workflow) + "/" + url.PathEscape(handle)
}

// reset starts an instance afresh; it is allowed only once the instance is
// done or failed.
func (g *Gate) reset(ctx context.Context, m *Workflow, handle string) (*mcp.CallToolResult, error) {
	unlock := g.inst.locks.lock(instanceKey(m, handle))
	defer unlock()
	in, err := g.inst.load(ctx, m, handle)
	if err != nil {
		return errorResult("ERROR", "ERROR: "+err.Error(), nil), nil
	}
	snap := in.snap
	before := g.view(in)
	if !contains(before.tools, m.ResetTool) {
		return refusal("FORBIDDEN", fmt.Sprintf("%s is allowed only once the workflow is done or failed; it is %s in state %s", m.ResetTool, snap.Status, stateString(snap)), m, handle, before), nil
	}
	fresh, timers, err := g.inst.fresh(ctx, m)
	if err != nil {
		return errorResult("ERROR", "ERROR: "+err.Error(), nil), nil
	}
	saved, err := g.inst.save(ctx, in, fresh, timers, &store.AuditEntry{Tool: m.ResetTool, Session: g.sessionNameOf(ctx), Protocol: protocolOf(ctx)})
	if err != nil {
		return saveFailed(m.ResetTool, snap, err), nil
	}
	after := g.view(saved)
	g.refresh(context.WithoutCancel(ctx), m, handle)
	return success(m, handle, after, nil), nil
}

// saveFailed answers a call whose new state could not be stored, saying
// what the agent may do: the instance keeps its state (snap), except when
// the store cannot tell (ErrOutcomeUnknown).
func saveFailed(tool string, snap *interp.Snapshot, err error) *mcp.CallToolResult {
	code, text := "ERROR", fmt.Sprintf("ERROR: %s was not done: the new state cannot be stored (%v); the instance keeps its state %s", tool, err, stateString(snap))
	switch {
	case errors.Is(err, store.ErrOutcomeUnknown):
		code, text = "OUTCOME_UNKNOWN", fmt.Sprintf("OUTCOME_UNKNOWN: the store failed while saving %s, so whether it was done is unknown (%v). The server takes no more changes until it is restarted; then the status tool tells where the instance is", tool, err)
	case errors.Is(err, store.ErrDiskFailed):
		text = fmt.Sprintf("ERROR: %s was not done: the store failed earlier and takes no more changes until the server is restarted; the instance keeps its state %s", tool, stateString(snap))
	case errors.Is(err, store.ErrNoSpace):
		code, text = "NO_SPACE", fmt.Sprintf("NO_SPACE: %s was not done: the server's disk is nearly full; the instance keeps its state %s. Try again once space is freed", tool, stateString(snap))
	case errors.Is(err, store.ErrTooLarge):
		code, text = "TOO_LARGE", fmt.Sprintf("TOO_LARGE: %s was not done: the instance's new state would be too large to store (%v); the instance keeps its state %s", tool, err, stateString(snap))
	}
	return errorResult(code, text, map[string]any{"state": snap.Value()})
}

// allows reports whether an instance lists an event's tool now (viewOf's
// rule for one tool).
func allows(s *interp.Snapshot, event string) bool {
	if s.Status != interp.StatusActive {
		return false
	}
	ev, probe := interp.ProbeEvent(event)
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

// maxErrorText bounds the text of an error result, and each string of its
// structured content: an error that quotes a huge value (a key, an
// argument) does not flood the agent's context.
const maxErrorText = 1024

// brief cuts s to maxErrorText bytes (on a rune boundary), saying how much
// was left out.
func brief(s string) string {
	if len(s) <= maxErrorText {
		return s
	}
	cut := maxErrorText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes more)", s[:cut], len(s)-cut)
}

func errorResult(code, text string, structured map[string]any) *mcp.CallToolResult {
	if structured == nil {
		structured = map[string]any{}
	}
	text = brief(text)
	for k, v := range structured {
		if str, ok := v.(string); ok {
			structured[k] = brief(str)
		}
	}
	if _, ok := structured["error"]; !ok {
		structured["error"] = code
	}
	return textResult(text, structured, true)
}

// refusal is a FORBIDDEN or REJECTED result: it names the state and the
// tools allowed now, and the machine does not move.
func refusal(code, why string, m *Workflow, handle string, v view) *mcp.CallToolResult {
	text := fmt.Sprintf("%s: %s. Allowed now: %s.", code, why, joinTools(v.tools))
	return textResult(text, map[string]any{
		"error": code, "machine": m.ID, "handle": handle, "state": v.snap.Value(), "allowed": v.tools,
	}, true)
}

// success reports an instance after a call moved it: its state, status,
// context, output when done, and the tools it allows now.
func success(m *Workflow, handle string, v view, emitted []map[string]any) *mcp.CallToolResult {
	return report(m, handle, v, emitted, "is now")
}

// report reports an instance; verb says whether it moved ("is now") or is
// only read ("is").
func report(m *Workflow, handle string, v view, emitted []map[string]any, verb string) *mcp.CallToolResult {
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
	text := fmt.Sprintf("%s %s %s in state %s (%s). Tools available now: %s.", m.ID, handle, verb, stateString(s), s.Status, joinTools(v.tools))
	if s.Status == interp.StatusDone {
		out, _ := json.Marshal(s.Output())
		text += " Output: " + string(out) + "."
	}
	return textResult(text, sc, false)
}

// sessionNameOf names the MCP session of a request as it is shown and
// stored (never its id), "" when none.
func (g *Gate) sessionNameOf(ctx context.Context) string {
	if s := g.sessionOf(ctx); s != nil {
		return s.name
	}
	return ""
}

// MaxArguments bounds the size of a call's arguments, as JSON: the event
// they make goes into the instance's audit trail (whose entries the store
// bounds at 4 MiB) and often into its context.
const MaxArguments = 1 << 20

// jsonSize estimates the size of a JSON-like value as JSON, from above for
// strings (escapes aside); it stops counting past limit.
func jsonSize(v any, limit int) int {
	switch x := v.(type) {
	case string:
		return len(x) + 2
	case map[string]any:
		n := 2
		for k, e := range x {
			if n += len(k) + 4 + jsonSize(e, limit-n); n > limit {
				return n
			}
		}
		return n
	case []any:
		n := 2
		for _, e := range x {
			if n += 1 + jsonSize(e, limit-n); n > limit {
				return n
			}
		}
		return n
	}
	return 24 // a number, a boolean, null
}

// MaxHandle bounds the length of a handle, in bytes.
const MaxHandle = 256

// ErrBadHandle is wrapped by CheckHandle's errors.
var ErrBadHandle = errors.New("invalid handle")

// CheckHandle reports whether a string may be a handle: 1 to MaxHandle
// bytes of UTF-8 text, with no control characters.
func CheckHandle(h string) error {
	switch {
	case h == "":
		return fmt.Errorf("%w: is required and must be a non-empty string", ErrBadHandle)
	case len(h) > MaxHandle:
		return fmt.Errorf("%w: must be at most %d bytes (it has %d)", ErrBadHandle, MaxHandle, len(h))
	case !utf8.ValidString(h):
		return fmt.Errorf("%w: must be valid UTF-8", ErrBadHandle)
	}
	for i, r := range h {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return fmt.Errorf("%w: must be printable text (a control character at byte %d)", ErrBadHandle, i)
		}
	}
	return nil
}

// handleUnknown answers a call to a tool that is not served (see the
// BeforeCallTool hook in New): UNKNOWN, with the tools the caller may
// call now.
func (g *Gate) handleUnknown(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	name := unknownTool
	if req.Params.Meta != nil {
		if n, ok := req.Params.Meta.AdditionalFields[metaRequestedTool].(string); ok {
			name = n
		}
	}
	var now []string
	for _, sh := range g.shownTo(ctx, g.sessionOf(ctx)) {
		now = append(now, sh.tools...)
	}
	slices.Sort(now)
	return textResult(fmt.Sprintf("UNKNOWN: no tool named %q is served. Tools available now: %s.", name, joinTools(now)),
		map[string]any{"error": "UNKNOWN", "tool": name, "allowed": now}, true), nil
}
