// Package config is the XState v5 config reader: it turns a config (a
// JSON config decoded with Decode, or the object a JavaScript module
// built, whose values may be functions) into an interp machine, with
// every problem found named by its state and placed at the line and
// column of its key. Package xstate reads JSON configs with it, package
// xstate/js the configs of modules (through Funcs, which makes interp
// values of their functions and, as a Locator, places their problems). It
// knows nothing of files, MCP or JavaScript itself.
package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/stategate/stategate/interp"
)

// Problem is one thing wrong in a config, or doubtful (a warning).
type Problem struct {
	File    string
	Line    int    // 0 when unknown
	Column  int    // 0 when unknown; in bytes, from 1
	State   string // the state's path, "(root)" for the root; "" when none
	Msg     string
	Warning bool
	// Path is the path of keys from the config's root to the key at
	// fault (an array's element by its index), which Line and Column
	// place; nil when the problem is not at a key.
	Path []string
}

// Funcs turns the values of a module's config that are not JSON
// (functions, and the actions, guards and actor logic its xstate API
// made) into interp values. Each method reports false for a value it does
// not know.
type Funcs interface {
	Action(v any) (interp.Action, bool, error)
	Guard(v any) (interp.Guard, bool, error)
	Expr(v any) (*interp.Expr, bool)
	// ParamsExpr is Expr for the params of a guard or action.
	ParamsExpr(v any) (*interp.Expr, bool)
	// InputExpr is Expr for the input of an invoked actor.
	InputExpr(v any) (*interp.Expr, bool)
	InvokeSrc(v any) (interp.ActorLogic, bool)
}

// Locator is implemented by the Funcs of a module whose source is known,
// to place the problems of its config: Locate gives where the key that a
// path of keys leads to from the config's root is written (an array's
// element by its index, "0"), or else the deepest key of the path it
// finds; file is "" for the module's own file, else the file the key is
// in (a config part imported from another file); line and col count from
// 1, col in bytes (as esbuild counts). ok is false when it finds no key
// of the path.
type Locator interface {
	Locate(path []string) (file string, line, col int, ok bool)
}

// The size limits of a machine, checked as its config is read, before it
// is compiled: the compile takes time and memory that grow with the
// product of a machine's states and its states and transitions (a set of
// states per state and two per transition), which at 100,000 states
// (3.7 MiB of JSON) was 1.2 GiB and seconds. The largest machines of the
// conformance corpus and of machines/ have 28 states and 25 transitions.
const (
	// MaxStates bounds the state nodes of a machine, the root included.
	MaxStates = 5000
	// MaxTransitions bounds the transitions of a machine: each one of
	// on, always, after, onDone and the invoked actors' handlers (a list
	// counts each of its transitions).
	MaxTransitions = 10000
)

// Compile reads a config and compiles it with implementations; fns makes
// interp values of its functions (nil for a JSON config). It returns the
// warnings, and the errors, by line (then the machine is nil): every
// problem found, not the first. A config over MaxStates or MaxTransitions
// is refused as it is read, with that error alone, and not compiled.
//
// Each problem is placed at its key (Problem.Path): in a JSON config by
// the positions Decode recorded, in a module's by fns when it is a
// Locator. The named guards, actions, actors and delays that impl lacks
// are reported with the errors when there are errors (guards, actors and
// delays as errors, actions as warnings), so that one pass shows every
// problem; when there are none, the machine's Unresolved says where each
// is named (MachineDef.Where).
func Compile(file string, root *Object, fns Funcs, impl interp.Implementations) (m *interp.Machine, warnings, errs []Problem) {
	r := newReader(file, root, fns)
	def := r.machine(root)
	if r.over != nil {
		return nil, nil, []Problem{*r.over}
	}
	def.Impl = impl
	missing := r.unresolved(impl)
	def.Where = where(missing)
	// Compile even a config with errors, to report every problem at once.
	m, err := interp.New(def)
	errs = errorsOnly(r.diags)
	if err != nil {
		errs = append(errs, defProblems(file, err, r.states, r.targets)...)
	}
	warnings = warningsOnly(r.diags)
	if len(errs) > 0 {
		for _, u := range missing {
			if u.p.Warning {
				warnings = append(warnings, u.p)
			} else {
				errs = append(errs, u.p)
			}
		}
	}
	r.place(errs)
	r.place(warnings)
	if len(errs) > 0 {
		byLine(errs)
		return nil, warnings, errs
	}
	return m, warnings, nil
}

// byLine orders problems by file, line and column, keeping the order of
// those at one place (or at none).
func byLine(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
}

// where makes the MachineDef.Where of a machine: the place of each
// unresolved name, as the reader placed it (nil when none is).
func where(missing []missingRef) func(kind, name, state string) (string, int, int) {
	if len(missing) == 0 {
		return nil
	}
	at := make(map[ref]Problem, len(missing))
	for _, u := range missing {
		at[u.ref] = u.p
	}
	return func(kind, name, state string) (string, int, int) {
		p, ok := at[ref{kind, name, state}]
		if !ok {
			return "", 0, 0
		}
		return p.File, p.Line, p.Column
	}
}

// Read reads a JSON config into a definition, without compiling it. It
// returns the errors found (then the definition is not to be used).
func Read(file string, root *Object) (*interp.MachineDef, []Problem) {
	r := newReader(file, root, nil)
	def := r.machine(root)
	if r.over != nil {
		return nil, []Problem{*r.over}
	}
	errs := errorsOnly(r.diags)
	r.place(errs)
	return def, errs
}

// defProblems converts the errors of interp.New into problems.
func defProblems(file string, err error, states map[string]loc, targets map[*interp.TransitionDef]loc) []Problem {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	var out []Problem
	for _, e := range errs {
		var de *interp.DefError
		if errors.As(e, &de) {
			p := Problem{File: file, State: de.Path, Msg: de.Msg, Path: stateAt(states, de.Path)}
			if at, ok := targets[de.Transition]; ok && de.Transition != nil {
				p.Path = at
			}
			out = append(out, p)
		} else {
			out = append(out, Problem{File: file, Msg: e.Error()})
		}
	}
	return out
}

func warningsOnly(ps []Problem) []Problem {
	var out []Problem
	for _, p := range ps {
		if p.Warning {
			out = append(out, p)
		}
	}
	return out
}

func errorsOnly(ps []Problem) []Problem {
	var out []Problem
	for _, p := range ps {
		if !p.Warning {
			out = append(out, p)
		}
	}
	return out
}

// Merge returns own's implementations over base's: a machine's own code
// comes first, base (a Go registry's) fills in the rest. The Host is
// own's.
func Merge(base, own interp.Implementations) interp.Implementations {
	return interp.Implementations{
		Guards:  mergeOver(base.Guards, own.Guards),
		Actions: mergeOver(base.Actions, own.Actions),
		Actors:  mergeOver(base.Actors, own.Actors),
		Delays:  mergeOver(base.Delays, own.Delays),
		Host:    own.Host,
	}
}

func mergeOver[V any](base, over map[string]V) map[string]V {
	if len(base) == 0 {
		return over
	}
	out := make(map[string]V, len(base)+len(over))
	maps.Copy(out, base)
	maps.Copy(out, over)
	return out
}

// configReader turns a decoded XState config into an interp.MachineDef,
// collecting every problem with the state and the key it is at.
type configReader struct {
	file  string
	root  *Object
	diags []Problem
	// states is where each state's config is (by its path), to place
	// the errors of interp.New, which name the state.
	states map[string]loc
	// fns resolves JS function values of module configs (nil for JSON).
	fns Funcs
	// targets is where each transition's target is, to place the errors
	// of interp.New about a transition.
	targets map[*interp.TransitionDef]loc
	// refs are the named implementations read, where each is first named
	// in its state.
	refs    []missingRef
	refSeen map[ref]bool
	// nStates and nTransitions count what was read; over, once set, is the
	// error of the limit crossed, and the rest of the config is not read.
	nStates, nTransitions int
	over                  *Problem
}

func newReader(file string, root *Object, fns Funcs) *configReader {
	return &configReader{file: file, root: root, fns: fns, states: map[string]loc{}, targets: map[*interp.TransitionDef]loc{}, refSeen: map[ref]bool{}}
}

// loc is where a value is in a config: the path of keys from its root
// (an array's element by its index).
type loc []string

// key returns the location of the value of key k of the object at l.
func (l loc) key(k string) loc { return append(l[:len(l):len(l)], k) }

// index returns the location of element i of the array at l.
func (l loc) index(i int) loc { return l.key(strconv.Itoa(i)) }

// stateAt is the location of the state at path sp, for an error of
// interp.New: the key of the state (nil for the root, or an unknown
// state).
func stateAt(states map[string]loc, sp string) []string {
	if at := states[sp]; len(at) > 0 {
		return at
	}
	return nil
}

// ref is a named implementation a state refers to.
type ref struct{ kind, name, state string }

// missingRef is a named implementation and where it is first named in
// its state; p is the problem of its absence.
type missingRef struct {
	ref
	p Problem
}

// refer records a named implementation read at.
func (r *configReader) refer(kind, name, sp string, at loc) {
	k := ref{kind, name, sp}
	if name == "" || r.refSeen[k] {
		return
	}
	r.refSeen[k] = true
	r.refs = append(r.refs, missingRef{ref: k, p: Problem{File: r.file, State: sp, Path: at}})
}

// referGuard records the named guards of a guard (in the and, or and not
// of a module's).
func (r *configReader) referGuard(g interp.Guard, sp string, at loc) {
	switch g := g.(type) {
	case *interp.NamedGuard:
		r.refer("guard", g.Type, sp, at)
	case *interp.AndGuard:
		for _, c := range g.Guards {
			r.referGuard(c, sp, at)
		}
	case *interp.OrGuard:
		for _, c := range g.Guards {
			r.referGuard(c, sp, at)
		}
	case *interp.NotGuard:
		r.referGuard(g.Guard, sp, at)
	}
}

// referAction records the named implementations an action names.
func (r *configReader) referAction(a interp.Action, sp string, at loc) {
	switch a := a.(type) {
	case *interp.NamedAction:
		r.refer("action", a.Type, sp, at)
	case *interp.RaiseAction:
		r.refer("delay", a.DelayName, sp, at)
	case *interp.SendToAction:
		r.refer("delay", a.DelayName, sp, at)
	case *interp.SpawnAction:
		if a.Logic == nil {
			r.refer("actor", a.Src, sp, at)
		}
	}
}

// unresolved lists the named implementations read that impl lacks, in
// the order read, each placed: guards, actors and delays as errors (a
// server refuses the machine), actions as warnings (XState skips them).
// It is the reader's view of interp.Machine.Unresolved, which a config
// with errors has no machine to ask.
func (r *configReader) unresolved(impl interp.Implementations) []missingRef {
	var out []missingRef
	for _, u := range r.refs {
		var ok bool
		switch u.kind {
		case "guard":
			ok = impl.Guards[u.name] != nil
		case "action":
			ok = impl.Actions[u.name] != nil
		case "actor":
			ok = impl.Actors[u.name] != nil
		case "delay":
			ok = impl.Delays[u.name] != nil
		}
		if ok {
			continue
		}
		if u.kind == "action" {
			u.p.Warning = true
			u.p.Msg = fmt.Sprintf("action %q has no implementation; XState skips it", u.name)
		} else {
			u.p.Msg = fmt.Sprintf("%s %q has no implementation", u.kind, u.name)
		}
		out = append(out, u)
	}
	ps := make([]Problem, len(out))
	for i, u := range out {
		ps[i] = u.p
	}
	r.place(ps)
	for i := range out {
		out[i].p = ps[i]
	}
	return out
}

// place gives each problem with a Path its file, line and column: the
// key's, as a module's Locator or the positions a JSON config was
// decoded with give it; a problem the place of whose key is unknown
// keeps the line of the nearest object around it.
func (r *configReader) place(ps []Problem) {
	lc, _ := r.fns.(Locator)
	for i := range ps {
		p := &ps[i]
		if p.Line > 0 || p.Path == nil && p.State == "" {
			continue // placed already (a missing name), or not at a key
		}
		if p.Path == nil {
			p.Path = stateAt(r.states, p.State)
		}
		if lc != nil {
			if file, line, col, ok := lc.Locate(p.Path); ok {
				if file != "" {
					p.File = file
				}
				p.Line, p.Column = line, col
			}
			continue
		}
		p.Line, p.Column = Locate(r.root, p.Path)
	}
}

// Locate returns where in a decoded JSON config the key that path leads
// to from root is: its line and column, else those of the deepest key of
// the path there is, else the line of the object the path stops in.
func Locate(root *Object, path []string) (line, col int) {
	if root == nil {
		return 0, 0
	}
	var cur any = root
	line, col = root.Line, root.col
	// parent and key are the object and key the array cur is the value
	// of (its elements' positions are the key's).
	var parent *Object
	var key string
	for _, k := range path {
		switch x := cur.(type) {
		case *Object:
			l, c, ok := x.Pos(k)
			if !ok {
				return line, col
			}
			line, col = l, c
			parent, key = x, k
			cur = x.Vals[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) || parent == nil {
				return line, col
			}
			l, c, ok := parent.ElemPos(key, i)
			if !ok {
				return line, col
			}
			line, col = l, c
			parent = nil
			cur = x[i]
		default:
			return line, col
		}
	}
	return line, col
}

// count counts a state or transitions read in state sp (at), and
// reports whether the config is still within the limits.
func (r *configReader) count(states, transitions int, sp string, at loc) bool {
	if r.over != nil {
		return false
	}
	r.nStates += states
	r.nTransitions += transitions
	switch {
	case r.nStates > MaxStates:
		r.over = &Problem{File: r.file, State: sp, Path: at, Msg: fmt.Sprintf("the machine has more than %d states: stategate refuses larger machines (xstate.MaxStates), whose compile takes time and memory that grow with the square of their size", MaxStates)}
	case r.nTransitions > MaxTransitions:
		r.over = &Problem{File: r.file, State: sp, Path: at, Msg: fmt.Sprintf("the machine has more than %d transitions: stategate refuses larger machines (xstate.MaxTransitions), whose compile takes time and memory that grow with the product of their states and transitions", MaxTransitions)}
	}
	if r.over != nil {
		over := []Problem{*r.over}
		r.place(over)
		r.over = &over[0]
	}
	return r.over == nil
}

func (r *configReader) errorf(state string, at loc, format string, args ...any) {
	r.diags = append(r.diags, Problem{File: r.file, State: state, Path: at, Msg: fmt.Sprintf(format, args...)})
}

func (r *configReader) warnf(state string, at loc, format string, args ...any) {
	r.diags = append(r.diags, Problem{File: r.file, State: state, Path: at, Msg: fmt.Sprintf(format, args...), Warning: true})
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
func (r *configReader) machine(root *Object) *interp.MachineDef {
	def := &interp.MachineDef{}
	def.Root = r.state(root, "", nil, loc{}, true)
	if v, ok := root.Get("context"); ok {
		if e, isFn := r.exprOf(v); isFn {
			def.Context = e
		} else if truthy(v) {
			def.Context = interp.Static(Plain(v))
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
		if e, ok := r.fns.Expr(v); ok {
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

func (r *configReader) state(o *Object, key string, path []string, at loc, root bool) *interp.StateDef {
	sp := pathString(path)
	d := &interp.StateDef{Key: key}
	if !r.count(1, 0, sp, at) {
		return d
	}
	r.states[sp] = at
	for _, k := range o.Keys {
		if hint, bad := v4Keys[k]; bad {
			r.errorf(sp, at.key(k), "%q is not an XState v5 state key: %s", k, hint)
			continue
		}
		if !stateKeys[k] && !(root && rootKeys[k]) {
			r.warnf(sp, at.key(k), "unknown key %q is ignored", k)
		}
	}
	if v, ok := o.Get("id"); ok {
		if s, isStr := v.(string); isStr {
			d.ID = s
		} else {
			r.errorf(sp, at.key("id"), "id must be a string")
		}
	}
	var children *Object
	if v, ok := o.Get("states"); ok {
		c, isObj := v.(*Object)
		if !isObj {
			r.errorf(sp, at.key("states"), "states must be an object of state configs")
		} else {
			children = c
		}
	}
	hasHistory := false
	if v, ok := o.Get("history"); ok {
		hasHistory = truthy(v)
		switch v {
		case "deep", true:
			d.Deep = true
		case "shallow", false:
		default:
			r.errorf(sp, at.key("history"), `history must be "shallow" or "deep"`)
		}
	}
	typ := ""
	if v, ok := o.Get("type"); ok {
		s, isStr := v.(string)
		if !isStr {
			r.errorf(sp, at.key("type"), "type must be a string")
		}
		typ = s
	}
	switch typ {
	case "":
		switch {
		case children != nil && len(children.Keys) > 0:
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
		r.errorf(sp, at.key("type"), "unknown state type %q (atomic, compound, parallel, final or history)", typ)
	}
	if v, ok := o.Get("initial"); ok && d.Type != interp.Compound && d.Type != interp.Atomic {
		// XState ignores the initial state of a parallel, final or history
		// state (an atomic state with one is a compound state without
		// children: an error below).
		r.warnf(sp, at.key("initial"), "initial is ignored: a %s state has no initial state (XState ignores it too)", typeName(d.Type))
	} else if ok {
		switch x := v.(type) {
		case string:
			d.Initial = x
		case *Object:
			if t, ok := x.Get("target"); ok {
				d.Initial, _ = t.(string)
			}
			if d.Initial == "" {
				r.errorf(sp, at.key("initial"), "initial must name a child state")
			}
		default:
			r.errorf(sp, at.key("initial"), "initial must be a string naming a child state")
		}
	}
	if v, ok := o.Get("target"); ok {
		if d.Type != interp.History {
			r.errorf(sp, at.key("target"), "only history states take a target (transitions go in `on`)")
		} else {
			d.HistoryTo = r.readTargets(v, sp, at.key("target"))
		}
	}
	if children != nil {
		for _, k := range children.Keys {
			cv := children.Vals[k]
			co, isObj := cv.(*Object)
			cpath := append(append([]string{}, path...), k)
			cat := at.key("states").key(k)
			if !isObj {
				r.errorf(pathString(cpath), cat, "a state config must be an object")
				continue
			}
			d.States = append(d.States, r.state(co, k, cpath, cat, false))
		}
	}
	if v, ok := o.Get("on"); ok {
		on, isObj := v.(*Object)
		if !isObj {
			r.errorf(sp, at.key("on"), "on must be an object of event handlers")
		} else {
			for _, ev := range on.AllKeys() {
				eat := at.key("on").key(ev)
				if ev == "" {
					r.errorf(sp, eat, `null events ("") cannot be used as a transition key in XState v5; use always: { ... } instead`)
					continue
				}
				where := fmt.Sprintf("on %q", ev)
				v, ok := on.Vals[ev]
				switch {
				case !ok:
					// An event mapped to undefined: XState's forbidden
					// transition, targetless and without actions. It is
					// selected here, so no ancestor sees the event.
					if r.count(0, 1, sp, eat) {
						d.On = append(d.On, interp.EventDef{Event: ev, Transitions: []*interp.TransitionDef{{}}})
					}
				case v == nil:
					r.errorf(sp, eat, "%s: a transition cannot be null (XState fails to create the machine); use undefined or {} to forbid the event here, [] for no transition", where)
				default:
					d.On = append(d.On, interp.EventDef{Event: ev, Transitions: r.transitions(v, sp, eat, where)})
				}
			}
		}
	}
	if v, ok := o.Get("always"); ok {
		d.Always = r.transitions(v, sp, at.key("always"), "always")
	}
	if v, ok := o.Get("onDone"); ok {
		d.OnDone = r.transitions(v, sp, at.key("onDone"), "onDone")
		if d.Type != interp.Compound && d.Type != interp.Parallel {
			r.warnf(sp, at.key("onDone"), "onDone is ignored: only a compound or parallel state is ever done (XState ignores it too)")
		}
	}
	if v, ok := o.Get("after"); ok {
		after, isObj := v.(*Object)
		if !isObj {
			r.errorf(sp, at.key("after"), "after must be an object of delays")
		} else {
			for _, k := range after.Keys {
				kat := at.key("after").key(k)
				a := interp.AfterDef{Transitions: r.transitions(after.Vals[k], sp, kat, fmt.Sprintf("after %q", k))}
				if ms, ok := jsNumber(k); ok {
					a.Ms = ms
				} else {
					a.Name = k
					r.refer("delay", k, sp, kat)
				}
				d.After = append(d.After, a)
			}
		}
	}
	if v, ok := o.Get("entry"); ok {
		d.Entry = r.actions(v, sp, at.key("entry"), "entry")
	}
	if v, ok := o.Get("exit"); ok {
		d.Exit = r.actions(v, sp, at.key("exit"), "exit")
	}
	if v, ok := o.Get("invoke"); ok {
		d.Invoke = r.invokes(v, sp, at.key("invoke"))
	}
	if v, ok := o.Get("tags"); ok {
		switch x := v.(type) {
		case string:
			d.Tags = []string{x}
		case []any:
			for _, t := range x {
				s, isStr := t.(string)
				if !isStr {
					r.errorf(sp, at.key("tags"), "tags must be strings")
					continue
				}
				d.Tags = append(d.Tags, s)
			}
		default:
			r.errorf(sp, at.key("tags"), "tags must be a string or a list of strings")
		}
	}
	if v, ok := o.Get("output"); ok && (root || d.Type == interp.Final) {
		if e, isFn := r.exprOf(v); isFn {
			d.Output = e
		} else {
			d.Output = r.outputExpr(v)
		}
	}
	if v, ok := o.Get("meta"); ok {
		d.Meta = Plain(v)
	}
	if v, ok := o.Get("description"); ok {
		d.Description, _ = v.(string)
	}
	return d
}

// outputExpr makes a static output, or a mapper object whose function
// values are computed (deprecated in XState, still honoured).
func (r *configReader) outputExpr(v any) *interp.Expr {
	o, isObj := v.(*Object)
	if !isObj || r.fns == nil {
		return interp.Static(Plain(v))
	}
	fns := map[string]*interp.Expr{}
	for _, k := range o.Keys {
		if e, ok := r.fns.Expr(o.Vals[k]); ok {
			fns[k] = e
		}
	}
	if len(fns) == 0 {
		return interp.Static(Plain(v))
	}
	return &interp.Expr{Fn: func(a interp.Args, params any) (any, error) {
		out := make(map[string]any, len(o.Keys))
		for _, k := range o.Keys {
			if e, ok := fns[k]; ok {
				x, err := e.Eval(a, params)
				if err != nil {
					return nil, err
				}
				out[k] = x
			} else {
				out[k] = Plain(o.Vals[k])
			}
		}
		return out, nil
	}}
}

func (r *configReader) readTargets(v any, sp string, at loc) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		out := []string{}
		for i, t := range x {
			s, ok := t.(string)
			if !ok {
				r.errorf(sp, at.index(i), "a target must be a string")
				continue
			}
			out = append(out, s)
		}
		return out
	case nil:
		return nil
	}
	r.errorf(sp, at, "a target must be a string or a list of strings")
	return nil
}

func (r *configReader) transitions(v any, sp string, at loc, where string) []*interp.TransitionDef {
	var items []any
	list := false
	switch x := v.(type) {
	case []any:
		items, list = x, true
	case nil:
		return nil
	default:
		items = []any{x}
	}
	if !r.count(0, len(items), sp, at) {
		return nil
	}
	out := make([]*interp.TransitionDef, 0, len(items))
	for i, it := range items {
		iat := at
		if list {
			iat = at.index(i)
		}
		t := &interp.TransitionDef{}
		switch x := it.(type) {
		case string:
			// "" is XState's targetless transition (TARGETLESS_KEY).
			if x != "" {
				t.Targets = []string{x}
				t.HasTarget = true
				r.targets[t] = iat
			}
		case Undefined:
			// undefined in a module is targetless too: XState reads it
			// as {target: undefined}.
		case *Object:
			for _, k := range x.Keys {
				if hint, bad := v4Keys[k]; bad {
					r.errorf(sp, iat.key(k), "%s: %q is not an XState v5 transition key: %s", where, k, hint)
				} else if !transitionKeys[k] {
					r.warnf(sp, iat.key(k), "%s: unknown transition key %q is ignored", where, k)
				}
			}
			if tv, ok := x.Get("target"); ok && tv == nil {
				r.errorf(sp, iat.key("target"), "%s: target cannot be null (XState fails when the transition is taken); leave target out for a targetless transition", where)
			} else if ok && tv != "" {
				t.Targets = r.readTargets(tv, sp, iat.key("target"))
				t.HasTarget = true
				r.targets[t] = iat.key("target")
			}
			if gv, ok := x.Get("guard"); ok && gv != nil {
				t.Guard = r.guard(gv, sp, iat.key("guard"), where)
			}
			if av, ok := x.Get("actions"); ok {
				t.Actions = r.actions(av, sp, iat.key("actions"), where)
			}
			if rv, ok := x.Get("reenter"); ok {
				b, isBool := rv.(bool)
				if !isBool {
					r.errorf(sp, iat.key("reenter"), "%s: reenter must be true or false", where)
				}
				t.Reenter = b
			}
			if dv, ok := x.Get("description"); ok {
				t.Description, _ = dv.(string)
			}
			if mv, ok := x.Get("meta"); ok {
				t.Meta = Plain(mv)
			}
		default:
			if r.fns != nil {
				if _, isAction, _ := r.fns.Action(it); isAction {
					r.errorf(sp, iat, "%s: a transition must be a target string or an object, not a function", where)
					continue
				}
			}
			r.errorf(sp, iat, "%s: a transition must be a target string or an object", where)
			continue
		}
		out = append(out, t)
	}
	return out
}

func (r *configReader) actions(v any, sp string, at loc, where string) []interp.Action {
	var items []any
	list := false
	switch x := v.(type) {
	case []any:
		items, list = x, true
	case nil:
		return nil
	default:
		items = []any{x}
	}
	var out []interp.Action
	for i, it := range items {
		iat := at
		if list {
			iat = at.index(i)
		}
		if a := r.action(it, sp, iat, where); a != nil {
			r.referAction(a, sp, iat)
			out = append(out, a)
		}
	}
	return out
}

func (r *configReader) action(v any, sp string, at loc, where string) interp.Action {
	if _, isList := v.([]any); isList {
		// XState takes a list inside the list of actions for an action
		// with no type, which does nothing.
		r.warnf(sp, at, "%s: a list inside a list of actions is ignored (XState does nothing with it): write its actions in the outer list", where)
		return nil
	}
	var fn func(any) (interp.Action, bool, error)
	if r.fns != nil {
		fn = r.fns.Action
	}
	return readNamed(r, v, sp, at, where, "action", fn, func(name string, params *interp.Expr) interp.Action {
		return &interp.NamedAction{Type: name, Params: params}
	})
}

// readNamed reads an action or a guard as XState takes one: a name, an
// object {type, params}, or (in a module) a function or a value the
// module's resolver knows, which fn converts.
func readNamed[T any](r *configReader, v any, sp string, at loc, where, kind string, fn func(any) (T, bool, error), named func(string, *interp.Expr) T) T {
	var zero T
	fromModule := func(at loc) (T, bool) {
		if fn == nil {
			return zero, false
		}
		x, ok, err := fn(v)
		if ok && err != nil {
			r.errorf(sp, at, "%s: %v", where, err)
		}
		return x, ok
	}
	switch x := v.(type) {
	case string:
		return named(x, nil)
	case *Object:
		tv, _ := x.Get("type")
		name, ok := tv.(string)
		if !ok || name == "" {
			if out, ok := fromModule(at); ok {
				return out
			}
			r.errorf(sp, at, "%s: %s %s object needs a string type", where, article(kind), kind)
			return zero
		}
		var params *interp.Expr
		if pv, ok := x.Get("params"); ok {
			params = r.params(pv)
		}
		return named(name, params)
	}
	if out, ok := fromModule(at); ok {
		return out
	}
	r.errorf(sp, at, "%s: %s %s must be a name or {type, params}", where, article(kind), kind)
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
		if e, ok := r.fns.ParamsExpr(v); ok {
			return e
		}
	}
	return interp.Static(Plain(v))
}

// input is the input of an invoked actor: a value or a function.
func (r *configReader) input(v any) *interp.Expr {
	if r.fns != nil {
		if e, ok := r.fns.InputExpr(v); ok {
			return e
		}
	}
	return interp.Static(Plain(v))
}

func (r *configReader) guard(v any, sp string, at loc, where string) interp.Guard {
	var fn func(any) (interp.Guard, bool, error)
	if r.fns != nil {
		fn = r.fns.Guard
	}
	g := readNamed(r, v, sp, at, where, "guard", fn, func(name string, params *interp.Expr) interp.Guard {
		return &interp.NamedGuard{Type: name, Params: params}
	})
	r.referGuard(g, sp, at)
	return g
}

func (r *configReader) invokes(v any, sp string, at loc) []*interp.InvokeDef {
	var items []any
	list := false
	switch x := v.(type) {
	case []any:
		items, list = x, true
	default:
		items = []any{x}
	}
	var out []*interp.InvokeDef
	for i, it := range items {
		iat := at
		if list {
			iat = at.index(i)
		}
		o, ok := it.(*Object)
		if !ok {
			r.errorf(sp, iat, "invoke must be an object with a src")
			continue
		}
		d := &interp.InvokeDef{}
		if idv, ok := o.Get("id"); ok {
			d.ID, _ = idv.(string)
		}
		if sv, ok := o.Get("systemId"); ok {
			d.SystemID, _ = sv.(string)
		}
		switch src := o.Vals["src"].(type) {
		case string:
			d.Src = src
			r.refer("actor", src, sp, iat.key("src"))
		case nil:
			r.errorf(sp, iat, "invoke needs a src")
		default:
			if r.fns != nil {
				if logic, ok := r.fns.InvokeSrc(src); ok {
					d.Logic = logic
					break
				}
			}
			r.errorf(sp, iat.key("src"), "invoke src must name an actor")
		}
		if iv, ok := o.Get("input"); ok {
			d.Input = r.input(iv)
		}
		where := "invoke"
		if d.ID != "" {
			where += " " + d.ID
		}
		if dv, ok := o.Get("onDone"); ok {
			d.OnDone = r.transitions(dv, sp, iat.key("onDone"), where+" onDone")
		}
		if ev, ok := o.Get("onError"); ok {
			d.OnError = r.transitions(ev, sp, iat.key("onError"), where+" onError")
		}
		if snv, ok := o.Get("onSnapshot"); ok {
			d.OnSnapshot = r.transitions(snv, sp, iat.key("onSnapshot"), where+" onSnapshot")
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

func typeName(t interp.StateType) string { return t.String() }
