package xstate

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/stategate/stategate/interp"
)

// ErrInvalid is wrapped by every error about a machine file that cannot be
// loaded.
var ErrInvalid = errors.New("invalid machine")

// Diagnostic is one problem found in a machine file.
type Diagnostic struct {
	File    string
	Line    int    // 0 when unknown
	Column  int    // 0 when unknown
	State   string // the state's path, "(root)" for the root; "" when none
	Msg     string
	Warning bool
	// Source is the text of the line the problem is on, when known: for
	// the server's log and check, never for MCP clients (Public).
	Source string
	// quotes is set when Msg may quote the file (esbuild's own messages:
	// Expected ";" but found "...").
	quotes bool
}

// String renders the diagnostic for the server's log and check: the file,
// the line, the state, the message, and the line's text when known.
func (d Diagnostic) String() string {
	s := d.render(d.Msg)
	if d.Source != "" {
		s += fmt.Sprintf(" (column %d: %s)", d.Column, d.Source)
	}
	return s
}

// Public renders the diagnostic for MCP clients: as String, without the
// line's text and without what a message of esbuild's quotes of the file.
func (d Diagnostic) Public() string {
	msg := d.Msg
	if d.quotes {
		msg = elideQuotes(msg)
	}
	return d.render(msg)
}

func (d Diagnostic) render(msg string) string {
	var b strings.Builder
	b.WriteString(d.File)
	if d.Line > 0 {
		fmt.Fprintf(&b, ":%d", d.Line)
	}
	b.WriteString(": ")
	if d.Warning {
		b.WriteString("warning: ")
	}
	if d.State != "" {
		fmt.Fprintf(&b, "state %s: ", d.State)
	}
	b.WriteString(msg)
	return b.String()
}

// quoted matches what a message quotes: "..." (esbuild quotes tokens and
// names so).
var quoted = regexp.MustCompile(`"[^"]*"`)

// elideQuotes replaces what a message quotes by "…", but for one or two
// characters (punctuation: Expected ";").
func elideQuotes(msg string) string {
	return quoted.ReplaceAllStringFunc(msg, func(q string) string {
		if len([]rune(q)) <= 4 {
			return q
		}
		return `"…"`
	})
}

// LoadError lists the errors that stop a machine file from loading.
type LoadError struct {
	File  string
	Diags []Diagnostic // errors only
	Err   error        // the error behind them, when there is one
	// Machine is the id of the machine the file makes, when it was read
	// that far (it compiled, but its implementations are missing).
	Machine string
}

func (e *LoadError) Error() string {
	lines := make([]string, len(e.Diags))
	for i, d := range e.Diags {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// Public renders the error for MCP clients: each diagnostic's Public.
func (e *LoadError) Public() string {
	lines := make([]string, len(e.Diags))
	for i, d := range e.Diags {
		lines[i] = d.Public()
	}
	return strings.Join(lines, "\n")
}

// PublicError renders a machine file's load error for MCP clients: a
// LoadError's Public (no line of the file, nothing it quotes of it), any
// other error as it is.
func PublicError(err error) string {
	var le *LoadError
	if errors.As(err, &le) {
		return strings.Replace(err.Error(), le.Error(), le.Public(), 1)
	}
	return err.Error()
}

// Unwrap lets errors.Is match ErrInvalid, and the error behind the
// diagnostics (ErrNoMachine, say).
func (e *LoadError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}

// configReader turns a decoded XState config into an interp.MachineDef,
// collecting every problem with the state it is in.
type configReader struct {
	file  string
	diags []Diagnostic
	lines map[string]int // state path -> line
	// fns resolves JS function values of module configs (nil for JSON).
	fns funcResolver
}

// funcResolver turns the non-JSON values of a module config (functions,
// built-in actions and guards) into interp values. It reports false for a
// value it does not know.
type funcResolver interface {
	action(v any) (interp.Action, bool, error)
	guard(v any) (interp.Guard, bool, error)
	expr(v any) (*interp.Expr, bool)
	// paramsExpr is expr for the params of a guard or action.
	paramsExpr(v any) (*interp.Expr, bool)
	// inputExpr is expr for the input of an invoked actor.
	inputExpr(v any) (*interp.Expr, bool)
	invokeSrc(v any) (interp.ActorLogic, bool)
}

func (r *configReader) errorf(state string, line int, format string, args ...any) {
	r.diags = append(r.diags, Diagnostic{File: r.file, Line: line, State: state, Msg: fmt.Sprintf(format, args...)})
}

func (r *configReader) warnf(state string, line int, format string, args ...any) {
	r.diags = append(r.diags, Diagnostic{File: r.file, Line: line, State: state, Msg: fmt.Sprintf(format, args...), Warning: true})
}

func (r *configReader) failed() bool {
	for _, d := range r.diags {
		if !d.Warning {
			return true
		}
	}
	return false
}

// Keys that XState v4 used and v5 no longer reads, with what replaced them.
var v4Keys = map[string]string{
	"cond":                       "use `guard` (XState v5)",
	"internal":                   "use `reenter` (XState v5; internal: false is reenter: true)",
	"onEntry":                    "use `entry`",
	"onExit":                     "use `exit`",
	"activities":                 "activities were removed in XState v5; invoke an actor instead",
	"data":                       "use `output` (XState v5)",
	"in":                         "use the stateIn() guard (XState v5)",
	"predictableActionArguments": "an XState v4 option; remove it",
	"preserveActionOrder":        "an XState v4 option; remove it",
	"strict":                     "an XState v4 option; remove it",
	"schema":                     "use `types` (XState v5)",
	"tsTypes":                    "an XState v4 typegen option; remove it",
	"autoForward":                "removed in XState v5; use forwardTo",
	"services":                   "use setup({ actors }) (XState v5)",
	"parallel":                   "use type: 'parallel'",
}

var stateKeys = map[string]bool{
	"id": true, "key": true, "type": true, "initial": true, "history": true, "target": true,
	"states": true, "on": true, "always": true, "after": true, "onDone": true, "entry": true,
	"exit": true, "invoke": true, "output": true, "tags": true, "meta": true, "description": true,
}

var rootKeys = map[string]bool{"context": true, "version": true, "types": true, "schemas": true, "$schema": true}

var transitionKeys = map[string]bool{
	"target": true, "guard": true, "actions": true, "reenter": true, "description": true, "meta": true,
}

// machine reads a root config.
func (r *configReader) machine(root *object) *interp.MachineDef {
	def := &interp.MachineDef{}
	def.Root = r.state(root, "", nil, true)
	if v, ok := root.get("context"); ok {
		if e, isFn := r.exprOf(v); isFn {
			def.Context = e
		} else if truthy(v) {
			def.Context = interp.Static(plain(v))
		}
	}
	return def
}

func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case float64:
		return x != 0 && !math.IsNaN(x)
	case string:
		return x != ""
	}
	return true
}

func (r *configReader) exprOf(v any) (*interp.Expr, bool) {
	if r.fns != nil {
		if e, ok := r.fns.expr(v); ok {
			return e, true
		}
	}
	return nil, false
}

func pathString(path []string) string {
	if len(path) == 0 {
		return "(root)"
	}
	return strings.Join(path, ".")
}

func (r *configReader) state(o *object, key string, path []string, root bool) *interp.StateDef {
	sp := pathString(path)
	r.lines[sp] = o.line
	d := &interp.StateDef{Key: key}
	for _, k := range o.keys {
		if hint, bad := v4Keys[k]; bad {
			r.errorf(sp, o.line, "%q is not an XState v5 state key: %s", k, hint)
			continue
		}
		if !stateKeys[k] && !(root && rootKeys[k]) {
			r.warnf(sp, o.line, "unknown key %q is ignored", k)
		}
	}
	if v, ok := o.get("id"); ok {
		if s, isStr := v.(string); isStr {
			d.ID = s
		} else {
			r.errorf(sp, o.line, "id must be a string")
		}
	}
	var children *object
	if v, ok := o.get("states"); ok {
		c, isObj := v.(*object)
		if !isObj {
			r.errorf(sp, o.line, "states must be an object of state configs")
		} else {
			children = c
		}
	}
	hasHistory := false
	if v, ok := o.get("history"); ok {
		hasHistory = truthy(v)
		switch v {
		case "deep", true:
			d.Deep = true
		case "shallow", false:
		default:
			r.errorf(sp, o.line, `history must be "shallow" or "deep"`)
		}
	}
	typ := ""
	if v, ok := o.get("type"); ok {
		s, isStr := v.(string)
		if !isStr {
			r.errorf(sp, o.line, "type must be a string")
		}
		typ = s
	}
	switch typ {
	case "":
		switch {
		case children != nil && len(children.keys) > 0:
			d.Type = interp.Compound
		case hasHistory:
			d.Type = interp.History
		default:
			d.Type = interp.Atomic
		}
	case "atomic":
		d.Type = interp.Atomic
	case "compound":
		d.Type = interp.Compound
	case "parallel":
		d.Type = interp.Parallel
	case "final":
		d.Type = interp.Final
	case "history":
		d.Type = interp.History
	default:
		r.errorf(sp, o.line, "unknown state type %q (atomic, compound, parallel, final or history)", typ)
	}
	if v, ok := o.get("initial"); ok && d.Type != interp.Compound && d.Type != interp.Atomic {
		// XState ignores the initial state of a parallel, final or history
		// state (an atomic state with one is a compound state without
		// children: an error below).
		r.warnf(sp, o.line, "initial is ignored: a %s state has no initial state (XState ignores it too)", typeName(d.Type))
	} else if ok {
		switch x := v.(type) {
		case string:
			d.Initial = x
		case *object:
			if t, ok := x.get("target"); ok {
				d.Initial, _ = t.(string)
			}
			if d.Initial == "" {
				r.errorf(sp, x.line, "initial must name a child state")
			}
		default:
			r.errorf(sp, o.line, "initial must be a string naming a child state")
		}
	}
	if v, ok := o.get("target"); ok {
		if d.Type != interp.History {
			r.errorf(sp, o.line, "only history states take a target (transitions go in `on`)")
		} else {
			d.HistoryTo = r.targets(v, sp, o.line)
		}
	}
	if children != nil {
		for _, k := range children.keys {
			cv := children.vals[k]
			co, isObj := cv.(*object)
			cpath := append(append([]string{}, path...), k)
			if !isObj {
				r.errorf(pathString(cpath), children.line, "a state config must be an object")
				continue
			}
			d.States = append(d.States, r.state(co, k, cpath, false))
		}
	}
	if v, ok := o.get("on"); ok {
		on, isObj := v.(*object)
		if !isObj {
			r.errorf(sp, o.line, "on must be an object of event handlers")
		} else {
			for _, ev := range on.allKeys() {
				if ev == "" {
					r.errorf(sp, on.line, `null events ("") cannot be used as a transition key in XState v5; use always: { ... } instead`)
					continue
				}
				where := fmt.Sprintf("on %q", ev)
				v, ok := on.vals[ev]
				switch {
				case !ok:
					// An event mapped to undefined: XState's forbidden
					// transition, targetless and without actions. It is
					// selected here, so no ancestor sees the event.
					d.On = append(d.On, interp.EventDef{Event: ev, Transitions: []*interp.TransitionDef{{}}})
				case v == nil:
					r.errorf(sp, on.line, "%s: a transition cannot be null (XState fails to create the machine); use undefined or {} to forbid the event here, [] for no transition", where)
				default:
					d.On = append(d.On, interp.EventDef{Event: ev, Transitions: r.transitions(v, sp, on.line, where)})
				}
			}
		}
	}
	if v, ok := o.get("always"); ok {
		d.Always = r.transitions(v, sp, o.line, "always")
	}
	if v, ok := o.get("onDone"); ok {
		d.OnDone = r.transitions(v, sp, o.line, "onDone")
		if d.Type != interp.Compound && d.Type != interp.Parallel {
			r.warnf(sp, o.line, "onDone is ignored: only a compound or parallel state is ever done (XState ignores it too)")
		}
	}
	if v, ok := o.get("after"); ok {
		after, isObj := v.(*object)
		if !isObj {
			r.errorf(sp, o.line, "after must be an object of delays")
		} else {
			for _, k := range after.keys {
				a := interp.AfterDef{Transitions: r.transitions(after.vals[k], sp, after.line, fmt.Sprintf("after %q", k))}
				if ms, ok := jsNumber(k); ok {
					a.Ms = ms
				} else {
					a.Name = k
				}
				d.After = append(d.After, a)
			}
		}
	}
	if v, ok := o.get("entry"); ok {
		d.Entry = r.actions(v, sp, o.line, "entry")
	}
	if v, ok := o.get("exit"); ok {
		d.Exit = r.actions(v, sp, o.line, "exit")
	}
	if v, ok := o.get("invoke"); ok {
		d.Invoke = r.invokes(v, sp, o.line)
	}
	if v, ok := o.get("tags"); ok {
		switch x := v.(type) {
		case string:
			d.Tags = []string{x}
		case []any:
			for _, t := range x {
				s, isStr := t.(string)
				if !isStr {
					r.errorf(sp, o.line, "tags must be strings")
					continue
				}
				d.Tags = append(d.Tags, s)
			}
		default:
			r.errorf(sp, o.line, "tags must be a string or a list of strings")
		}
	}
	if v, ok := o.get("output"); ok && (root || d.Type == interp.Final) {
		if e, isFn := r.exprOf(v); isFn {
			d.Output = e
		} else {
			d.Output = r.outputExpr(v)
		}
	}
	if v, ok := o.get("meta"); ok {
		d.Meta = plain(v)
	}
	if v, ok := o.get("description"); ok {
		d.Description, _ = v.(string)
	}
	return d
}

// outputExpr makes a static output, or a mapper object whose function
// values are computed (deprecated in XState, still honoured).
func (r *configReader) outputExpr(v any) *interp.Expr {
	o, isObj := v.(*object)
	if !isObj || r.fns == nil {
		return interp.Static(plain(v))
	}
	fns := map[string]*interp.Expr{}
	for _, k := range o.keys {
		if e, ok := r.fns.expr(o.vals[k]); ok {
			fns[k] = e
		}
	}
	if len(fns) == 0 {
		return interp.Static(plain(v))
	}
	return &interp.Expr{Fn: func(a interp.Args, params any) (any, error) {
		out := make(map[string]any, len(o.keys))
		for _, k := range o.keys {
			if e, ok := fns[k]; ok {
				x, err := e.Eval(a, params)
				if err != nil {
					return nil, err
				}
				out[k] = x
			} else {
				out[k] = plain(o.vals[k])
			}
		}
		return out, nil
	}}
}

func (r *configReader) targets(v any, sp string, line int) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		out := []string{}
		for _, t := range x {
			s, ok := t.(string)
			if !ok {
				r.errorf(sp, line, "a target must be a string")
				continue
			}
			out = append(out, s)
		}
		return out
	case nil:
		return nil
	}
	r.errorf(sp, line, "a target must be a string or a list of strings")
	return nil
}

func (r *configReader) transitions(v any, sp string, line int, where string) []*interp.TransitionDef {
	var items []any
	switch x := v.(type) {
	case []any:
		items = x
	case nil:
		return nil
	default:
		items = []any{x}
	}
	out := make([]*interp.TransitionDef, 0, len(items))
	for _, it := range items {
		t := &interp.TransitionDef{}
		switch x := it.(type) {
		case string:
			// "" is XState's targetless transition (TARGETLESS_KEY).
			if x != "" {
				t.Targets = []string{x}
				t.HasTarget = true
			}
		case undefinedValue:
			// undefined in a module is targetless too: XState reads it
			// as {target: undefined}.
		case *object:
			for _, k := range x.keys {
				if hint, bad := v4Keys[k]; bad {
					r.errorf(sp, x.line, "%s: %q is not an XState v5 transition key: %s", where, k, hint)
				} else if !transitionKeys[k] {
					r.warnf(sp, x.line, "%s: unknown transition key %q is ignored", where, k)
				}
			}
			if tv, ok := x.get("target"); ok && tv == nil {
				r.errorf(sp, x.line, "%s: target cannot be null (XState fails when the transition is taken); leave target out for a targetless transition", where)
			} else if ok && tv != "" {
				t.Targets = r.targets(tv, sp, x.line)
				t.HasTarget = true
			}
			if gv, ok := x.get("guard"); ok && gv != nil {
				t.Guard = r.guard(gv, sp, x.line, where)
			}
			if av, ok := x.get("actions"); ok {
				t.Actions = r.actions(av, sp, x.line, where)
			}
			if rv, ok := x.get("reenter"); ok {
				b, isBool := rv.(bool)
				if !isBool {
					r.errorf(sp, x.line, "%s: reenter must be true or false", where)
				}
				t.Reenter = b
			}
			if dv, ok := x.get("description"); ok {
				t.Description, _ = dv.(string)
			}
			if mv, ok := x.get("meta"); ok {
				t.Meta = plain(mv)
			}
		default:
			if r.fns != nil {
				if _, isAction, _ := r.fns.action(it); isAction {
					r.errorf(sp, line, "%s: a transition must be a target string or an object, not a function", where)
					continue
				}
			}
			r.errorf(sp, line, "%s: a transition must be a target string or an object", where)
			continue
		}
		out = append(out, t)
	}
	return out
}

func (r *configReader) actions(v any, sp string, line int, where string) []interp.Action {
	var items []any
	switch x := v.(type) {
	case []any:
		items = x
	case nil:
		return nil
	default:
		items = []any{x}
	}
	var out []interp.Action
	for _, it := range items {
		if a := r.action(it, sp, line, where); a != nil {
			out = append(out, a)
		}
	}
	return out
}

func (r *configReader) action(v any, sp string, line int, where string) interp.Action {
	if _, isList := v.([]any); isList {
		// XState takes a list inside the list of actions for an action
		// with no type, which does nothing.
		r.warnf(sp, line, "%s: a list inside a list of actions is ignored (XState does nothing with it): write its actions in the outer list", where)
		return nil
	}
	var fn func(any) (interp.Action, bool, error)
	if r.fns != nil {
		fn = r.fns.action
	}
	return readNamed(r, v, sp, line, where, "action", fn, func(name string, params *interp.Expr) interp.Action {
		return &interp.NamedAction{Type: name, Params: params}
	})
}

// readNamed reads an action or a guard as XState takes one: a name, an
// object {type, params}, or (in a module) a function or a value the
// module's resolver knows, which fn converts.
func readNamed[T any](r *configReader, v any, sp string, line int, where, kind string, fn func(any) (T, bool, error), named func(string, *interp.Expr) T) T {
	var zero T
	fromModule := func(line int) (T, bool) {
		if fn == nil {
			return zero, false
		}
		x, ok, err := fn(v)
		if ok && err != nil {
			r.errorf(sp, line, "%s: %v", where, err)
		}
		return x, ok
	}
	switch x := v.(type) {
	case string:
		return named(x, nil)
	case *object:
		tv, _ := x.get("type")
		name, ok := tv.(string)
		if !ok || name == "" {
			if out, ok := fromModule(x.line); ok {
				return out
			}
			r.errorf(sp, x.line, "%s: %s %s object needs a string type", where, article(kind), kind)
			return zero
		}
		var params *interp.Expr
		if pv, ok := x.get("params"); ok {
			params = r.params(pv)
		}
		return named(name, params)
	}
	if out, ok := fromModule(line); ok {
		return out
	}
	r.errorf(sp, line, "%s: %s %s must be a name or {type, params}", where, article(kind), kind)
	return zero
}

func article(word string) string {
	if strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

func (r *configReader) params(v any) *interp.Expr {
	if r.fns != nil {
		if e, ok := r.fns.paramsExpr(v); ok {
			return e
		}
	}
	return interp.Static(plain(v))
}

// input is the input of an invoked actor: a value or a function.
func (r *configReader) input(v any) *interp.Expr {
	if r.fns != nil {
		if e, ok := r.fns.inputExpr(v); ok {
			return e
		}
	}
	return interp.Static(plain(v))
}

func (r *configReader) guard(v any, sp string, line int, where string) interp.Guard {
	var fn func(any) (interp.Guard, bool, error)
	if r.fns != nil {
		fn = r.fns.guard
	}
	return readNamed(r, v, sp, line, where, "guard", fn, func(name string, params *interp.Expr) interp.Guard {
		return &interp.NamedGuard{Type: name, Params: params}
	})
}

func (r *configReader) invokes(v any, sp string, line int) []*interp.InvokeDef {
	var items []any
	switch x := v.(type) {
	case []any:
		items = x
	default:
		items = []any{x}
	}
	var out []*interp.InvokeDef
	for _, it := range items {
		o, ok := it.(*object)
		if !ok {
			r.errorf(sp, line, "invoke must be an object with a src")
			continue
		}
		d := &interp.InvokeDef{}
		if idv, ok := o.get("id"); ok {
			d.ID, _ = idv.(string)
		}
		if sv, ok := o.get("systemId"); ok {
			d.SystemID, _ = sv.(string)
		}
		switch src := o.vals["src"].(type) {
		case string:
			d.Src = src
		case nil:
			r.errorf(sp, o.line, "invoke needs a src")
		default:
			if r.fns != nil {
				if logic, ok := r.fns.invokeSrc(src); ok {
					d.Logic = logic
					break
				}
			}
			r.errorf(sp, o.line, "invoke src must name an actor")
		}
		if iv, ok := o.get("input"); ok {
			d.Input = r.input(iv)
		}
		where := "invoke " + d.ID
		if dv, ok := o.get("onDone"); ok {
			d.OnDone = r.transitions(dv, sp, o.line, where+" onDone")
		}
		if ev, ok := o.get("onError"); ok {
			d.OnError = r.transitions(ev, sp, o.line, where+" onError")
		}
		if snv, ok := o.get("onSnapshot"); ok {
			d.OnSnapshot = r.transitions(snv, sp, o.line, where+" onSnapshot")
		}
		out = append(out, d)
	}
	return out
}

// jsNumber converts a key to a number as JavaScript's Number() does, for
// the keys of `after`; it reports false for NaN.
func jsNumber(k string) (float64, bool) {
	s := strings.TrimSpace(k)
	if s == "" {
		return 0, true
	}
	switch s {
	case "Infinity", "+Infinity":
		return math.Inf(1), true
	case "-Infinity":
		return math.Inf(-1), true
	}
	if len(s) > 2 && s[0] == '0' {
		base := 0
		switch s[1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 0 {
			n, err := strconv.ParseUint(s[2:], base, 64)
			return float64(n), err == nil
		}
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// sortedKeys returns a map's keys sorted.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func typeName(t interp.StateType) string { return t.String() }
