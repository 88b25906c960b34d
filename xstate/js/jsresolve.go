package js

import (
	"errors"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/dop251/goja"

	"github.com/stategate/stategate/internal/config"
	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/xstate"
)

// jsResolver turns the functions and shim descriptions of a module into
// interp guards, actions, expressions and actor logics whose code runs in
// the runtime a step is lent.
type jsResolver struct {
	mod *jsModule
	// atLoad is set for the resolver of the module's load: the static
	// values it makes are the module's, for every instance (statics).
	atLoad bool
	// loc locates the problems of the config being compiled (Locate);
	// nil when its source is not known.
	loc *configLocator
}

// fnLabel names a function in errors.
func fnLabel(kind string, f *jsFn, name string) string {
	switch {
	case name != "":
		return fmt.Sprintf("%s '%s'", kind, name)
	case f != nil && f.name != "":
		return fmt.Sprintf("%s '%s'", kind, f.name)
	}
	return "inline " + kind
}

// paramsJS converts params: nil is undefined, as XState passes for none.
//
// Params that are a Go map or slice (a config's static params, or those a
// check() names) are given frozen, and the conversion is kept for the
// calls of every actor tree: params are the machine's, made as it loaded
// (in XState every actor gets the config's very object). A params
// function's result stays the object it returned (jsLazy).
func (rt *jsRuntime) paramsJS(p any) goja.Value {
	switch x := p.(type) {
	case nil:
		return goja.Undefined()
	case map[string]any:
		if len(x) > 0 {
			return rt.frozenJS(reflect.ValueOf(x).UnsafePointer(), x)
		}
	case []any:
		if len(x) > 0 {
			return rt.frozenJS(unsafe.Pointer(unsafe.SliceData(x)), x)
		}
	}
	return rt.toJS(p)
}

// callFn calls f with ({context, event, ...}, params) in the step's runtime.
func callFn(f *jsFn, label string, a interp.Args, params any) (*jsRuntime, goja.Value, error) {
	rt, err := runtimeOf(a)
	if err != nil {
		return nil, nil, err
	}
	c, ok := f.callable(rt)
	if !ok {
		return nil, nil, fmt.Errorf("%s is not a function", label)
	}
	out, err := rt.invoke2(c, label, "", rt.callArgs(a), rt.paramsJS(params))
	return rt, out, err
}

// exprFn is an expression computed by f. The JavaScript value f returns is
// kept for its Go value (a context, an output), which converts back to it.
func (r *jsResolver) exprFn(f *jsFn, label string) *interp.Expr {
	return &interp.Expr{Fn: func(a interp.Args, params any) (any, error) {
		rt, out, err := callFn(f, label, a, params)
		if err != nil {
			return nil, err
		}
		return rt.keep(out), nil
	}}
}

// params is the params of a guard or action: a static value or a function
// of ({context, event}).
func (r *jsResolver) params(v any, label string) *interp.Expr {
	f, ok := v.(*jsFn)
	if !ok {
		return r.value(v, label)
	}
	return paramsFn(f, label)
}

// paramsExpr is params for the config reader: false for a static value,
// but at load, where a static value is noted as the module's (statics).
func (r *jsResolver) ParamsExpr(v any) (*interp.Expr, bool) {
	if f, ok := v.(*jsFn); ok {
		return paramsFn(f, fnLabel("function", f, "")), true
	}
	return r.static(v)
}

// static is the Expr of a static value the module's config writes, noted
// as the module's (statics) while it loads; false after.
func (r *jsResolver) static(v any) (*interp.Expr, bool) {
	if !r.atLoad {
		return nil, false
	}
	plain := config.Plain(v)
	r.mod.addStatic(plain)
	return interp.Static(plain), true
}

// paramsFn computes params with f. What f returns stays a JavaScript
// value (jsLazy) for the guard or action the params are for, which gets
// the very object, as in XState; Go code gets it converted.
func paramsFn(f *jsFn, label string) *interp.Expr {
	return &interp.Expr{Fn: func(a interp.Args, params any) (any, error) {
		rt, out, err := callFn(f, label, a, params)
		if err != nil {
			return nil, err
		}
		return rt.lazy(out), nil
	}}
}

// inputExpr is the input of an invoked actor for the config reader: false
// for a static value. What a function returns stays a JavaScript value
// (jsLazy) for the actor's code, which starts in the step (a child
// started after the step gets it converted: interp's sealStarts).
func (r *jsResolver) InputExpr(v any) (*interp.Expr, bool) {
	f, ok := v.(*jsFn)
	if !ok {
		return r.static(v)
	}
	label := fnLabel("function", f, "")
	return &interp.Expr{Fn: func(a interp.Args, params any) (any, error) {
		rt, out, err := callFn(f, label, a, params)
		if err != nil {
			return nil, err
		}
		return rt.lazy(out), nil
	}}, true
}

func (r *jsResolver) Expr(v any) (*interp.Expr, bool) {
	if f, ok := v.(*jsFn); ok {
		return r.exprFn(f, fnLabel("function", f, "")), true
	}
	return nil, false
}

// value is a static value or a function of ({context, event}, params).
func (r *jsResolver) value(v any, label string) *interp.Expr {
	if v == nil {
		return nil
	}
	if _, undef := v.(config.Undefined); undef {
		return nil
	}
	if f, ok := v.(*jsFn); ok {
		return r.exprFn(f, label)
	}
	plain := config.Plain(v)
	if r.atLoad {
		r.mod.addStatic(plain)
	}
	return interp.Static(plain)
}

// event is the event of a raise, emit or sendTo: an object, or a function
// of ({context, event}, params) returning one, whose object becomes the
// Event directly (eventOf).
func (r *jsResolver) event(v any, label string) *interp.Expr {
	return r.eventExpr(v, label, func(rt *jsRuntime, o *goja.Object) (any, bool) { return rt.eventOf(o) })
}

// emitted is the event of an emit: as event, but an object a function
// returns becomes a LazyEvent, converted only for a listener.
func (r *jsResolver) emitted(v any, label string) *interp.Expr {
	return r.eventExpr(v, label, func(rt *jsRuntime, o *goja.Object) (any, bool) { return rt.lazyEvent(o) })
}

// eventExpr is event and emitted: toEvent turns the object a function
// returns into the event.
func (r *jsResolver) eventExpr(v any, label string, toEvent func(*jsRuntime, *goja.Object) (any, bool)) *interp.Expr {
	return r.fnExpr(v, label, func(rt *jsRuntime, out goja.Value) any {
		if o := plainObject(out); o != nil {
			if ev, ok := toEvent(rt, o); ok {
				return ev
			}
		}
		return rt.fromJS(out)
	})
}

// fnExpr is the Expr of v: a value as it is, or a function whose result
// convert turns into the expression's value.
func (r *jsResolver) fnExpr(v any, label string, convert func(*jsRuntime, goja.Value) any) *interp.Expr {
	f, ok := v.(*jsFn)
	if !ok {
		return r.value(v, label)
	}
	return &interp.Expr{Fn: func(a interp.Args, params any) (any, error) {
		rt, out, err := callFn(f, label, a, params)
		if err != nil {
			return nil, err
		}
		return convert(rt, out), nil
	}}
}

func (r *jsResolver) Guard(v any) (interp.Guard, bool, error) {
	return r.guardNamed(v, "")
}

func (r *jsResolver) guardNamed(v any, name string) (interp.Guard, bool, error) {
	switch x := v.(type) {
	case string:
		return &interp.NamedGuard{Type: x}, true, nil
	case *config.Object:
		t, _ := x.Vals["type"].(string)
		if t == "" {
			return nil, true, errors.New("a guard object needs a string type")
		}
		g := &interp.NamedGuard{Type: t}
		if p, ok := x.Get("params"); ok {
			g.Params = r.params(p, fmt.Sprintf("params of guard '%s'", t))
		}
		return g, true, nil
	case *jsFn:
		label := fnLabel("guard", x, name)
		return &interp.FuncGuard{Name: name, Fn: func(a interp.Args, params any) (bool, error) {
			_, out, err := callFn(x, label, a, params)
			if err != nil {
				return false, err
			}
			return out.ToBoolean(), nil
		}}, true, nil
	case *jsMarker:
		switch x.kind {
		case "and", "or":
			list, _ := x.get("guards").([]any)
			var gs []interp.Guard
			for _, e := range list {
				g, ok, err := r.Guard(e)
				if !ok || err != nil {
					return nil, true, errOr(err, fmt.Errorf("%s(): not a guard: %v", x.kind, e))
				}
				gs = append(gs, g)
			}
			if x.kind == "and" {
				return &interp.AndGuard{Guards: gs}, true, nil
			}
			return &interp.OrGuard{Guards: gs}, true, nil
		case "not":
			g, ok, err := r.Guard(x.get("guard"))
			if !ok || err != nil {
				return nil, true, errOr(err, errors.New("not(): not a guard"))
			}
			return &interp.NotGuard{Guard: g}, true, nil
		case "stateIn":
			return &interp.StateInGuard{State: config.Plain(x.get("state"))}, true, nil
		}
		return nil, true, fmt.Errorf("%s() is not a guard", x.kind)
	}
	return nil, false, nil
}

func errOr(err, alt error) error {
	if err != nil {
		return err
	}
	return alt
}

func (r *jsResolver) Action(v any) (interp.Action, bool, error) {
	return r.actionNamed(v, "")
}

// actionNamed converts an action; name is its name in the implementations.
func (r *jsResolver) actionNamed(v any, name string) (interp.Action, bool, error) {
	switch x := v.(type) {
	case string:
		return &interp.NamedAction{Type: x}, true, nil
	case *config.Object:
		t, _ := x.Vals["type"].(string)
		if t == "" {
			return nil, true, errors.New("an action object needs a string type")
		}
		a := &interp.NamedAction{Type: t}
		if p, ok := x.Get("params"); ok {
			a.Params = r.params(p, fmt.Sprintf("params of action '%s'", t))
		}
		return a, true, nil
	case *jsFn:
		label := fnLabel("action", x, name)
		return &interp.FuncAction{Name: name, Fn: func(a interp.Args, params any) error {
			_, _, err := callFn(x, label, a, params)
			return err
		}}, true, nil
	case *jsMarker:
		a, err := r.marker(x, name)
		return a, true, err
	}
	return nil, false, nil
}

// delay sets the delay of a raise or sendTo: milliseconds, a named delay,
// or a function.
func (r *jsResolver) delay(v any) (*interp.Expr, string) {
	switch d := v.(type) {
	case string:
		return nil, d
	case nil, config.Undefined:
		return nil, ""
	}
	return r.value(v, "delay"), ""
}

func (r *jsResolver) marker(x *jsMarker, name string) (interp.Action, error) {
	label := func(what string) string {
		if name != "" {
			return fmt.Sprintf("%s of action '%s'", what, name)
		}
		return what
	}
	switch x.kind {
	case "assign":
		return r.assign(x.get("assignment"), label("assign"))
	case "raise":
		a := &interp.RaiseAction{Event: r.event(x.get("event"), label("raise event")), ID: r.value(x.get("id"), label("raise id"))}
		a.Delay, a.DelayName = r.delay(x.get("delay"))
		if a.Event == nil {
			return nil, errors.New("raise() needs an event")
		}
		return a, nil
	case "emit":
		return &interp.EmitAction{Event: r.emitted(x.get("event"), label("emit event"))}, nil
	case "log":
		lbl, _ := x.get("label").(string)
		val := r.value(x.get("value"), label("log"))
		if val == nil {
			val = &interp.Expr{Fn: func(a interp.Args, _ any) (any, error) {
				return map[string]any{"context": a.Context, "event": a.Event.Object()}, nil
			}}
		}
		return &interp.LogAction{Value: val, Label: lbl}, nil
	case "sendTo", "sendParent", "forwardTo":
		a := &interp.SendToAction{Parent: x.kind == "sendParent", ID: r.value(x.get("id"), label(x.kind+" id"))}
		if x.kind != "forwardTo" {
			a.Event = r.event(x.get("event"), label(x.kind+" event"))
			if a.Event == nil {
				return nil, fmt.Errorf("%s() needs an event", x.kind)
			}
		}
		if x.kind != "sendParent" {
			a.To = r.target(x.get("to"), label(x.kind+" target"))
		}
		a.Delay, a.DelayName = r.delay(x.get("delay"))
		return a, nil
	case "cancel":
		return &interp.CancelAction{ID: r.value(x.get("id"), label("cancel id"))}, nil
	case "spawnChild":
		a := &interp.SpawnAction{ID: r.value(x.get("id"), label("spawnChild id")), Input: r.value(x.get("input"), label("spawnChild input"))}
		a.SystemID, _ = x.get("systemId").(string)
		a.SyncSnapshot, _ = x.get("syncSnapshot").(bool)
		switch src := x.get("src").(type) {
		case string:
			a.Src = src
		default:
			logic, ok, err := r.invokeLogic(src)
			if !ok || err != nil {
				return nil, errOr(err, errors.New("spawnChild() needs an actor name or logic"))
			}
			a.Logic = logic
		}
		return a, nil
	case "stopChild":
		return &interp.StopAction{ID: r.target(x.get("actor"), label("stopChild"))}, nil
	case "enqueueActions":
		f, ok := x.get("fn").(*jsFn)
		if !ok {
			return nil, errors.New("enqueueActions() needs a function")
		}
		return r.enqueue(f, label("enqueueActions")), nil
	}
	return nil, fmt.Errorf("%s() is not an action", x.kind)
}

// target evaluates an actor: an id, or an actor ref from a function (one
// the runtime made, such as system.get's, is the actor itself; another
// object is taken for its id).
func (r *jsResolver) target(v any, label string) *interp.Expr {
	return r.fnExpr(v, label, func(rt *jsRuntime, out goja.Value) any {
		if o, ok := out.(*goja.Object); ok {
			if ref, ok := o.Export().(*selfObj); ok {
				return ref.actor
			}
		}
		v := rt.fromJS(out)
		if m, ok := v.(map[string]any); ok {
			if id, ok := m["id"].(string); ok {
				return id
			}
		}
		return v
	})
}

func (r *jsResolver) assign(v any, label string) (interp.Action, error) {
	switch x := v.(type) {
	case *jsFn:
		return &interp.AssignAction{Into: func(a interp.Args, params any, ctx map[string]any) error {
			rt, out, err := callFn(x, label, a, params)
			if err != nil {
				return err
			}
			rt.partialUpdate(out, ctx)
			return nil
		}}, nil
	case *config.Object:
		keys := x.Keys
		fns := make([]*jsFn, len(keys))
		static := make([]any, len(keys))
		for i, k := range keys {
			if f, ok := x.Vals[k].(*jsFn); ok {
				fns[i] = f
			} else {
				static[i] = config.Plain(x.Vals[k])
			}
		}
		// A key set to undefined leaves the context (JSON has no
		// undefined: XState's context shows without it).
		for _, k := range x.Undef {
			keys = append(keys, k)
			fns = append(fns, nil)
			static = append(static, config.Undefined{})
		}
		return assignProps(keys, fns, static, label), nil
	}
	return nil, errors.New("assign() needs a function or an object")
}

// assignProps makes assign({key: value or function, ...}): keys[i] is set
// to static[i], or to what fns[i] returns when it is not nil.
func assignProps(keys []string, fns []*jsFn, static []any, label string) interp.Action {
	labels := make([]string, len(keys))
	for i, k := range keys {
		if fns[i] != nil {
			labels[i] = label + " of '" + k + "'"
		}
	}
	return &interp.AssignAction{Into: func(a interp.Args, params any, ctx map[string]any) error {
		for i, k := range keys {
			if fns[i] == nil {
				if _, undef := static[i].(config.Undefined); undef {
					delete(ctx, k)
				} else {
					ctx[k] = static[i]
				}
				continue
			}
			rt, v, err := callFn(fns[i], labels[i], a, params)
			if err != nil {
				return err
			}
			setOrDrop(ctx, k, v, rt)
		}
		return nil
	}}
}

// enqueue makes XState's enqueueActions: the function gets enqueue (with
// enqueue.assign, enqueue.raise, ...) and check, and the actions it
// enqueues are read after it returns.
func (r *jsResolver) enqueue(f *jsFn, label string) interp.Action {
	return &interp.EnqueueAction{Fn: func(a interp.Args, params any, check func(interp.Guard) (bool, error)) ([]interp.Action, error) {
		rt, err := runtimeOf(a)
		if err != nil {
			return nil, err
		}
		// The actions of this call go after those of the calls around it
		// in the runtime's queue (enqueueActions may nest).
		start := len(rt.queue)
		defer func() { clear(rt.queue[start:]); rt.queue = rt.queue[:start] }()
		prev := rt.enq
		defer func() { rt.enq = prev }()
		for len(rt.enqCalls) <= rt.depth {
			rt.enqCalls = append(rt.enqCalls, &enqueueCall{})
		}
		call := rt.enqCalls[rt.depth]
		*call = enqueueCall{r: r, check: check}
		defer func() { *call = enqueueCall{} }()
		rt.enq = call
		args := rt.enqueueArgs(a)
		if params == nil {
			// (One argument less keeps goja's stack smaller.)
			_, err = rt.callFn(f, label, args)
		} else {
			_, err = rt.callFn(f, label, args, rt.paramsJS(params))
		}
		if err != nil {
			if call.failed != nil {
				return nil, call.failed
			}
			return nil, err
		}
		rt.enq = prev
		queued := rt.queue[start:]
		var w *walker
		actions := make([]interp.Action, 0, len(queued))
		for _, q := range queued {
			act := quickQueued(rt, q)
			if act == nil {
				if w == nil {
					w = &walker{rt: rt, direct: true}
				}
				if act, err = r.queuedAction(w, q); err != nil {
					return nil, err
				}
			}
			actions = append(actions, act)
		}
		return actions, nil
	}}
}

// enqueueCall is the state of an enqueueActions function that runs: what
// check() evaluates guards with, and the first error of a check().
type enqueueCall struct {
	r      *jsResolver
	check  func(interp.Guard) (bool, error)
	failed error
}

// checkGuard is check(gv) for the call.
func (c *enqueueCall) checkGuard(rt *jsRuntime, gv goja.Value) (bool, error) {
	g, err := c.r.checked(rt, gv)
	if err == nil {
		var pass bool
		if pass, err = c.check(g); err == nil {
			return pass, nil
		}
	}
	if c.failed == nil {
		c.failed = err
	}
	return false, c.failed
}

// checked converts the argument of check(): a guard's name, or a guard.
func (r *jsResolver) checked(rt *jsRuntime, gv goja.Value) (interp.Guard, error) {
	if goja.IsString(gv) {
		return rt.namedGuard(gv.String()), nil
	}
	if g := namedGuardJS(rt, gv); g != nil {
		return g, nil
	}
	w := &walker{rt: rt, direct: true}
	v, err := w.walk(gv, 0)
	if err != nil {
		return nil, err
	}
	g, ok, err := r.Guard(v)
	if !ok || err != nil {
		return nil, errOr(err, errors.New("check(): not a guard"))
	}
	return g, nil
}

// namedAction returns the action enqueue() makes of an action's name,
// made once per name (actions are not changed).
func (rt *jsRuntime) namedAction(name string) *interp.NamedAction {
	return byName(&rt.actions, name, func() *interp.NamedAction { return &interp.NamedAction{Type: name} })
}

// namedGuard returns the guard check() makes of a guard's name, made once
// per name (guards are not changed).
func (rt *jsRuntime) namedGuard(name string) *interp.NamedGuard {
	return byName(&rt.guards, name, func() *interp.NamedGuard { return &interp.NamedGuard{Type: name} })
}

// byName returns the value of name in a runtime's cache, made by mk the
// first time; the cache starts over when it holds maxIDs values.
func byName[T any](cache *map[string]*T, name string, mk func() *T) *T {
	if v, ok := (*cache)[name]; ok {
		return v
	}
	v := mk()
	if *cache == nil || len(*cache) >= maxIDs {
		*cache = map[string]*T{}
	}
	(*cache)[name] = v
	return v
}

// namedGuardJS converts {type, params} with static params directly, or
// returns nil. The params stay a JavaScript value (the guard is evaluated
// at once, in this runtime), so the guard gets the very object it was
// given, as in XState.
func namedGuardJS(rt *jsRuntime, v goja.Value) *interp.NamedGuard {
	o := plainObject(v)
	if o == nil {
		return nil
	}
	t := o.Get("type")
	if t == nil || !goja.IsString(t) {
		return nil
	}
	g := &interp.NamedGuard{Type: t.String()}
	p := o.Get("params")
	if p == nil || goja.IsUndefined(p) || goja.IsNull(p) {
		return g
	}
	if _, isFn := goja.AssertFunction(p); isFn {
		return nil
	}
	g.Params = interp.Static(rt.lazy(p))
	return g
}

// invokeSrc converts the src of an invoke.
func (r *jsResolver) InvokeSrc(v any) (interp.ActorLogic, bool) {
	l, ok, err := r.invokeLogic(v)
	return l, ok && err == nil
}

// invokeLogic converts actor logic made by the shim.
func (r *jsResolver) invokeLogic(v any) (interp.ActorLogic, bool, error) {
	x, ok := v.(*jsMarker)
	if !ok {
		return nil, false, nil
	}
	switch x.kind {
	case "machine":
		m, err := r.machine(x)
		if err != nil {
			return nil, true, err
		}
		return &interp.MachineLogic{Machine: m}, true, nil
	case "promise":
		f, ok := x.get("creator").(*jsFn)
		if !ok {
			return nil, true, errors.New("fromPromise() needs a function")
		}
		return r.promise(f), true, nil
	case "callback":
		f, ok := x.get("callback").(*jsFn)
		if !ok {
			return nil, true, errors.New("fromCallback() needs a function")
		}
		return r.callback(f), true, nil
	case "transition":
		f, ok := x.get("transition").(*jsFn)
		if !ok {
			return nil, true, errors.New("fromTransition() needs a function")
		}
		return r.reducer(f, x.get("initialState")), true, nil
	case "observable", "eventObservable":
		f, ok := x.get("creator").(*jsFn)
		if !ok {
			return nil, true, fmt.Errorf("from%s() needs a function", map[string]string{"observable": "Observable", "eventObservable": "EventObservable"}[x.kind])
		}
		return r.observable(f, x.kind == "eventObservable"), true, nil
	}
	return nil, true, fmt.Errorf("%s() is not actor logic", x.kind)
}

// machine compiles a machine described by the shim (a child machine).
func (r *jsResolver) machine(x *jsMarker) (*interp.Machine, error) {
	cfg, ok := x.get("config").(*config.Object)
	if !ok {
		return nil, errors.New("createMachine() needs a config object")
	}
	impl, diags := r.implementations(x.get("implementations"))
	if len(diags) > 0 {
		return nil, &xstate.LoadError{File: r.mod.file, Diags: diags}
	}
	// The child's problems are located in its own config.
	child := *r
	child.loc = r.loc.forConfig(cfg)
	m, _, err := compile(r.mod.file, cfg, &child, impl)
	child.loc = nil // the machine keeps no reference to the bundle's code
	var le *xstate.LoadError
	if errors.As(err, &le) {
		// Its text goes in a message of the parent's, which clients may
		// be told: without the lines of the file (Diagnostic.Public).
		for i := range le.Diags {
			le.Diags[i].Source = ""
		}
	}
	return m, err
}

// implementations converts {guards, actions, actors, delays}.
func (r *jsResolver) implementations(v any) (interp.Implementations, []xstate.Diagnostic) {
	impl := interp.Implementations{Host: r.mod}
	o, ok := v.(*config.Object)
	if !ok {
		return impl, nil
	}
	var diags []xstate.Diagnostic
	bad := func(kind, name string, err error) {
		diags = append(diags, xstate.Diagnostic{File: r.mod.file, Msg: fmt.Sprintf("%s '%s': %v", kind, name, err)})
	}
	if gs, ok := o.Vals["guards"].(*config.Object); ok {
		impl.Guards = map[string]interp.Guard{}
		for _, k := range gs.Keys {
			g, isGuard, err := r.guardNamed(gs.Vals[k], k)
			if !isGuard || err != nil {
				bad("guard", k, errOr(err, errors.New("not a guard")))
				continue
			}
			impl.Guards[k] = g
		}
	}
	if as, ok := o.Vals["actions"].(*config.Object); ok {
		impl.Actions = map[string]interp.Action{}
		for _, k := range as.Keys {
			a, isAction, err := r.actionNamed(as.Vals[k], k)
			if !isAction || err != nil {
				bad("action", k, errOr(err, errors.New("not an action")))
				continue
			}
			impl.Actions[k] = a
		}
	}
	if as, ok := o.Vals["actors"].(*config.Object); ok {
		impl.Actors = map[string]interp.ActorLogic{}
		for _, k := range as.Keys {
			l, isLogic, err := r.invokeLogic(as.Vals[k])
			if !isLogic || err != nil {
				bad("actor", k, errOr(err, errors.New("not actor logic (a machine, fromPromise, fromCallback or fromTransition)")))
				continue
			}
			impl.Actors[k] = l
		}
	}
	if ds, ok := o.Vals["delays"].(*config.Object); ok {
		impl.Delays = map[string]interp.Delay{}
		for _, k := range ds.Keys {
			impl.Delays[k] = r.value(ds.Vals[k], fmt.Sprintf("delay '%s'", k))
		}
	}
	return impl, diags
}

// queuedAction is what enqueue() or enqueue.assign(...) and the like were
// called with: a value that is an action, or the arguments of the named
// action creator.
type queuedAction struct {
	kind string // "" for enqueue(action)
	args []goja.Value
}

// creatorFields maps the arguments of the shim's action creators to the
// fields of their descriptions (as shim.js does).
var creatorFields = map[string][]string{
	"assign":     {"assignment"},
	"raise":      {"event", "@options"},
	"emit":       {"event"},
	"log":        {"value", "label"},
	"sendTo":     {"to", "event", "@options"},
	"sendParent": {"event", "@options"},
	"forwardTo":  {"to", "@options"},
	"cancel":     {"id"},
	"spawnChild": {"src", "@spawn"},
	"stopChild":  {"actor"},
}

// queuedAction converts an enqueued action, building the description of
// enqueue.assign(...) and the like in Go rather than in the runtime.
func (r *jsResolver) queuedAction(w *walker, q queuedAction) (interp.Action, error) {
	if q.kind == "" {
		v, err := w.walk(q.args[0], 0)
		if err != nil {
			return nil, err
		}
		act, ok, err := r.Action(v)
		if !ok || err != nil {
			return nil, errOr(err, fmt.Errorf("enqueue(): not an action: %v", q.args[0]))
		}
		return act, nil
	}
	fields := &config.Object{Vals: map[string]any{}}
	set := func(k string, v any) {
		if _, undef := v.(config.Undefined); undef {
			return
		}
		fields.Keys = append(fields.Keys, k)
		fields.Vals[k] = v
	}
	for i, name := range creatorFields[q.kind] {
		if i >= len(q.args) {
			break
		}
		v, err := w.walk(q.args[i], 0)
		if err != nil {
			return nil, err
		}
		switch name {
		case "@options", "@spawn":
			opts, _ := v.(*config.Object)
			if opts == nil {
				continue
			}
			keys := []string{"delay", "id"}
			if name == "@spawn" {
				keys = []string{"id", "input", "systemId", "syncSnapshot"}
			}
			for _, k := range keys {
				if x, ok := opts.Get(k); ok {
					set(k, x)
				}
			}
		default:
			set(name, v)
		}
	}
	return r.marker(&jsMarker{kind: q.kind, fields: fields}, "")
}

// quickQueued converts the commonest enqueued actions directly, or
// returns nil: an action's name, and assign, raise and emit of a plain
// object.
func quickQueued(rt *jsRuntime, q queuedAction) interp.Action {
	if q.kind == "" {
		if goja.IsString(q.args[0]) {
			return rt.namedAction(q.args[0].String())
		}
		return nil
	}
	o := plainObject(q.args[0])
	if o == nil {
		return nil
	}
	switch q.kind {
	case "assign":
		return rt.assignment(o)
	case "emit":
		if ev, ok := rt.lazyEvent(o); ok {
			return &interp.EmitAction{Event: interp.Static(ev)}
		}
	case "raise":
		if len(q.args) > 1 && !goja.IsUndefined(q.args[1]) {
			return nil // options
		}
		if ev, ok := rt.eventOf(o); ok {
			return &interp.RaiseAction{Event: interp.Static(ev)}
		}
	}
	return nil
}

// lazyEvent is an event object to emit as a LazyEvent, or false when it
// has no string type: a listener gets its data as the object holds it
// when the event is emitted, as in XState, where listeners get the object.
func (rt *jsRuntime) lazyEvent(o *goja.Object) (interp.LazyEvent, bool) {
	t := o.Get("type")
	if t == nil || !goja.IsString(t) {
		return interp.LazyEvent{}, false
	}
	return interp.LazyEvent{Type: t.String(), Data: func() map[string]any {
		ev, _ := rt.eventOf(o)
		return ev.Data
	}}, true
}

// eventOf converts an event object to an Event, or reports false when it
// has no string type. The object is remembered for the event's data, so
// code the event goes to gets that very object (eventJS), as in XState.
func (rt *jsRuntime) eventOf(o *goja.Object) (interp.Event, bool) {
	m, ok := rt.fromJS(o).(map[string]any) // a map of its own
	if !ok {
		return interp.Event{}, false
	}
	t, ok := m["type"].(string)
	if !ok {
		return interp.Event{}, false
	}
	delete(m, "type")
	if len(m) == 0 {
		return interp.Event{Type: t}, true
	}
	rt.remember(m, o)
	return interp.Event{Type: t, Data: m}, true
}

// plainObject returns v if it is an ordinary object: not a function, an
// array, another built-in object or a description made by the shim.
func plainObject(v goja.Value) *goja.Object {
	o, ok := v.(*goja.Object)
	if !ok || o.ClassName() != "Object" {
		return nil
	}
	if _, isFn := goja.AssertFunction(o); isFn {
		return nil
	}
	if m := o.Get(shimMark); m != nil && !goja.IsUndefined(m) {
		return nil
	}
	return o
}

// setOrDrop sets a context key to a JavaScript value; undefined removes
// the key, as JSON shows XState's context.
func setOrDrop(ctx map[string]any, k string, v goja.Value, rt *jsRuntime) {
	if v == nil || goja.IsUndefined(v) {
		delete(ctx, k)
		return
	}
	ctx[k] = rt.lazy(v)
}

// assignment makes assign(o) for an object o. As XState's assign, it reads
// o when the action runs: its functions are called with the action's
// ({context, event, ...}, params), its other values are taken as they are.
func (rt *jsRuntime) assignment(o *goja.Object) interp.Action {
	return &interp.AssignAction{Into: func(a interp.Args, params any, ctx map[string]any) error {
		for _, k := range config.KeyOrder(rt.keysOf(o)) {
			v := o.Get(k)
			if f, isFn := goja.AssertFunction(v); isFn {
				var err error
				if v, err = rt.invoke2(f, "assign", k, rt.callArgs(a), rt.paramsJS(params)); err != nil {
					return err
				}
			}
			setOrDrop(ctx, k, v, rt)
		}
		return nil
	}}
}
