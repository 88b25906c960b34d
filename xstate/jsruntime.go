package xstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/dop251/goja"

	"stategate/interp"
)

var jsonUnmarshal = json.Unmarshal

// ErrInterrupted is wrapped by the error of a script that ran past its
// time limit.
var ErrInterrupted = errors.New("script interrupted")

// maxCallStack bounds the depth of JavaScript calls: deep recursion stops
// with a RangeError-like error, not a crash.
const maxCallStack = 4096

// jsModule is one loaded module: its compiled program, run in runtimes
// taken from a pool, each used by one goroutine at a time. It is the Host
// of the machines it defines.
type jsModule struct {
	file    string
	prog    *goja.Program
	prelude *goja.Program
	timeout time.Duration
	// roots finds, in a runtime's module exports, the values whose
	// functions are numbered (the machine, or the implementations).
	roots func(rt *goja.Runtime, exports *goja.Object) ([]goja.Value, error)

	mu   sync.Mutex
	idle []*jsRuntime
}

// jsRuntime is a goja runtime with the module evaluated in it and the
// module's functions numbered as the loader numbered them.
type jsRuntime struct {
	mod   *jsModule
	vm    *goja.Runtime
	fns   []goja.Value
	depth int // nesting of calls from Go

	timer   *time.Timer
	mu      sync.Mutex
	running bool // a top-level call is running: the timer may interrupt it
	// conversion caches: the last context and event converted.
	lastCtx   any
	lastCtxJS goja.Value
	xs        *goja.Object // the shim's API, for enqueueActions
}

// Acquire lends a runtime for a step.
func (m *jsModule) Acquire() (any, func()) {
	rt, err := m.get()
	if err != nil {
		return &jsBroken{err}, func() {}
	}
	return rt, func() { m.put(rt) }
}

// jsBroken is what a step gets when no runtime could be made; every call
// fails with its error.
type jsBroken struct{ err error }

func (m *jsModule) get() (*jsRuntime, error) {
	m.mu.Lock()
	if n := len(m.idle); n > 0 {
		rt := m.idle[n-1]
		m.idle = m.idle[:n-1]
		m.mu.Unlock()
		return rt, nil
	}
	m.mu.Unlock()
	rt, _, err := m.newRuntime(false)
	return rt, err
}

// maxIdle bounds the runtimes a module keeps for reuse.
const maxIdle = 64

func (m *jsModule) put(rt *jsRuntime) {
	m.mu.Lock()
	if len(m.idle) < maxIdle {
		m.idle = append(m.idle, rt)
	}
	m.mu.Unlock()
}

// newRuntime evaluates the module in a fresh runtime and numbers its
// functions. With describe set it also returns the roots as Go values for
// the config reader.
func (m *jsModule) newRuntime(describe bool) (*jsRuntime, []any, error) {
	vm := goja.New()
	vm.SetMaxCallStackSize(maxCallStack)
	rt := &jsRuntime{mod: m, vm: vm}
	rt.timer = time.AfterFunc(time.Hour, func() {
		rt.mu.Lock()
		if rt.running {
			vm.Interrupt(ErrInterrupted)
		}
		rt.mu.Unlock()
	})
	rt.timer.Stop()
	var exports *goja.Object
	err := rt.guard(func() error {
		if _, err := vm.RunProgram(m.prelude); err != nil {
			return err
		}
		rt.xs = vm.Get("__sgXState").ToObject(vm)
		if _, err := vm.RunProgram(m.prog); err != nil {
			return err
		}
		ex := vm.Get(bundleGlobal)
		if ex == nil || goja.IsUndefined(ex) || goja.IsNull(ex) {
			return errors.New("the module has no exports")
		}
		exports = ex.ToObject(vm)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", m.file, jsErr(err))
	}
	roots, err := m.roots(vm, exports)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", m.file, err)
	}
	w := &walker{rt: rt, describe: describe, seen: map[*goja.Object]bool{}}
	var out []any
	for _, r := range roots {
		v, err := w.walk(r, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", m.file, err)
		}
		out = append(out, v)
	}
	return rt, out, nil
}

// guard runs f as a top-level call: it is interrupted past the module's
// time limit, and a Go panic from goja becomes an error.
func (rt *jsRuntime) guard(f func() error) (err error) {
	top := rt.depth == 0
	rt.depth++
	if top && rt.mod.timeout > 0 {
		rt.mu.Lock()
		rt.running = true
		rt.mu.Unlock()
		rt.timer.Reset(rt.mod.timeout)
	}
	defer func() {
		rt.depth--
		if top && rt.mod.timeout > 0 {
			rt.mu.Lock()
			rt.running = false
			rt.mu.Unlock()
			rt.timer.Stop()
			rt.vm.ClearInterrupt()
		}
		if r := recover(); r != nil {
			if so, ok := r.(*goja.StackOverflowError); ok {
				err = &jsError{msg: "Maximum call stack size exceeded", cause: so}
				return
			}
			panic(r)
		}
	}()
	return f()
}

// call calls a JS function with Go arguments converted to JS.
func (rt *jsRuntime) call(fn goja.Value, what string, args ...goja.Value) (goja.Value, error) {
	f, ok := goja.AssertFunction(fn)
	if !ok {
		return nil, fmt.Errorf("%s is not a function", what)
	}
	var out goja.Value
	err := rt.guard(func() error {
		var err error
		out, err = f(goja.Undefined(), args...)
		return err
	})
	if err != nil {
		var ie *goja.InterruptedError
		if errors.As(err, &ie) {
			return nil, fmt.Errorf("%s: %w: ran longer than %v", what, ErrInterrupted, rt.mod.timeout)
		}
		return nil, jsErr(err)
	}
	return out, nil
}

// jsError is a JavaScript exception: its message is the thrown error's
// message, as XState reports it.
type jsError struct {
	msg   string
	value any // the thrown value, as a Go value
	cause error
}

func (e *jsError) Error() string { return e.msg }
func (e *jsError) Unwrap() error { return e.cause }

// jsErr converts a goja error to a jsError with the message XState would
// show (String(error.message ?? error)).
func jsErr(err error) error {
	var ex *goja.Exception
	if errors.As(err, &ex) {
		v := ex.Value()
		msg := v.String()
		if o, ok := v.(*goja.Object); ok {
			if m := o.Get("message"); m != nil && !goja.IsUndefined(m) {
				msg = m.String()
			}
		}
		return &jsError{msg: msg, cause: err}
	}
	var ie *goja.InterruptedError
	if errors.As(err, &ie) {
		return fmt.Errorf("%w", ErrInterrupted)
	}
	return err
}

// runtimeOf returns the runtime a step was lent.
func runtimeOf(a interp.Args) (*jsRuntime, error) {
	switch rt := a.Runtime.(type) {
	case *jsRuntime:
		return rt, nil
	case *jsBroken:
		return nil, rt.err
	}
	return nil, errors.New("no JavaScript runtime for this step")
}

// toJS converts a JSON-like Go value to a JavaScript value.
func (rt *jsRuntime) toJS(v any) goja.Value {
	vm := rt.vm
	switch x := v.(type) {
	case nil:
		return goja.Null()
	case undefinedValue:
		return goja.Undefined()
	case bool, string, float64, int, int64:
		return vm.ToValue(x)
	case map[string]any:
		o := vm.NewObject()
		for _, k := range sortedKeys(x) {
			_ = o.Set(k, rt.toJS(x[k]))
		}
		return o
	case []any:
		items := make([]any, len(x))
		for i, e := range x {
			items[i] = rt.toJS(e)
		}
		return vm.NewArray(items...)
	case interp.Event:
		o := vm.NewObject()
		_ = o.Set("type", x.Type)
		for _, k := range sortedKeys(x.Data) {
			_ = o.Set(k, rt.toJS(x.Data[k]))
		}
		return o
	case *jsError:
		if x.value != nil {
			return rt.toJS(x.value)
		}
		return rt.newError(x.msg)
	case error:
		return rt.newError(x.Error())
	case *interp.Actor:
		o := vm.NewObject()
		_ = o.Set("id", x.ID)
		return o
	case goja.Value:
		return x
	}
	return vm.ToValue(v)
}

func (rt *jsRuntime) newError(msg string) goja.Value {
	ctor, ok := goja.AssertConstructor(rt.vm.Get("Error"))
	if !ok {
		return rt.vm.ToValue(msg)
	}
	o, err := ctor(nil, rt.vm.ToValue(msg))
	if err != nil {
		return rt.vm.ToValue(msg)
	}
	return o
}

// undefinedValue stands for JavaScript's undefined among Go values.
type undefinedValue struct{}

// fromJS converts a JavaScript value to a JSON-like Go value, as
// JSON.parse(JSON.stringify(v)) would (undefined and functions are
// dropped from objects; NaN and Infinity become null).
func (rt *jsRuntime) fromJS(v goja.Value) any {
	return rt.fromJSDepth(v, 0)
}

func (rt *jsRuntime) fromJSDepth(v goja.Value, depth int) any {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) || depth > 200 {
		return nil
	}
	switch v.ExportType() {
	case nil:
		return nil
	}
	o, isObj := v.(*goja.Object)
	if !isObj {
		switch x := v.Export().(type) {
		case int64:
			return float64(x)
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil
			}
			return x
		case bool, string:
			return x
		}
		return v.String()
	}
	if _, isFn := goja.AssertFunction(o); isFn {
		return nil
	}
	if toJSON, ok := goja.AssertFunction(o.Get("toJSON")); ok {
		if r, err := toJSON(o); err == nil {
			return rt.fromJSDepth(r, depth+1)
		}
	}
	if o.ClassName() == "Array" {
		n := int(o.Get("length").ToInteger())
		out := make([]any, n)
		for i := range n {
			out[i] = rt.fromJSDepth(o.Get(fmt.Sprint(i)), depth+1)
		}
		return out
	}
	if o.ClassName() == "Error" {
		m := map[string]any{}
		if msg := o.Get("message"); msg != nil {
			m["message"] = msg.String()
		}
		return m
	}
	keys := o.Keys()
	m := make(map[string]any, len(keys))
	for _, k := range keys {
		e := o.Get(k)
		if e == nil || goja.IsUndefined(e) {
			continue
		}
		if eo, ok := e.(*goja.Object); ok {
			if _, isFn := goja.AssertFunction(eo); isFn {
				continue
			}
		}
		m[k] = rt.fromJSDepth(e, depth+1)
	}
	return m
}

// argsJS builds the ({context, event, ...}) argument of a call.
func (rt *jsRuntime) argsJS(a interp.Args) *goja.Object {
	o := rt.vm.NewObject()
	_ = o.Set("context", rt.contextJS(a.Context))
	_ = o.Set("event", rt.toJS(a.Event))
	if a.Input != nil {
		_ = o.Set("input", rt.toJS(a.Input))
	}
	if a.Self != nil {
		_ = o.Set("self", rt.selfJS(a.Self))
	}
	return o
}

// contextJS converts a context, reusing the last conversion when the
// context is the same (contexts are never changed in place).
func (rt *jsRuntime) contextJS(ctx any) goja.Value {
	if m, ok := ctx.(map[string]any); ok && rt.lastCtxJS != nil {
		if last, ok := rt.lastCtx.(map[string]any); ok && sameMap(last, m) {
			return rt.lastCtxJS
		}
	}
	v := rt.toJS(ctx)
	if _, ok := ctx.(map[string]any); ok {
		rt.lastCtx, rt.lastCtxJS = ctx, v
	}
	return v
}

func (rt *jsRuntime) selfJS(a *interp.Actor) goja.Value {
	o := rt.vm.NewObject()
	_ = o.Set("id", a.ID)
	_ = o.Set("send", func(call goja.FunctionCall) goja.Value {
		if obj, ok := rt.fromJS(call.Argument(0)).(map[string]any); ok {
			if ev, ok := interp.EventFromObject(obj); ok {
				a.Send(ev)
			}
		}
		return goja.Undefined()
	})
	return o
}
