package gate

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/stategate/stategate/store"
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

// A minted handle is handlePrefix, 128 random bits (26 characters of
// base32, rand.Text's) and a tag (16 characters: 80 bits of an HMAC of
// the rest, keyed by a secret kept in the store): a handle the start tool
// did not make is told at once, with no store lookup, and refused. Handles
// minted before the tag (handlePrefix and the random part alone) are
// taken only for instances the store holds.
const (
	randomLen = 26
	tagLen    = 16
)

// handleSecretKey is where the secret that tags minted handles is kept.
var handleSecretKey = store.Key{Machine: store.MetaMachine, Handle: "handle-secret"}

// newHandle makes a handle no one can guess, tagged with the secret.
func newHandle(secret []byte) string {
	h := handlePrefix + strings.ToLower(rand.Text())
	return h + handleTag(secret, h)
}

// handleTag is the tag of a handle's first part.
func handleTag(secret []byte, head string) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(head))
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(mac.Sum(nil)[:10]))
}

// mintedBy reports whether the start tool made a handle, with the secret:
// minted (tagged), or, for a handle of the form before tags, legacy.
func mintedBy(secret []byte, h string) (minted, legacy bool) {
	if !strings.HasPrefix(h, handlePrefix) {
		return false, false
	}
	switch len(h) {
	case len(handlePrefix) + randomLen:
		return false, true
	case len(handlePrefix) + randomLen + tagLen:
		head := h[:len(handlePrefix)+randomLen]
		return hmac.Equal([]byte(h[len(head):]), []byte(handleTag(secret, head))), false
	}
	return false, false
}

// handleSecret returns the secret that tags minted handles, made and
// stored by the first run that needs it (replicas on one store share it).
func (g *Gate) handleSecret(ctx context.Context) ([]byte, error) {
	g.secretMu.Lock()
	defer g.secretMu.Unlock()
	if g.secret != nil {
		return g.secret, nil
	}
	st := g.inst.Store()
	for range 3 {
		rec, _, err := st.Load(ctx, handleSecretKey)
		if err == nil {
			var v struct {
				Secret []byte `json:"secret"`
			}
			if err := json.Unmarshal(rec.Snapshot, &v); err != nil || len(v.Secret) < 32 {
				return nil, fmt.Errorf("the store's handle secret is damaged: %v", err)
			}
			g.secret = v.Secret
			return g.secret, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		secret := make([]byte, 32)
		_, _ = rand.Read(secret)
		data, _ := json.Marshal(map[string]any{"secret": secret})
		if _, err := st.Save(ctx, handleSecretKey, store.Record{Snapshot: data}, 0); err != nil && !errors.Is(err, store.ErrConflict) {
			return nil, err
		}
		// Stored, or another run stored one first: read what is there.
	}
	return nil, errors.New("the store's handle secret cannot be made")
}

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
		return modernStart(ref.full.Name, ref.m)
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
// start tool made (mintedBy).
func (g *Gate) modernHandle(ctx context.Context, m *workflow.Workflow, args map[string]any) (string, *mcp.CallToolResult) {
	key := m.ModernHandleKey()
	h, _ := args[key].(string)
	if err := workflow.CheckHandle(h); err != nil {
		return "", errorResult("INVALID_ARGUMENTS", fmt.Sprintf("INVALID_ARGUMENTS: argument %q (the %s instance) %v; %s makes one", key, m.ID, err, m.StartTool),
			map[string]any{"argument": key})
	}
	if m.HandleKey != "" {
		return h, nil
	}
	minted, err := g.mintedHandle(ctx, m, h)
	if err != nil {
		return "", errorResult("ERROR", "ERROR: "+err.Error(), nil)
	}
	if !minted {
		return "", errorResult("INVALID_ARGUMENTS", fmt.Sprintf("INVALID_ARGUMENTS: argument %q is not a handle of the %s workflow: call %s for one", key, m.ID, m.StartTool),
			map[string]any{"argument": key})
	}
	return h, nil
}

// mintedHandle reports whether the start tool made a handle of a
// workflow with no handle key (mintedBy; one made before handles were
// tagged only if the store holds its instance).
func (g *Gate) mintedHandle(ctx context.Context, m *workflow.Workflow, h string) (bool, error) {
	secret, err := g.handleSecret(ctx)
	if err != nil {
		return false, err
	}
	minted, legacy := mintedBy(secret, h)
	if legacy {
		_, _, err := g.inst.Store().Load(ctx, store.Key{Machine: m.ID, Handle: h})
		minted = err == nil
	}
	return minted, nil
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

// start starts an instance: for clients of revision 2026-07-28, one with
// a new handle (made here); for a workflow whose machine takes an input
// (meta.input), the instance the call names (its handle key's argument,
// or the session's own), with the input, in every revision. The input is
// validated; an instance stored already is refused.
func (g *Gate) start(c *call) *mcp.CallToolResult {
	m := c.w
	if !c.modern && !m.NeedsInput() {
		return errorResult("FORBIDDEN", fmt.Sprintf("FORBIDDEN: %s is for clients of protocol revision 2026-07-28, which have no sessions; this session has an instance of its own (see %s)", m.StartTool, m.StatusTool), nil)
	}
	input := c.args
	switch {
	case c.modern:
		if err := g.inst.CanCreate(c.ctx, m); err != nil {
			// Refused before the machine's entry actions run (the save
			// checks again).
			return saveFailed(m.StartTool, nil, err)
		}
		secret, err := g.handleSecret(c.ctx)
		if err != nil {
			return errorResult("ERROR", "ERROR: "+err.Error(), nil)
		}
		c.handle = newHandle(secret)
		if m.HandleKey != "" {
			c.handle = strings.TrimPrefix(c.handle, handlePrefix)
		}
	default:
		var bad *mcp.CallToolResult
		if c.handle, bad = g.handleOf(c); bad != nil {
			return bad
		}
		if m.HandleKey != "" {
			input = maps.Clone(input)
			delete(input, m.HandleKey)
		}
	}
	if err := m.ValidateInput(input); err != nil {
		return errorResult("INVALID_ARGUMENTS", fmt.Sprintf("INVALID_ARGUMENTS: the input of %s: %v", m.StartTool, err), map[string]any{"tool": m.StartTool})
	}
	h, bad := g.hold(c)
	if bad != nil {
		return bad
	}
	defer h.Release()
	saved, err := h.Start(c.ctx, input, c.entry(m.StartTool))
	var ee *workflow.EventError
	switch {
	case errors.Is(err, workflow.ErrStarted):
		in, lerr := h.Load(c.ctx)
		if lerr != nil {
			return errorResult("ERROR", "ERROR: "+lerr.Error(), nil)
		}
		v := g.view(in)
		return refusal("FORBIDDEN", fmt.Sprintf("%s %s is started already, in state %s (%s)", m.ID, c.handle, workflow.StateString(in.Snapshot), in.Snapshot.Status), m, c.handle, g.seen(v, c.principal))
	case errors.As(err, &ee) && errors.Is(err, workflow.ErrFailed):
		return errorResult("ERROR", fmt.Sprintf("ERROR: %s failed: the %s workflow did not start with this input: %v. Nothing was stored", m.StartTool, m.ID, ee.Cause),
			map[string]any{"tool": m.StartTool, "message": ee.Cause.Error()})
	case err != nil:
		return saveFailed(m.StartTool, m.NotStartedSnapshot(), err)
	}
	verb := "is"
	if m.NeedsInput() {
		verb = "is now"
	}
	res := report(m, c.handle, g.seen(g.view(saved), c.principal), nil, verb)
	if c.modern {
		res.Content = append(res.Content, mcp.NewTextContent(fmt.Sprintf("Pass %s: %q to the %s tools to act on this instance. Anyone holding the handle can drive it.", m.ModernHandleKey(), c.handle, m.ID)))
	}
	return res
}

// protocolOf is the protocol revision a request came in with, for the
// audit trail.
func protocolOf(ctx context.Context) string { return server.RequestProtocolVersion(ctx) }

// staticList is the tool list of revision 2026-07-28: the host's own
// tools, and every tool of the gate's in its modern form.
func (g *Gate) staticList(tools []mcp.Tool) []mcp.Tool {
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
