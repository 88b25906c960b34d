package workflow

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/xstate"
)

// Workflow is a machine served as a workflow: its tools, built from the
// events its states name.
type Workflow struct {
	ID      string
	File    string
	Version string // content hash of its sources
	// Sources are the files it was built from: the file, its
	// implementations module, and the files they import.
	Sources []string
	// Listing hashes what clients are shown of its tools (names, titles,
	// descriptions, schemas, annotations): a reload that keeps it changes
	// no client's list.
	Listing   string
	Machine   *interp.Machine
	HandleKey string // the argument that picks the instance; "" for none

	Tools []*Tool // event tools, sorted by name
	// StateTools are the upstream tools its states list (meta.tools),
	// sorted by name.
	StateTools []*StateTool
	StatusTool string // the name of the status tool (M_status, or M__status)
	ResetTool  string // the name of the reset tool
	// StartTool starts an instance with a new handle (M_start, or
	// M__start): listed to clients of protocol revision 2026-07-28, whose
	// tool lists do not depend on the caller (see ModernHandleKey).
	StartTool string
	// Input is the schema of the input an instance starts with (the
	// machine's meta.input: an object's JSON Schema), nil when the
	// machine takes none. A machine with one starts only through its
	// start tool, which takes the input (NeedsInput).
	Input       map[string]any
	inputSchema *jsonschema.Schema
	notStarted  *interp.Snapshot // what an instance not started shows (NotStarted)
	startErr    error            // why the machine does not start without an input (none declared)
	byEvent     map[string]*Tool
	initSnap    *interp.Snapshot // the initial state, for compact descriptions
}

// Tool is the MCP tool of one event of a machine.
type Tool struct {
	Name        string
	Event       string
	Description string
	// Compact is the description while the instance is in the machine's
	// initial state (meta.tool.compactDescription), "" when none.
	Compact string
	// Title and Hints are meta.tool.title and meta.tool.annotations.
	Title  string
	Hints  map[string]bool
	Schema map[string]any // the input schema as listed
	schema *jsonschema.Schema
	// Workflow is the workflow whose tool it is.
	Workflow *Workflow

	// Upstream, when set, is the upstream tool ("server/tool") the event
	// is bound to (meta.tool.upstream): the tool is that one, forwarded,
	// and its success sends the event. OnError is the event sent, with
	// {type, error}, when it fails (meta.tool.onError).
	Upstream string
	OnError  string
	// Given says what meta.tool and the transition gave, which an
	// upstream tool's own definition yields to.
	Given Given
	// Roles are meta.tool.roles: a caller needs one of them to see and
	// call the tool (none: anyone).
	Roles []string
	// Confirm is meta.tool.confirm: what the caller's human is asked to
	// confirm before each call is taken ({argument} fills in an
	// argument), "" when nobody is asked.
	Confirm string
	// Approval is meta.tool.approval: the role of the operators who
	// approve each call before it is taken, "" when none.
	Approval string
	// Accepting are the states that take the event (their paths).
	Accepting []string
}

// Given says which parts of a tool's definition the machine gave (the
// transition's description, meta.tool's title, input schema and
// annotations), rather than defaults.
type Given struct{ Description, Title, Schema, Hints bool }

// A StateTool is an upstream tool that states list (meta.tools): it is
// listed, and forwarded, while one of them (or a descendant) is active,
// and sends no event.
type StateTool struct {
	Name     string // the upstream tool's own name
	Upstream string // "server/tool"
	States   []*interp.StateNode
}

// SplitUpstream splits an upstream tool's reference, "server/tool": a
// server name of the upstreams file and a tool name.
func SplitUpstream(ref string) (server, tool string, ok bool) {
	server, tool, ok = strings.Cut(ref, "/")
	return server, tool, ok && validServerName(server) && ValidToolName(tool)
}

// validServerName is an upstreams file's rule for server names.
func validServerName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// toolName is M_e: e is E in lower case with every character outside
// [a-z0-9_-] replaced by '_'.
func toolName(machine, event string) string {
	return sanitize(machine) + "_" + sanitize(event)
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// workflowID is the machine's XState id, else its file name.
func workflowID(m *interp.Machine, file string) string {
	if m.ID != "" && m.ID != "(machine)" {
		return m.ID
	}
	base := filepath.Base(file)
	return strings.TrimSuffix(base, filepath.Ext(base))
}

// Load loads a machine file and builds its tools. defaultHandleKey
// applies when the machine's meta sets none.
func Load(l *xstate.Loader, file, defaultHandleKey string) (*Workflow, []xstate.Diagnostic, error) {
	return LoadContext(context.Background(), l, file, defaultHandleKey)
}

// LoadContext is Load, abandoned when ctx ends (a module's top-level code
// is interrupted: xstate.Loader.LoadContext).
func LoadContext(ctx context.Context, l *xstate.Loader, file, defaultHandleKey string) (*Workflow, []xstate.Diagnostic, error) {
	m, warns, err := l.LoadContext(ctx, file)
	if err != nil {
		return nil, warns, err
	}
	var missing []xstate.Diagnostic
	for _, d := range xstate.MissingDiagnostics(file, m) {
		if d.Warning {
			warns = append(warns, d)
		} else {
			missing = append(missing, d)
		}
	}
	if len(missing) > 0 {
		return nil, warns, &xstate.LoadError{File: file, Diags: missing, Machine: m.ID}
	}
	gm, err := newWorkflow(m, workflowID(m, file), file, defaultHandleKey)
	if err != nil {
		return nil, warns, &xstate.LoadError{File: file, Diags: []xstate.Diagnostic{{File: file, Msg: err.Error()}}, Err: err}
	}
	gm.Sources = xstate.Sources(file, m)
	gm.Version = sourcesVersion(gm.Sources)
	return gm, warns, nil
}

// Options configure a workflow made in memory (New).
type Options struct {
	// ID is the workflow's id (the prefix of its tools' names); the
	// machine's id when empty.
	ID string
	// HandleKey is the argument that picks an instance, when the
	// machine's meta.handleKey names none ("": one instance per session,
	// or the shared one).
	HandleKey string
	// Version names this version of the workflow in the store and the
	// audit trail; a hash of the machine's states and events when empty.
	Version string
}

// New makes a workflow of a machine made in memory (for example by
// xstate.Loader.Parse from a config and a Registry), as Load makes one of
// a file: its tools are built from its events, and a guard, actor or
// delay it names with no implementation is an error.
func New(m *interp.Machine, o Options) (*Workflow, error) {
	var missing []string
	for _, d := range xstate.MissingDiagnostics("", m) {
		if !d.Warning {
			missing = append(missing, d.String())
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("workflow %s: %s", cmp.Or(o.ID, m.ID), strings.Join(missing, "; "))
	}
	id := cmp.Or(o.ID, workflowID(m, ""))
	w, err := newWorkflow(m, id, "", o.HandleKey)
	if err != nil {
		return nil, fmt.Errorf("workflow %s: %w", id, err)
	}
	w.Version = o.Version
	if w.Version == "" {
		h := sha256.New()
		for _, n := range m.Nodes {
			fmt.Fprintln(h, n.PathString())
		}
		fmt.Fprintln(h, m.EventTypes)
		w.Version = hex.EncodeToString(h.Sum(nil))[:16]
	}
	return w, nil
}

// listingVersion hashes what clients are shown of a machine's tools
// (names, titles, descriptions, schemas, annotations): a reload that
// keeps it tells nobody.
func listingVersion(m *Workflow) string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	_ = enc.Encode([]string{m.ID, m.HandleKey, m.StatusTool, m.ResetTool, m.StartTool})
	for _, t := range m.Tools {
		_ = enc.Encode([]any{t.Name, t.Event, t.Description, t.Compact, t.Schema, t.Title, t.Hints, t.Upstream, t.OnError, t.Roles, t.Confirm, t.Approval})
	}
	for _, t := range m.StateTools {
		var states []string
		for _, n := range t.States {
			states = append(states, n.PathString())
		}
		_ = enc.Encode([]any{t.Name, t.Upstream, states})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// sourcesVersion hashes the files a machine was built from: editing any
// of them (a helper module it imports too) makes a new version.
func sourcesVersion(files []string) string {
	h := sha256.New()
	for _, f := range files {
		data, err := xstate.ReadFile(f) // never blocks (a FIFO put in its place)
		if err != nil {
			data = []byte("\x00missing\x00") // a file gone is a change
		}
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// fileVersion hashes a file that is not a machine (a helper module).
func fileVersion(file string) string { return sourcesVersion([]string{file}) }

// toolMeta is a transition's meta.tool.
type toolMeta struct {
	Name               string
	Title              string
	CompactDescription string
	InputSchema        map[string]any
	Hints              map[string]bool // annotations: readOnlyHint, ...
	Upstream           string          // "server/tool"
	OnError            string          // the event sent when the upstream call fails
	Roles              []string        // a caller needs one of them
	Confirm            string          // a human confirms each call, asked this
	Approval           string          // an operator of this role approves each call
}

// toolHints are the annotations a machine may give a tool.
var toolHints = []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}

// ValidToolName is MCP's rule for tool names: 1 to 128 of A-Z, a-z,
// 0-9, '_', '-' and '.'.
func ValidToolName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// metaTool reads a transition's meta.tool; a field of the wrong type, or
// an unknown one (a typo would be ignored silently), is an error.
func metaTool(meta any) (toolMeta, error) {
	var tm toolMeta
	m, ok := meta.(map[string]any)
	if !ok || m["tool"] == nil {
		return tm, nil
	}
	t, ok := m["tool"].(map[string]any)
	if !ok {
		return tm, fmt.Errorf("meta.tool must be an object")
	}
	str := func(key string, v any) (string, error) {
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("meta.tool.%s must be a string", key)
		}
		return s, nil
	}
	var err error
	for _, key := range slices.Sorted(maps.Keys(t)) {
		v := t[key]
		switch key {
		case "name":
			if tm.Name, err = str(key, v); err == nil && !ValidToolName(tm.Name) {
				err = fmt.Errorf("meta.tool.name %q is not a tool name: use 1 to 128 letters, digits, '_', '-' or '.'", tm.Name)
			}
		case "title":
			tm.Title, err = str(key, v)
		case "compactDescription":
			tm.CompactDescription, err = str(key, v)
		case "inputSchema":
			var ok bool
			if tm.InputSchema, ok = v.(map[string]any); !ok {
				err = fmt.Errorf("meta.tool.inputSchema must be an object (a JSON Schema)")
			}
		case "annotations":
			a, ok := v.(map[string]any)
			if !ok {
				return tm, fmt.Errorf("meta.tool.annotations must be an object")
			}
			tm.Hints = map[string]bool{}
			for _, h := range slices.Sorted(maps.Keys(a)) {
				b, isBool := a[h].(bool)
				switch {
				case !slices.Contains(toolHints, h):
					return tm, fmt.Errorf("meta.tool.annotations.%s is not a tool annotation (they are %s; the title is meta.tool.title)", h, strings.Join(toolHints, ", "))
				case !isBool:
					return tm, fmt.Errorf("meta.tool.annotations.%s must be true or false", h)
				}
				tm.Hints[h] = b
			}
		case "upstream":
			if tm.Upstream, err = str(key, v); err == nil {
				if _, _, ok := SplitUpstream(tm.Upstream); !ok {
					err = fmt.Errorf("meta.tool.upstream %q is not SERVER/TOOL (a server of the upstreams file, and one of its tools)", tm.Upstream)
				}
			}
		case "onError":
			tm.OnError, err = str(key, v)
		case "roles":
			list, ok := v.([]any)
			if !ok || len(list) == 0 {
				return tm, fmt.Errorf("meta.tool.roles must be a list of role names, at least one")
			}
			for _, r := range list {
				name, ok := r.(string)
				if !ok || strings.TrimSpace(name) == "" || strings.ContainsAny(name, " \t\n") {
					return tm, fmt.Errorf("meta.tool.roles: %v is not a role name (a word)", r)
				}
				if !slices.Contains(tm.Roles, name) {
					tm.Roles = append(tm.Roles, name)
				}
			}
			slices.Sort(tm.Roles)
		case "confirm":
			if tm.Confirm, err = str(key, v); err == nil && strings.TrimSpace(tm.Confirm) == "" {
				err = fmt.Errorf("meta.tool.confirm must say what the human confirms (\"Pay {amount} to {payee}?\")")
			}
		case "approval":
			if tm.Approval, err = str(key, v); err == nil && (strings.TrimSpace(tm.Approval) == "" || strings.ContainsAny(tm.Approval, " \t\n")) {
				err = fmt.Errorf("meta.tool.approval must name the role of the operators who approve a call (a word)")
			}
		default:
			err = fmt.Errorf("meta.tool.%s is not a field of meta.tool (they are name, title, compactDescription, inputSchema, annotations, upstream, onError, roles, confirm and approval)", key)
		}
		if err != nil {
			return tm, err
		}
	}
	return tm, nil
}

func newWorkflow(m *interp.Machine, id, file, defaultHandleKey string) (*Workflow, error) {
	gm := &Workflow{ID: id, File: file, Machine: m, HandleKey: defaultHandleKey, byEvent: map[string]*Tool{}}
	if meta, ok := m.Root.Meta.(map[string]any); ok {
		if k, ok := meta["handleKey"].(string); ok {
			gm.HandleKey = k
		}
	}
	names := map[string]string{} // tool name -> event
	for _, ev := range m.EventTypes {
		t := &Tool{Event: ev, Workflow: gm}
		var accepting []string
		var tm toolMeta
		for _, n := range m.Nodes {
			ts := n.Transitions(ev)
			if len(ts) == 0 {
				continue
			}
			accepting = append(accepting, n.PathString())
			for _, tr := range ts {
				if t.Description == "" && tr.Description != "" {
					t.Description = tr.Description
				}
				mt, err := metaTool(tr.Meta)
				if err != nil {
					return nil, fmt.Errorf("event %s in state %s: %w", ev, n.PathString(), err)
				}
				if tm.Name == "" {
					tm.Name = mt.Name
				}
				if tm.Title == "" {
					tm.Title = mt.Title
				}
				if tm.Hints == nil {
					tm.Hints = mt.Hints
				}
				if tm.CompactDescription == "" {
					tm.CompactDescription = mt.CompactDescription
				}
				if tm.InputSchema == nil {
					tm.InputSchema = mt.InputSchema
				}
				if tm.Upstream == "" {
					tm.Upstream = mt.Upstream
				} else if mt.Upstream != "" && mt.Upstream != tm.Upstream {
					return nil, fmt.Errorf("event %s in state %s: meta.tool.upstream %q, where another transition of %s binds %q: an event is one tool", ev, n.PathString(), mt.Upstream, ev, tm.Upstream)
				}
				if tm.OnError == "" {
					tm.OnError = mt.OnError
				}
				switch {
				case tm.Roles == nil:
					tm.Roles = mt.Roles
				case mt.Roles != nil && !slices.Equal(mt.Roles, tm.Roles):
					return nil, fmt.Errorf("event %s in state %s: meta.tool.roles %v, where another transition of %s gives %v: an event is one tool", ev, n.PathString(), mt.Roles, ev, tm.Roles)
				}
				if tm.Confirm == "" {
					tm.Confirm = mt.Confirm
				}
				if tm.Approval == "" {
					tm.Approval = mt.Approval
				}
			}
		}
		t.Accepting = accepting
		t.Given = Given{Description: t.Description != "", Title: tm.Title != "", Schema: tm.InputSchema != nil, Hints: tm.Hints != nil}
		t.Name = toolName(gm.ID, ev)
		if tm.Upstream != "" {
			_, t.Name, _ = SplitUpstream(tm.Upstream)
			t.Upstream = tm.Upstream
		} else if tm.OnError != "" {
			return nil, fmt.Errorf("event %s: meta.tool.onError is for a tool bound to an upstream (meta.tool.upstream)", ev)
		}
		if tm.OnError != "" {
			if !slices.Contains(m.EventTypes, tm.OnError) {
				return nil, fmt.Errorf("event %s: meta.tool.onError names %s, which no state takes", ev, tm.OnError)
			}
			t.OnError = tm.OnError
		}
		if tm.Name != "" {
			t.Name = tm.Name
		}
		if other, dup := names[t.Name]; dup {
			return nil, fmt.Errorf("events %q and %q both make a tool named %q; give one a meta.tool.name", other, ev, t.Name)
		}
		names[t.Name] = ev
		if t.Description == "" {
			t.Description = fmt.Sprintf("Send %s to the %s workflow. Accepted in: %s.", ev, gm.ID, strings.Join(accepting, ", "))
		}
		t.Compact = tm.CompactDescription
		t.Title, t.Hints = tm.Title, tm.Hints
		t.Roles, t.Confirm, t.Approval = tm.Roles, tm.Confirm, tm.Approval
		schema, err := inputSchema(tm.InputSchema, gm.HandleKey)
		if err != nil {
			return nil, fmt.Errorf("tool %s: inputSchema: %w", t.Name, err)
		}
		t.Schema = schema
		if t.schema, err = compileSchema(t.Name, schema); err != nil {
			return nil, fmt.Errorf("tool %s: inputSchema: %w", t.Name, err)
		}
		gm.Tools = append(gm.Tools, t)
		gm.byEvent[ev] = t
	}
	sort.Slice(gm.Tools, func(i, j int) bool { return gm.Tools[i].Name < gm.Tools[j].Name })
	if err := gm.stateTools(names); err != nil {
		return nil, err
	}
	// Built-in tools yield to the machine's own: a RESET event keeps
	// M_reset, and the built-in becomes M__reset.
	builtin := func(what string) string {
		name := sanitize(gm.ID) + "_" + what
		if _, taken := names[name]; taken {
			name = sanitize(gm.ID) + "__" + what
		}
		return name
	}
	gm.StatusTool = builtin("status")
	gm.ResetTool = builtin("reset")
	gm.StartTool = builtin("start")
	if err := gm.readInput(); err != nil {
		return nil, err
	}
	init, _, err := m.Initial(nil)
	if err == nil && gm.Input == nil {
		gm.initSnap = init
	}
	if err != nil && gm.Input == nil {
		gm.startErr = err
	}
	gm.notStarted = init
	gm.Listing = listingVersion(gm)
	return gm, nil
}

// readInput reads the machine's meta.input: the JSON Schema of an object,
// the input its instances start with.
func (m *Workflow) readInput() error {
	meta, _ := m.Machine.Root.Meta.(map[string]any)
	given, ok := meta["input"]
	if !ok || given == nil {
		return nil
	}
	schema, ok := given.(map[string]any)
	if !ok {
		return fmt.Errorf("meta.input must be the JSON Schema of the input (an object's), not %T", given)
	}
	if t, ok := schema["type"]; ok && t != "object" {
		return fmt.Errorf("meta.input: the input is the start tool's arguments, an object: its type must be \"object\", not %v", t)
	}
	// Copied, so the machine's meta is not changed.
	data, err := json.Marshal(schema)
	if err != nil {
		return fmt.Errorf("meta.input: %w", err)
	}
	var own map[string]any
	if err := json.Unmarshal(data, &own); err != nil {
		return fmt.Errorf("meta.input: %w", err)
	}
	own["type"] = "object"
	if m.HandleKey != "" {
		props, _ := own["properties"].(map[string]any)
		req, _ := own["required"].([]any)
		if _, taken := props[m.HandleKey]; taken || slices.Contains(req, any(m.HandleKey)) {
			return fmt.Errorf("meta.input: handle key %q is also a property of the input: its argument picks the instance, and is not part of the input; choose another handle key (--handle-key, or the machine's meta.handleKey)", m.HandleKey)
		}
	}
	if m.inputSchema, err = compileSchema(m.StartTool, own); err != nil {
		return fmt.Errorf("meta.input: %w", err)
	}
	m.Input = own
	return nil
}

// NeedsInput reports whether the machine's instances start with an input
// (meta.input): only through the start tool, which takes it.
func (m *Workflow) NeedsInput() bool { return m.Input != nil }

// StartSchema is the input schema of the start tool: the input's
// (meta.input), or an object of no properties; with the handle key's
// argument when withHandle (clients of revisions with sessions name the
// instance they start; the start tool of revision 2026-07-28 makes its
// handle).
func (m *Workflow) StartSchema(withHandle bool) map[string]any {
	key := ""
	if withHandle {
		key = m.HandleKey
	}
	if m.Input == nil {
		s, _ := inputSchema(nil, key)
		if key == "" {
			s["properties"] = map[string]any{}
			s["additionalProperties"] = false
		}
		return s
	}
	s, err := inputSchema(m.Input, key)
	if err != nil { // (checked by readInput)
		return m.Input
	}
	return s
}

// ValidateInput checks an input against the machine's meta.input, naming
// the argument that is wrong. A workflow without meta.input takes none.
func (m *Workflow) ValidateInput(input map[string]any) error {
	if m.inputSchema == nil {
		if len(input) > 0 {
			return fmt.Errorf("the %s workflow takes no input (its machine declares no meta.input)", m.ID)
		}
		return nil
	}
	return validate(m.inputSchema, input)
}

// DefaultModernHandle is the argument that picks the instance of a
// workflow with no handle key for clients of protocol revision 2026-07-28
// (ModernHandleKey).
const DefaultModernHandle = "workflow_id"

// ModernHandleKey is the argument that picks the instance for clients of
// protocol revision 2026-07-28, which have no sessions: the handle key,
// else DefaultModernHandle (or stategate_workflow_id, when a tool of the
// machine has an argument of that name).
func (m *Workflow) ModernHandleKey() string {
	if m.HandleKey != "" {
		return m.HandleKey
	}
	for _, t := range m.Tools {
		if props, _ := t.Schema["properties"].(map[string]any); props[DefaultModernHandle] != nil {
			return "stategate_" + DefaultModernHandle
		}
	}
	return DefaultModernHandle
}

// stateTools reads the states' meta.tools: the upstream tools each state
// lists while it is active. A tool named by several states is one tool;
// its name must not be an event tool's.
func (m *Workflow) stateTools(names map[string]string) error {
	byRef := map[string]*StateTool{}
	for _, n := range m.Machine.Nodes {
		meta, _ := n.Meta.(map[string]any)
		if meta == nil || meta["tools"] == nil {
			continue
		}
		list, ok := meta["tools"].([]any)
		if !ok {
			return fmt.Errorf("state %s: meta.tools must be a list of upstream tools (\"server/tool\")", n.PathString())
		}
		for _, v := range list {
			ref, _ := v.(string)
			_, tool, ok := SplitUpstream(ref)
			if !ok {
				return fmt.Errorf("state %s: meta.tools: %v is not SERVER/TOOL (a server of the upstreams file, and one of its tools)", n.PathString(), v)
			}
			st := byRef[ref]
			if st == nil {
				if ev, taken := names[tool]; taken {
					return fmt.Errorf("state %s: meta.tools: %s is also the tool of event %s; give that one a meta.tool.name", n.PathString(), tool, ev)
				}
				for _, other := range byRef {
					if other.Name == tool {
						return fmt.Errorf("state %s: meta.tools: %s and %s are both named %s", n.PathString(), other.Upstream, ref, tool)
					}
				}
				st = &StateTool{Name: tool, Upstream: ref}
				byRef[ref] = st
				m.StateTools = append(m.StateTools, st)
			}
			if !slices.Contains(st.States, n) {
				st.States = append(st.States, n)
			}
		}
	}
	sort.Slice(m.StateTools, func(i, j int) bool { return m.StateTools[i].Name < m.StateTools[j].Name })
	return nil
}

// Active reports whether one of the tool's states is.
func (t *StateTool) Active(s *interp.Snapshot) bool {
	for _, n := range t.States {
		if s.Active(n) {
			return true
		}
	}
	return false
}

// inputSchema is the tool's schema: the one given, or an object accepting
// any properties; with a handle key, that argument is required.
func inputSchema(given map[string]any, handleKey string) (map[string]any, error) {
	schema := map[string]any{"type": "object"}
	if given != nil {
		// Copy, so the machine's meta is not changed.
		data, err := json.Marshal(given)
		if err != nil {
			return nil, err
		}
		schema = nil
		if err := json.Unmarshal(data, &schema); err != nil {
			return nil, err
		}
		if t, ok := schema["type"]; ok && t != "object" {
			return nil, fmt.Errorf("the type must be \"object\", not %v", t)
		}
		schema["type"] = "object"
		// A call sends {type: E, principal: {sub, roles}, ...arguments}:
		// an argument named type or principal would be lost to the
		// event's own.
		props, _ := schema["properties"].(map[string]any)
		if props["type"] != nil {
			return nil, errors.New(`the property "type" cannot be an argument: a call sends {type: EVENT, ...arguments}, so the event's type would replace it; name it otherwise`)
		}
		if props["principal"] != nil {
			return nil, errors.New(`the property "principal" cannot be an argument: the server sets event.principal (who calls), so an argument of that name would be replaced; name it otherwise`)
		}
	}
	if handleKey != "" {
		props, _ := schema["properties"].(map[string]any)
		req, _ := schema["required"].([]any)
		// The handle key's argument picks the instance and never reaches
		// the machine: a property of the machine's own by that name would
		// be replaced.
		if _, taken := props[handleKey]; taken || slices.Contains(req, any(handleKey)) {
			return nil, fmt.Errorf("handle key %q %w: its argument picks the instance and is not passed to the machine, so the tool's own %q would be lost; choose another handle key (--handle-key, or the machine's meta.handleKey)", handleKey, ErrHandleKeyClash, handleKey)
		}
		if props == nil {
			props = map[string]any{}
		}
		props[handleKey] = HandleProperty()
		schema["properties"] = props
		schema["required"] = append([]any{handleKey}, req...)
	}
	return schema, nil
}

// HandleProperty is the schema of a handle argument.
func HandleProperty() map[string]any {
	return map[string]any{"type": "string", "minLength": 1, "maxLength": MaxHandle, "description": "Which instance of the workflow to act on."}
}

// ErrHandleKeyClash is the error of a machine one of whose tools has an
// argument of the handle key's name (a property of its input schema).
var ErrHandleKeyClash = errors.New("is also a property of the tool's input schema")

func compileSchema(name string, schema map[string]any) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	url := "tool://" + name
	if err := c.AddResource(url, schema); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// HandleSchema is the input schema of a tool that takes nothing but the
// instance's handle (the status and reset tools): the handle key's
// argument, when the workflow has one.
func (m *Workflow) HandleSchema() map[string]any {
	s, _ := inputSchema(nil, m.HandleKey)
	return s
}

// IsInitial reports whether a snapshot is in the machine's initial
// configuration (where tools have their compact descriptions).
func (m *Workflow) IsInitial(s *interp.Snapshot) bool {
	return m.initSnap != nil && s.SameStates(m.initSnap)
}

// NotStartedSnapshot is what an instance not started shows
// (Instance.NotStarted): the machine's start without input.
func (m *Workflow) NotStartedSnapshot() *interp.Snapshot { return m.notStarted }

// Initial returns the machine's initial state, as a session that has no
// instance yet sees it; nil when the machine cannot start (or needs an
// input: NeedsInput).
func (m *Workflow) Initial() *interp.Snapshot { return m.initSnap }

// ToolOf returns the tool of an event, nil when the machine takes no such
// event.
func (m *Workflow) ToolOf(event string) *Tool { return m.byEvent[event] }

// ToolNames lists the names of a workflow's tools, built-in ones
// included.
func (m *Workflow) ToolNames() []string {
	out := []string{m.StatusTool, m.ResetTool, m.StartTool}
	for _, t := range m.Tools {
		out = append(out, t.Name)
	}
	for _, t := range m.StateTools {
		out = append(out, t.Name)
	}
	return out
}
