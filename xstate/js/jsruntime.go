package js

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/dop251/goja"

	"github.com/stategate/stategate/internal/config"
	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/xstate"
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
	files   []string     // the files bundled (absolute paths)
	console *slog.Logger // where console.log and the like go; nil: nowhere
	// prog is the module made into a function of the host's helpers
	// (instrument), prelude the shim that gives enqueueActions its API,
	// hardenProg the script that makes a runtime's hardener (jsharden.go).
	prog, prelude, hardenProg *goja.Program
	clock                     *hostClock  // performance.now's
	plan                      *hardenPlan // the Host's, how to freeze the intrinsics
	// stateful says why the module's code has state that cannot be
	// frozen (instrument), "" when it has none.
	stateful string
	dog      *watchdog // the Host's, which bounds the calls' time and memory
	limits   sandboxLimits
	// roots finds, in a runtime's module exports, the values whose
	// functions are numbered (the machine, or the implementations).
	roots func(rt *goja.Runtime, exports *goja.Object) ([]goja.Value, error)
	// plainObjects gives code contexts and events as plain objects, not
	// dynamic ones, for a module whose code may lock objects.
	plainObjects bool
	// statics are the maps and slices of the machine's static values (the
	// params, inputs and events its config writes), shared by every
	// instance: made at load, only read after. A runtime gives code a
	// frozen conversion of each, which it keeps across actor trees (see
	// staticJS).
	statics map[unsafe.Pointer]bool

	mu       sync.Mutex
	idle     []*jsRuntime
	all      []*jsRuntime // every runtime made and not dropped, for the watchdog
	watching atomic.Bool  // the watchdog looks after the module's calls
}

// jsRuntime is a goja runtime with the module evaluated in it and the
// module's functions numbered as the Host numbered them.
type jsRuntime struct {
	mod *jsModule
	vm  *goja.Runtime
	fns []goja.Value
	// callables are the fns as goja calls them, made on first use.
	callables []goja.Callable
	depth     int // nesting of calls from Go

	// calls counts the top-level calls begun and ended: it is odd while
	// one runs. The rest is the watchdog's, under the module's lock: the
	// call it saw (seen) and since when, the heap the call counts from
	// (base), the collections completed then (gcs) and the heap's goal;
	// whether it
	// interrupted the runtime, which is then not used again; and the
	// context of the step the runtime is lent for (nil when none).
	calls       atomic.Uint64
	seen        uint64
	since       time.Time
	base, gcs   uint64
	goal        uint64 // the collector's heap goal when the call was first seen
	interrupted bool
	tookTooMuch bool // it was interrupted for its memory
	ctx         context.Context
	// stop is closed when the watchdog interrupts the runtime, for the
	// regular expressions that wait for a match (jsregexp.go).
	stop chan struct{}
	// What keeps each event from seeing another's changes (jsharden.go):
	// the hardener and the intrinsics it froze; whether the module is
	// loading, and the readers its code registered meanwhile; the
	// variables and RegExps to put back after each event; whether an
	// event changed what cannot be put back (the runtime is then dropped);
	// and the root of the actor tree whose calls the conversions kept are
	// for.
	hardener   *hardener
	intrinsics map[*goja.Object]bool // frozen before the module ran
	loading    bool
	readers    []reader
	bound      []goja.Value // what bind was given while the module loaded
	watched    []watchedVar
	regexps    []watchedRegExp
	// atLoad are the objects made at load whose state freezing does not
	// fix, touched those of them changed since the runtime was lent, and
	// madeAtLoad every object the module made at load.
	atLoad     map[*goja.Object]*loaded
	touched    []*goja.Object
	madeAtLoad map[*goja.Object]bool
	dirty      bool
	// stateful says why what the module made at load in this runtime can
	// be neither frozen nor watched: the runtime then serves one step.
	stateful string
	root     *interp.Actor
	// staticJSs are the frozen conversions of the module's statics,
	// frozenIDs and oldFrozenIDs those of params (see paramsJS): both kept
	// for every actor tree.
	staticJSs               map[unsafe.Pointer]goja.Value
	frozenIDs, oldFrozenIDs map[unsafe.Pointer]idEntry
	// rxCache holds the regular expressions compiled for RegExp objects
	// (jsregexp.go), by object.
	rxCache map[*goja.Object]*boundedRegExp
	rxByKey map[string]*boundedRegExp
	// lastSubject is the last string matched, as regexp2 reads it; noop a
	// function of no code, which raises a pending interrupt.
	lastSubject *subject
	noop        goja.Callable
	// hostRoots are objects the host made that code can reach but no
	// global leads to (the matchAll iterators' prototype): frozen with
	// the intrinsics.
	hostRoots []goja.Value
	// the last self converted.
	lastSelf   *interp.Actor
	lastSelfJS goja.Value
	// refs are the actor refs made, by actor (see actorRef).
	refs map[*interp.Actor]*goja.Object
	// owner is the snapshot of the call in progress, whose children the
	// actor refs kept in its context are (see revive).
	owner *interp.Snapshot
	xs    *goja.Object // the shim's API, for enqueueActions
	// enqueueActions' enqueue and check functions, made once; they act on
	// the call in progress.
	enqueue *goja.Object
	check   goja.Value
	// queue holds the actions enqueued by the enqueueActions calls in
	// progress, innermost last; enq is the function that runs (nil when
	// none), enqCalls the states of such calls by depth, reused.
	queue    []queuedAction
	enq      *enqueueCall
	enqCalls []*enqueueCall
	// qargs backs the arguments of queued actions.
	qargs []goja.Value
	// guards and actions are those check() and enqueue() made of names.
	guards  map[string]*interp.NamedGuard
	actions map[string]*interp.NamedAction
	// ids maps Go maps and slices (contexts are never changed in place)
	// to the JavaScript values they were converted from or to, so that a
	// value crosses between Go and this runtime once.
	ids, oldIDs map[unsafe.Pointer]idEntry
	// last is the entry cached found last (it keeps its Go value, whose
	// address lastID is, alive), with the length it had.
	last    idEntry
	lastID  unsafe.Pointer
	lastLen int
	// argObjs are the argument objects of calls, by depth; events are
	// the conversions of events without data, by type.
	argObjs    []*argsObj
	enqArgObjs []*argsObj       // the same for enqueueActions functions
	argBufs    []*[2]goja.Value // arguments of calls, by depth (invoke2)
	logicArg   *argsObj         // the same for promise creators
	events     map[string]idEntry
	// gen counts the times the runtime forgot its conversions: an entry
	// of ids or events made before is not used.
	gen uint64
	// signal and emitNoop are what promise creators get as signal and
	// emit (promiseExtras).
	signal, emitNoop goja.Value
	// convErr is the first conversion of the step that could not be made
	// (fromJS); Seal fails the step with it.
	convErr error
	// joining are the arrays whose join is in progress (a cycle joins as
	// ""), and joined counts the elements the outermost one walked.
	joining []*goja.Object
	joined  int64
}

type idEntry struct {
	goVal any
	js    goja.Value
	gen   uint64 // the runtime's gen when it was made (see forget)
	// ctx is the context or event object js is, which a call of another
	// actor tree (another gen) may get again, what code did to it undone.
	ctx *ctxObj
}

// maxIDs bounds a generation of a runtime's conversion cache: when one is
// full it becomes the old one, and the one before is dropped.
const maxIDs = 512

func identity(v any) (unsafe.Pointer, int, bool) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			return nil, 0, false
		}
		return reflect.ValueOf(x).UnsafePointer(), len(x), true
	case []any:
		if len(x) == 0 {
			return nil, 0, false
		}
		return unsafe.Pointer(unsafe.SliceData(x)), len(x), true
	}
	return nil, 0, false
}

// cached returns the JavaScript value a Go map or slice was converted
// from or to, or nil.
func (rt *jsRuntime) cached(v any) goja.Value {
	p, n, ok := identity(v)
	if !ok {
		return nil
	}
	// The last value looked up, most often the one looked up again (the
	// context and event of the calls of a step).
	if p == rt.lastID && n == rt.lastLen {
		return rt.last.js
	}
	e, hit := rt.ids[p]
	if !hit {
		if e, hit = rt.oldIDs[p]; !hit {
			return nil
		}
	}
	if _, m, _ := identity(e.goVal); m != n {
		return nil
	}
	if e.gen != rt.gen {
		if e.ctx == nil {
			return nil // a plain object code of another tree may have changed
		}
		e.ctx.renew()
		e.gen = rt.gen
		if _, inNew := rt.ids[p]; inNew {
			rt.ids[p] = e
		} else {
			rt.oldIDs[p] = e
		}
	}
	rt.lastID, rt.lastLen, rt.last = p, n, e
	return e.js
}

func (rt *jsRuntime) remember(v any, js goja.Value) { rt.rememberCtx(v, js, nil) }

// rememberCtx is remember for a context or event object.
func (rt *jsRuntime) rememberCtx(v any, js goja.Value, c *ctxObj) {
	p, _, ok := identity(v)
	if !ok {
		return
	}
	if rt.ids == nil || len(rt.ids) >= maxIDs {
		rt.oldIDs = rt.ids
		rt.ids = make(map[unsafe.Pointer]idEntry, maxIDs) // no growth in a generation
	}
	rt.ids[p] = idEntry{goVal: v, js: js, gen: rt.gen, ctx: c}
	if p == rt.lastID {
		rt.lastID = nil
	}
}

// addStatic notes the maps and slices of a static value of the machine
// (see statics); it is called as the module loads, before any step.
func (m *jsModule) addStatic(v any) {
	p, _, ok := identity(v)
	if !ok {
		return
	}
	if m.statics == nil {
		m.statics = map[unsafe.Pointer]bool{}
	}
	m.statics[p] = true
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			m.addStatic(e)
		}
	case []any:
		for _, e := range x {
			m.addStatic(e)
		}
	}
}

// staticMap and staticSlice return the conversion of a static value of
// the machine (nil for another value): made once per runtime and frozen,
// deep, as what the module made at load is, so that it is safe to give
// every instance.
func (rt *jsRuntime) staticMap(x map[string]any) goja.Value {
	if len(rt.mod.statics) == 0 || len(x) == 0 {
		return nil
	}
	p := reflect.ValueOf(x).UnsafePointer()
	if !rt.mod.statics[p] {
		return nil
	}
	return rt.staticJS(p, x)
}

func (rt *jsRuntime) staticSlice(x []any) goja.Value {
	if len(rt.mod.statics) == 0 || len(x) == 0 {
		return nil
	}
	p := unsafe.Pointer(unsafe.SliceData(x))
	if !rt.mod.statics[p] {
		return nil
	}
	return rt.staticJS(p, x)
}

func (rt *jsRuntime) staticJS(p unsafe.Pointer, v any) goja.Value {
	if js, ok := rt.staticJSs[p]; ok {
		return js
	}
	js := rt.frozenConvert(v)
	if rt.staticJSs == nil {
		rt.staticJSs = map[unsafe.Pointer]goja.Value{}
	}
	rt.staticJSs[p] = js
	return js
}

// frozenJS is a frozen conversion of a Go map or slice (at p), made once
// and kept by the runtime (two generations of maxIDs, as ids), for every
// actor tree: code can change nothing of it.
func (rt *jsRuntime) frozenJS(p unsafe.Pointer, v any) goja.Value {
	if e, ok := rt.frozenIDs[p]; ok {
		return e.js
	}
	if e, ok := rt.oldFrozenIDs[p]; ok {
		return e.js
	}
	js := rt.frozenConvert(v)
	if rt.frozenIDs == nil || len(rt.frozenIDs) >= maxIDs {
		rt.oldFrozenIDs = rt.frozenIDs
		rt.frozenIDs = make(map[unsafe.Pointer]idEntry, maxIDs)
	}
	rt.frozenIDs[p] = idEntry{goVal: v, js: js} // goVal keeps p's value alive
	return js
}

// frozenConvert converts a JSON-like Go value to JavaScript, every object
// and array in it new and frozen.
func (rt *jsRuntime) frozenConvert(v any) goja.Value {
	var js *goja.Object
	switch x := v.(type) {
	case map[string]any:
		js = rt.vm.NewObject()
		for _, k := range slices.Sorted(maps.Keys(x)) {
			setOwn(js, k, rt.frozenConvert(x[k]))
		}
	case []any:
		items := make([]any, len(x))
		for i, e := range x {
			items[i] = rt.frozenConvert(e)
		}
		js = rt.vm.NewArray(items...)
	default:
		return rt.toJS(v)
	}
	_, _ = rt.hardener.freeze(goja.Undefined(), js)
	return js
}

// jsLazy is a value an assign left in the context, or params, that is
// still a JavaScript value of the runtime of the step; it is converted when
// the step ends (Seal), or when Go code gets it (Plain).
type jsLazy struct {
	rt *jsRuntime
	v  goja.Value
}

// Seal converts the JavaScript values a step left in a context, or a lazy
// value (params), to Go values (interp.Thread). A context is sealed in
// place: a context with such values is one the step made (by an assign)
// and no one else has seen, and the Go values stand for the same values,
// so the context's JavaScript object, if the step made one, stands for the
// sealed context too.
//
// A value that cannot be converted (see convert) fails the step: that
// error, or one a conversion earlier in the step met, is returned.
func (rt *jsRuntime) Seal(v any) (any, error) {
	v, err := sealLazy(v)
	if err != nil {
		return v, err
	}
	if err := rt.conversionError(); err != nil {
		return v, err
	}
	return v, nil
}

// Release gives the runtime back to its module's pool (interp.Thread).
func (rt *jsRuntime) Release() { rt.mod.put(rt) }

// sealLazy converts the lazy values of a context in place, or a lazy
// value, each with its own runtime.
func sealLazy(v any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if l, lazy := e.(*jsLazy); lazy {
				x[k] = l.seal()
				if err := l.rt.conversionError(); err != nil {
					return v, err
				}
			}
		}
	case *jsLazy:
		g := x.seal()
		if err := x.rt.conversionError(); err != nil {
			return v, err
		}
		return g, nil
	}
	return v, nil
}

// conversionError returns, and forgets, the error of a conversion of the
// step that could not be made (fromJS), nil when none.
func (rt *jsRuntime) conversionError() error {
	err := rt.convErr
	rt.convErr = nil
	return err
}

// seal converts a lazy value to Go; the conversion is remembered, so the
// runtime gives back the same JavaScript value for it.
func (l *jsLazy) seal() any {
	g := l.rt.fromJS(l.v)
	l.rt.remember(g, l.v)
	return g
}

// Plain returns v with no JavaScript values left in it, for Go code (a
// Registry's functions; xstate.PlainValues): a lazy value (params)
// converted, a context a copy when it has some (JavaScript code later in
// the step still gets the very values).
func (rt *jsRuntime) Plain(v any) any { return plain(v) }

func plain(v any) any {
	switch x := v.(type) {
	case *jsLazy:
		return x.seal()
	case map[string]any:
		var out map[string]any
		for k, e := range x {
			if l, lazy := e.(*jsLazy); lazy {
				if out == nil {
					out = maps.Clone(x)
				}
				out[k] = l.seal()
			}
		}
		if out != nil {
			return out
		}
	}
	return v
}

// Acquire lends a runtime for a step of an actor whose work ctx bounds
// (interp.Host): the watchdog interrupts a call in progress when ctx
// ends.
func (m *jsModule) Acquire(ctx context.Context) interp.Thread {
	rt, err := m.get()
	if err != nil {
		return &jsBroken{err}
	}
	if ctx.Done() != nil {
		m.mu.Lock()
		rt.ctx = ctx
		m.mu.Unlock()
	}
	return rt
}

var (
	_ xstate.FilesHost   = (*jsModule)(nil)
	_ interp.Thread      = (*jsRuntime)(nil)
	_ interp.Thread      = (*jsBroken)(nil)
	_ xstate.PlainValues = (*jsRuntime)(nil)
	_ xstate.PlainValues = (*jsBroken)(nil)
)

// jsBroken is what a step gets when no runtime could be made; every call
// fails with its error.
type jsBroken struct{ err error }

// Seal converts the lazy values of other runtimes (this step made none).
func (b *jsBroken) Seal(v any) (any, error) { return sealLazy(v) }

// Plain is the runtime's Plain, for lazy values of other runtimes.
func (b *jsBroken) Plain(v any) any { return plain(v) }

// Release does nothing: the step had no runtime.
func (b *jsBroken) Release() {}

func (m *jsModule) get() (*jsRuntime, error) {
	m.mu.Lock()
	if n := len(m.idle); n > 0 {
		rt := m.idle[n-1]
		m.idle = m.idle[:n-1]
		m.mu.Unlock()
		return rt, nil
	}
	m.mu.Unlock()
	rt, _, err := m.newRuntime(context.Background())
	return rt, err
}

// maxIdle bounds the runtimes a module keeps for reuse.
const maxIdle = 8

// put takes a runtime back: into the pool, the module's state put back as
// it was after load (jsharden.go), unless that cannot be done, the
// watchdog interrupted it, or the pool is full; else it is dropped.
func (m *jsModule) put(rt *jsRuntime) {
	m.mu.Lock()
	interrupted, tookTooMuch := rt.interrupted, rt.tookTooMuch
	m.mu.Unlock()
	if tookTooMuch {
		// What the call took is garbage once its runtime is dropped:
		// collected before the step ends, so that the next calls do not
		// count it as the heap they start from (see callBase).
		defer runtime.GC()
	}
	drop := interrupted || rt.restore()
	m.mu.Lock()
	rt.ctx = nil
	if len(m.idle) < maxIdle && !rt.interrupted && !drop {
		m.idle = append(m.idle, rt)
	} else {
		for i, x := range m.all {
			if x == rt {
				m.all = append(m.all[:i], m.all[i+1:]...)
				break
			}
		}
	}
	m.mu.Unlock()
}

// newRuntime evaluates the module in a fresh runtime, numbers its
// functions and freezes what it made (jsharden.go); it also returns the
// roots as Go values for the config reader. ctx bounds the top-level code
// (the watchdog interrupts it when ctx ends), as the time and memory
// limits do.
func (m *jsModule) newRuntime(ctx context.Context) (*jsRuntime, []any, error) {
	vm := goja.New()
	vm.SetMaxCallStackSize(maxCallStack)
	rt := &jsRuntime{mod: m, vm: vm, loading: true, atLoad: map[*goja.Object]*loaded{}, stop: make(chan struct{})}
	m.mu.Lock()
	m.all = append(m.all, rt)
	if ctx.Done() != nil {
		rt.ctx = ctx
	}
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		rt.ctx = nil
		m.mu.Unlock()
	}()
	var out []any
	var stateful string
	err := rt.guard(func() error {
		spread, spread1, err := installSpread(vm, m.limits, (&sandbox{rt: rt, lim: m.limits}).tooMany)
		if err != nil {
			return err
		}
		for _, install := range []func() error{rt.installConsole, rt.installGlobals, rt.installIntl, rt.installHardener, rt.installLimits, rt.installOverrides} {
			if err := install(); err != nil {
				return err
			}
		}
		// goja's GoError is not the module's to name.
		if err := vm.GlobalObject().Delete("GoError"); err != nil {
			return err
		}
		if rt.intrinsics, err = rt.hardener.freezeIntrinsics(m.plan); err != nil {
			return err
		}
		xs, err := vm.RunProgram(m.prelude)
		if err != nil {
			return err
		}
		rt.xs = xs.ToObject(vm)
		wrapper, err := vm.RunProgram(m.prog)
		if err != nil {
			return err
		}
		run, ok := goja.AssertFunction(wrapper)
		if !ok {
			return errors.New("the module did not compile to a function")
		}
		res, err := run(goja.Undefined(), spread, spread1, vm.ToValue(rt.registerReader))
		if err != nil {
			return err
		}
		pair := res.ToObject(vm)
		ex := pair.Get("0")
		if ex == nil || goja.IsUndefined(ex) || goja.IsNull(ex) {
			return errors.New("the module has no exports")
		}
		exports := ex.ToObject(vm)
		roots, err := m.roots(vm, exports)
		if err != nil {
			return err
		}
		w := &walker{rt: rt}
		for _, r := range roots {
			v, err := w.walk(r, 0)
			if err == nil {
				err = rt.conversionError()
			}
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		if stateful, err = rt.hardenLoaded([]goja.Value{exports, rt.xs}); err != nil {
			return err
		}
		endLoad, _ := goja.AssertFunction(pair.Get("1"))
		if endLoad != nil {
			if _, err := endLoad(goja.Undefined()); err != nil {
				return err
			}
		}
		rt.loading = false
		return nil
	})
	if err != nil {
		m.drop(rt)
		var ie *goja.InterruptedError
		if errors.As(err, &ie) {
			return nil, nil, fmt.Errorf("%s: %w", m.file, rt.interruptError("its top-level code", ie.Value()))
		}
		return nil, nil, fmt.Errorf("%s: %w", m.file, jsErr(err))
	}
	rt.stateful = stateful
	if rt.stateful == "" {
		rt.stateful = m.stateful
	}
	return rt, out, nil
}

// drop forgets a runtime that will not be used.
func (m *jsModule) drop(rt *jsRuntime) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, x := range m.all {
		if x == rt {
			m.all = append(m.all[:i], m.all[i+1:]...)
			return
		}
	}
}

// guard runs f as a top-level call: it is interrupted past the module's
// time limit, and a Go panic from goja becomes an error.
func (rt *jsRuntime) guard(f func() error) (err error) {
	defer rt.leave(rt.enter(), &err)
	return f()
}

// enter begins a call into the runtime; it returns whether the call is a
// top-level one, which the watchdog times.
func (rt *jsRuntime) enter() bool {
	top := rt.depth == 0
	rt.depth++
	if top {
		rt.calls.Add(1)
		rt.mod.watch()
	}
	return top
}

// leave ends a call begun by enter; deferred, it turns a stack overflow
// in goja into *err.
func (rt *jsRuntime) leave(top bool, err *error) {
	rt.depth--
	if top {
		rt.mod.mu.Lock() // the watchdog interrupts under this lock
		rt.calls.Add(1)
		rt.mod.mu.Unlock()
		rt.vm.ClearInterrupt()
	}
	if r := recover(); r != nil {
		if so, ok := r.(*goja.StackOverflowError); ok {
			*err = &jsError{msg: "Maximum call stack size exceeded", cause: so}
			return
		}
		if !top {
			panic(r) // on to the top-level call
		}
		// A panic of goja's own (a bug of the engine: goja v0.0.0-20260917
		// indexes out of range on `arguments` in an arrow function):
		// the call fails, and the runtime, in a state no one knows, is
		// not used again.
		rt.mod.mu.Lock()
		rt.interrupted = true
		rt.mod.mu.Unlock()
		*err = fmt.Errorf("%w: %v", ErrEngine, r)
	}
}

// ErrEngine is wrapped by the error of a call that the JavaScript engine
// itself failed (a panic in goja).
var ErrEngine = errors.New("the JavaScript engine failed")

// call calls a JS function with Go arguments converted to JS.
func (rt *jsRuntime) call(fn goja.Value, what string, args ...goja.Value) (goja.Value, error) {
	f, ok := goja.AssertFunction(fn)
	if !ok {
		return nil, fmt.Errorf("%s is not a function", what)
	}
	return rt.invoke(f, what, "", args)
}

// callFn calls a function of the module.
func (rt *jsRuntime) callFn(f *jsFn, what string, args ...goja.Value) (goja.Value, error) {
	c, ok := f.callable(rt)
	if !ok {
		return nil, fmt.Errorf("%s is not a function", what)
	}
	return rt.invoke(c, what, "", args)
}

// invoke runs a call, with its errors as XState shows them. what names
// the function in an error, with key when it is a property's ("assign of
// 'total'"): the name is made only for an error.
func (rt *jsRuntime) invoke(f goja.Callable, what, key string, args []goja.Value) (out goja.Value, err error) {
	err = rt.run(f, args, &out)
	if err != nil {
		var ie *goja.InterruptedError
		if errors.As(err, &ie) {
			if key != "" {
				what += " of '" + key + "'"
			}
			return nil, rt.interruptError(what, ie.Value())
		}
		return nil, jsErr(err)
	}
	return out, nil
}

// invoke2 is invoke with two arguments, passed in a slice of the runtime
// for the depth of the call (goja copies the arguments of a JavaScript
// function; those of the runtime's native functions are not kept).
func (rt *jsRuntime) invoke2(f goja.Callable, what, key string, a0, a1 goja.Value) (goja.Value, error) {
	for len(rt.argBufs) <= rt.depth {
		rt.argBufs = append(rt.argBufs, new([2]goja.Value))
	}
	buf := rt.argBufs[rt.depth]
	buf[0], buf[1] = a0, a1
	out, err := rt.invoke(f, what, key, buf[:])
	buf[0], buf[1] = nil, nil
	return out, err
}

// run calls f as guard would run it, without making a closure.
func (rt *jsRuntime) run(f goja.Callable, args []goja.Value, out *goja.Value) (err error) {
	defer rt.leave(rt.enter(), &err)
	*out, err = f(goja.Undefined(), args...)
	return err
}

// jsError is a JavaScript exception: its message is the thrown error's
// message, as XState reports it.
type jsError struct {
	msg   string
	value any // the thrown value, as a Go value
	cause error
	// noMessage is set when the thrown value has no message property (a
	// string was thrown): XState's guard errors then say undefined.
	noMessage bool
	// js is the thrown value in runtime rt, when known.
	rt *jsRuntime
	js goja.Value
}

func (e *jsError) Error() string { return e.msg }

// Message is the thrown value's message property, as XState's wrapping
// errors read it: false when it has none.
func (e *jsError) Message() (string, bool) { return e.msg, !e.noMessage }
func (e *jsError) Unwrap() error           { return e.cause }

// goja's words for the commonest runtime errors, and V8's, which XState's
// users (and traces) see: reading a property of undefined above all.
var gojaReadOf = regexp.MustCompile(`^Cannot read property '(.*)' of (undefined or null|undefined|null)$`)

// v8Message says an error of goja's as V8 says it, where the two differ
// only in words.
func v8Message(msg string) string {
	if m := gojaReadOf.FindStringSubmatch(msg); m != nil {
		of := m[2]
		if of == "undefined or null" {
			of = "undefined"
		}
		return "Cannot read properties of " + of + " (reading '" + m[1] + "')"
	}
	if msg == "No initial value" {
		return "Reduce of empty array with no initial value"
	}
	return msg
}

// jsErr converts a goja error to a jsError with the message XState would
// show (String(error.message ?? error)).
func jsErr(err error) error {
	var so *goja.StackOverflowError
	if errors.As(err, &so) {
		return &jsError{msg: "Maximum call stack size exceeded", cause: err}
	}
	var ex *goja.Exception
	if errors.As(err, &ex) {
		v := ex.Value()
		msg := v.String()
		noMessage := true
		if o, ok := v.(*goja.Object); ok {
			if m := o.Get("message"); m != nil && !goja.IsUndefined(m) {
				noMessage = false
				msg = m.String()
				if v8 := v8Message(msg); v8 != msg {
					// The error as a machine sees it (an onError's
					// event.error) says it as V8 does too.
					_ = o.Set("message", v8)
					msg = v8
				}
			}
		}
		return &jsError{msg: msg, cause: err, noMessage: noMessage}
	}
	var ie *goja.InterruptedError
	if errors.As(err, &ie) {
		if reason, ok := ie.Value().(error); ok {
			return reason // ErrInterrupted, ErrMemory, or the cause of a step's end
		}
		return fmt.Errorf("%w", ErrInterrupted)
	}
	return err
}

// runtimeOf returns the runtime a step was lent.
func runtimeOf(a interp.Args) (*jsRuntime, error) {
	switch rt := a.Thread.(type) {
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
	case config.Undefined:
		return goja.Undefined()
	case bool, string, float64, int, int64:
		return vm.ToValue(x)
	case map[string]any:
		if js := rt.cached(x); js != nil {
			return js
		}
		if ref := rt.revive(x); ref != nil {
			return ref
		}
		if js := rt.staticMap(x); js != nil {
			return js
		}
		o := vm.NewObject()
		var buf [16]string
		keys := buf[:0]
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			setOwn(o, k, rt.toJS(x[k]))
		}
		rt.remember(x, o)
		return o
	case []any:
		if js := rt.cached(x); js != nil {
			return js
		}
		if js := rt.staticSlice(x); js != nil {
			return js
		}
		items := make([]any, len(x))
		for i, e := range x {
			items[i] = rt.toJS(e)
		}
		a := vm.NewArray(items...)
		rt.remember(x, a)
		return a
	case interp.Event:
		o := vm.NewObject()
		_ = o.Set("type", x.Type)
		for _, k := range slices.Sorted(maps.Keys(x.Data)) {
			setOwn(o, k, rt.toJS(x.Data[k]))
		}
		return o
	case *jsError:
		if x.js != nil && x.rt == rt {
			return x.js
		}
		if x.value != nil {
			return rt.toJS(x.value)
		}
		return rt.newError(x.msg)
	case error:
		return rt.newError(x.Error())
	case *interp.Actor:
		return rt.actorRef(x) // an actor ref kept in a context
	case *jsLazy:
		if x.rt == rt {
			return x.v
		}
		return rt.toJS(x.rt.fromJS(x.v))
	case goja.Value:
		return x
	}
	return vm.ToValue(v)
}

// setOwn makes k an own property of a new object, as JSON.parse would:
// a "__proto__" key too, which assigning would take for the object's
// prototype.
func setOwn(o *goja.Object, k string, v goja.Value) {
	if k == "__proto__" {
		_ = o.DefineDataProperty(k, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE)
		return
	}
	_ = o.Set(k, v)
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

// primitive converts a value that is not an object as normalize(Export())
// does, a number without the int64 Export makes of it.
func primitive(v goja.Value) any {
	if goja.IsNumber(v) {
		f := v.ToFloat()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		return number(f)
	}
	return normalize(v.Export())
}

// smallNumbers holds the integers 0 to 1023 as float64 in interfaces,
// made once and only read: converting such a number to `any` allocates
// none.
var smallNumbers = func() (t [1024]any) {
	for i := range t {
		t[i] = float64(i)
	}
	return t
}()

// number returns f as `any`, without allocating for a small integer.
func number(f float64) any {
	if f >= 0 && f < float64(len(smallNumbers)) && f == math.Trunc(f) && !math.Signbit(f) {
		return smallNumbers[int(f)]
	}
	return f
}

// normalize turns what goja's Export gives into JSON-like values, as
// JSON.stringify would: integers become float64, NaN and infinities null,
// functions and undefined are dropped from objects (null in arrays).
func normalize(v any) any {
	switch x := v.(type) {
	case nil, bool, string:
		return x
	case int64:
		return number(float64(x))
	case int:
		return number(float64(x))
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		return v
	case map[string]any:
		for k, e := range x {
			switch e.(type) {
			case func(goja.FunctionCall) goja.Value:
				delete(x, k)
				continue
			}
			if isDropped(e) {
				delete(x, k)
				continue
			}
			x[k] = normalize(e)
		}
		return x
	case []any:
		for i, e := range x {
			if isDropped(e) {
				x[i] = nil
				continue
			}
			x[i] = normalize(e)
		}
		return x
	case time.Time:
		return x.UTC().Format("2006-01-02T15:04:05.000Z")
	case *selfObj:
		return x.plain()
	case *argsObj:
		return x.plain()
	case *ctxObj:
		return x.plain()
	}
	if isDropped(v) {
		return nil
	}
	return fmt.Sprint(v)
}

// isDropped reports whether an exported value is one JSON leaves out (a
// function).
func isDropped(v any) bool {
	switch v.(type) {
	case func(goja.FunctionCall) goja.Value, func(goja.ConstructorCall) *goja.Object:
		return true
	}
	return false
}

// callArgs returns the ({context, event, self}) argument of a call: one
// object per depth of nested calls, reused, as making objects is what
// costs most in goja.
func (rt *jsRuntime) callArgs(a interp.Args) *goja.Object {
	for len(rt.argObjs) <= rt.depth {
		rt.argObjs = append(rt.argObjs, rt.newArgs(false))
	}
	return rt.fillArgs(rt.argObjs[rt.depth], a)
}

// enqueueArgs returns the ({context, event, self, enqueue, check})
// argument of an enqueueActions function, reused as callArgs' are.
func (rt *jsRuntime) enqueueArgs(a interp.Args) *goja.Object {
	for len(rt.enqArgObjs) <= rt.depth {
		rt.enqArgObjs = append(rt.enqArgObjs, rt.newArgs(true))
	}
	return rt.fillArgs(rt.enqArgObjs[rt.depth], a)
}

// logicArgs returns the ({input, self}) argument of a promise creator: a
// top-level call has one object, reused as callArgs' are.
func (rt *jsRuntime) logicArgs(input any, self *interp.Actor) *goja.Object {
	rt.forActor(self)
	ao := rt.logicArg
	if ao == nil || rt.depth > 0 {
		ao = rt.newArgs(false)
		if rt.depth == 0 {
			rt.logicArg = ao
		}
	}
	ao.extra = nil
	ao.input = rt.toJS(input)
	ao.self = rt.selfJS(self)
	ao.actor, ao.system = self, nil
	ao.signal, ao.emit = rt.promiseExtras()
	return ao.o
}

// promiseExtras returns the signal and emit a promise creator gets, as
// XState's: a signal that is never aborted (a promise settles within the
// step that starts it, before its actor could be stopped) and an emit
// that no one listens to (callback and observable actors get it too).
// They are made once per runtime, and frozen: the calls of every instance
// get them.
func (rt *jsRuntime) promiseExtras() (signal, emit goja.Value) {
	if rt.signal == nil {
		v, err := rt.vm.RunString(`Object.freeze({ aborted: false, reason: undefined, onabort: null,
  addEventListener() {}, removeEventListener() {}, dispatchEvent() { return true; },
  throwIfAborted() {} })`)
		if err != nil {
			v = goja.Undefined()
		}
		rt.signal = v
		rt.emitNoop = rt.frozen(rt.vm.ToValue(func(goja.FunctionCall) goja.Value { return goja.Undefined() }))
	}
	return rt.signal, rt.emitNoop
}

// frozen freezes an object the host made and reuses across calls (the
// Object.freeze of the intrinsics, which are frozen too), and returns it.
func (rt *jsRuntime) frozen(v goja.Value) goja.Value {
	if freeze, ok := goja.AssertFunction(rt.vm.Get("Object").ToObject(rt.vm).Get("freeze")); ok {
		_, _ = freeze(goja.Undefined(), v)
	}
	return v
}

// argsObj is a reused argument object: a dynamic object whose properties
// are Go fields, set for each call without goja's property machinery
// (nil: absent). Properties that code sets on it are kept in extra.
type argsObj struct {
	rt                   *jsRuntime
	o                    *goja.Object
	ctx, ev, self, input goja.Value
	enqueue, check       goja.Value
	// actor is the call's self, whose actor system is made on first read.
	actor  *interp.Actor
	system goja.Value
	// spawner is an assign's (nil in other calls); spawn is the function
	// code gets for it in such a call, spawnFn that function, made once
	// per object.
	spawner interp.Spawner
	spawn   goja.Value
	spawnFn goja.Value
	// signal and emit are a promise creator's (nil in other calls).
	signal, emit goja.Value
	extra        map[string]goja.Value
}

// newArgs makes an argument object; enqueue gives it enqueueActions'
// enqueue and check.
func (rt *jsRuntime) newArgs(enqueue bool) *argsObj {
	ao := &argsObj{rt: rt}
	if enqueue {
		enq, check := rt.enqueueFns()
		ao.enqueue, ao.check = enq, check
	}
	ao.o = rt.vm.NewDynamicObject(ao)
	return ao
}

// field returns the Go field of a property, or nil for another property.
func (ao *argsObj) field(key string) *goja.Value {
	switch key {
	case "context":
		return &ao.ctx
	case "event":
		return &ao.ev
	case "self":
		return &ao.self
	case "input":
		return &ao.input
	case "enqueue":
		return &ao.enqueue
	case "check":
		return &ao.check
	case "system":
		if ao.system == nil && ao.actor != nil {
			ao.system = ao.rt.systemJS(ao.actor)
		}
		return &ao.system
	case "spawn":
		return &ao.spawn
	case "signal":
		return &ao.signal
	case "emit":
		return &ao.emit
	}
	return nil
}

// callSpawn is spawn(src, {id, input, systemId, syncSnapshot}) in an
// assign's function: src is an actor's name or logic (fromPromise(...), a
// machine); it returns the new child's actor ref.
func (ao *argsObj) callSpawn(call goja.FunctionCall) goja.Value {
	rt := ao.rt
	var src string
	var logic interp.ActorLogic
	if arg := call.Argument(0); goja.IsString(arg) {
		src = arg.String()
	} else {
		w := &walker{rt: rt, direct: true}
		v, err := w.walk(arg, 0)
		if err != nil {
			panic(rt.newError(err.Error()))
		}
		var ok bool
		logic, ok, err = (&jsResolver{mod: rt.mod}).invokeLogic(v)
		if err != nil || !ok {
			panic(rt.vm.NewTypeError("spawn() needs an actor name or logic"))
		}
	}
	var o interp.SpawnOptions
	if opts, ok := call.Argument(1).(*goja.Object); ok {
		if v := opts.Get("id"); v != nil && !goja.IsUndefined(v) {
			o.ID = v.String()
		}
		if v := opts.Get("systemId"); v != nil && !goja.IsUndefined(v) {
			o.SystemID = v.String()
		}
		if v := opts.Get("input"); v != nil && !goja.IsUndefined(v) {
			o.Input = rt.lazy(v)
		}
		if v := opts.Get("syncSnapshot"); v != nil {
			o.SyncSnapshot = v.ToBoolean()
		}
	}
	c, err := ao.spawner.Spawn(src, logic, o)
	if err != nil {
		panic(rt.newError(err.Error()))
	}
	return rt.actorRef(c)
}

// Get returns a property (goja.DynamicObject).
func (ao *argsObj) Get(key string) goja.Value {
	if f := ao.field(key); f != nil {
		return *f
	}
	return ao.extra[key]
}

// Set sets a property (goja.DynamicObject).
func (ao *argsObj) Set(key string, v goja.Value) bool {
	if f := ao.field(key); f != nil {
		*f = v
		return true
	}
	if ao.extra == nil {
		ao.extra = map[string]goja.Value{}
	}
	ao.extra[key] = v
	return true
}

// Has reports whether the object has a property (goja.DynamicObject).
func (ao *argsObj) Has(key string) bool {
	if f := ao.field(key); f != nil {
		return *f != nil
	}
	_, ok := ao.extra[key]
	return ok
}

// Delete deletes a property (goja.DynamicObject).
func (ao *argsObj) Delete(key string) bool {
	if f := ao.field(key); f != nil {
		*f = nil
		return true
	}
	delete(ao.extra, key)
	return true
}

// Keys lists the properties (goja.DynamicObject), in the order a plain
// object made for the call would have them.
func (ao *argsObj) Keys() []string {
	var keys []string
	for _, k := range [...]string{"spawn", "enqueue", "check", "context", "event", "self", "system", "input", "signal", "emit"} {
		if *ao.field(k) != nil {
			keys = append(keys, k)
		}
	}
	for k := range ao.extra {
		keys = append(keys, k)
	}
	slices.Sort(keys[len(keys)-len(ao.extra):])
	return keys
}

// plain is the object as JSON shows it (its functions left out).
func (ao *argsObj) plain() map[string]any {
	m := map[string]any{}
	for _, k := range ao.Keys() {
		if v := ao.Get(k); !isFunction(v) {
			m[k] = ao.rt.fromJS(v)
		}
	}
	return m
}

func isFunction(v goja.Value) bool {
	_, isFn := goja.AssertFunction(v)
	return isFn
}

// fillArgs sets the context, event, self and input of a's call in a
// reused argument object.
func (rt *jsRuntime) fillArgs(ao *argsObj, a interp.Args) *goja.Object {
	rt.forActor(a.Self)
	ao.extra = nil // what code set on the object for an earlier call
	rt.owner = a.Snapshot
	if rt.owner == nil && a.Self != nil {
		rt.owner = a.Self.Snapshot()
	}
	ao.ctx = rt.contextJS(a.Context)
	ao.ev = rt.eventJS(a.Event)
	ao.actor, ao.system = a.Self, nil
	ao.spawner, ao.spawn = a.Spawner, nil
	if a.Spawner != nil {
		if ao.spawnFn == nil {
			ao.spawnFn = rt.vm.ToValue(ao.callSpawn)
		}
		ao.spawn = ao.spawnFn
	}
	if a.Self != nil {
		ao.self = rt.selfJS(a.Self)
	}
	ao.input = nil
	if a.Input != nil {
		ao.input = rt.toJS(a.Input)
	}
	return ao.o
}

// eventJS converts an event, reusing the conversion of the same event.
func (rt *jsRuntime) eventJS(ev interp.Event) goja.Value {
	if p := ev.Probe(); p != nil {
		if rt.mod.plainObjects {
			return rt.probeJS(ev)
		}
		return rt.eventObj(ev) // noting the reads of its payload
	}
	if ev.Data == nil {
		if e, ok := rt.events[ev.Type]; ok {
			if e.gen == rt.gen {
				return e.js
			}
			// Made for another actor tree: what its code did to it goes.
			if e.ctx != nil {
				e.ctx.renew()
				e.gen = rt.gen
				rt.events[ev.Type] = e
				return e.js
			}
		}
		v := rt.eventObj(ev)
		c := asCtxObj(v)
		if rt.events == nil || len(rt.events) > 1024 {
			rt.events = map[string]idEntry{}
		}
		rt.events[ev.Type] = idEntry{js: v, gen: rt.gen, ctx: c}
		return v
	}
	if v := rt.cached(ev.Data); v != nil {
		if o, ok := v.(*goja.Object); ok {
			if t := o.Get("type"); t != nil && t.String() == ev.Type {
				return v
			}
		}
	}
	v := rt.eventObj(ev)
	rt.rememberCtx(ev.Data, v, asCtxObj(v))
	return v
}

// systemJS is the `system` of calls: {get(systemId)}, which gives the
// actor registered under that id in the tree (as an actor ref), or
// undefined.
func (rt *jsRuntime) systemJS(a *interp.Actor) goja.Value {
	o := rt.vm.NewObject()
	_ = o.Set("get", func(call goja.FunctionCall) goja.Value {
		if found := a.System(call.Argument(0).String()); found != nil {
			return rt.actorRef(found)
		}
		return goja.Undefined()
	})
	return o
}

func (rt *jsRuntime) selfJS(a *interp.Actor) goja.Value {
	if rt.lastSelf == a {
		return rt.lastSelfJS
	}
	o := rt.actorRef(a)
	rt.lastSelf, rt.lastSelfJS = a, o
	return o
}

// actorRef is an actor as code gets it (self, a child, system.get's).
func (rt *jsRuntime) actorRef(a *interp.Actor) *goja.Object {
	// One object per actor, so that refs compare equal as XState's do
	// (a ref in the context === the snapshot's child); the map is
	// dropped when it grows, as actors come and go.
	if o, ok := rt.refs[a]; ok {
		return o
	}
	o := rt.vm.NewDynamicObject(&selfObj{rt: rt, actor: a})
	if rt.refs == nil || len(rt.refs) >= 256 {
		rt.refs = map[*interp.Actor]*goja.Object{}
	}
	rt.refs[a] = o
	return o
}

// keysOf returns an object's own enumerable string keys. goja's Keys
// goes through its generic property iterators; an object of a module that
// cannot make a property non-enumerable (it never names defineProperty
// and the like: plainObjects is false) has only enumerable ones, listed
// more cheaply by GetOwnPropertyNames.
func (rt *jsRuntime) keysOf(o *goja.Object) []string {
	if rt.mod.plainObjects || o.ClassName() != "Object" {
		return o.Keys()
	}
	return o.GetOwnPropertyNames()
}

// revive returns the actor ref an actor ref kept in a context stands for
// ({xstate$$type: 1, id}, as contexts hold refs), when the actor of the
// call in progress has a child with that id, as XState revives the refs
// of a restored context; else nil.
func (rt *jsRuntime) revive(m map[string]any) goja.Value {
	if len(m) != 2 {
		return nil
	}
	if t, _ := m["xstate$$type"].(float64); t != 1 {
		return nil
	}
	id, ok := m["id"].(string)
	if !ok {
		return nil
	}
	s := rt.owner
	if s == nil && rt.lastSelf != nil {
		s = rt.lastSelf.Snapshot()
	}
	if s == nil {
		return nil
	}
	if c := s.Child(id); c != nil {
		return rt.actorRef(c)
	}
	return nil
}

// selfObj is the self of calls, {id, send}: a dynamic object, which costs
// less to make than an object with a function, made only if send is read.
type selfObj struct {
	rt    *jsRuntime
	actor *interp.Actor
	props map[string]goja.Value // send, once read, and properties set
}

var selfKeys = []string{"id", "send"}

// Get returns a property of self (goja.DynamicObject).
func (s *selfObj) Get(key string) goja.Value {
	if v, ok := s.props[key]; ok {
		return v
	}
	switch key {
	case "id":
		return s.rt.vm.ToValue(s.actor.ID)
	case "send":
		rt, a := s.rt, s.actor
		send := rt.vm.ToValue(func(call goja.FunctionCall) goja.Value {
			if obj, ok := rt.fromJS(call.Argument(0)).(map[string]any); ok {
				if ev, ok := interp.EventFromObject(obj); ok {
					a.Send(ev)
				}
			}
			return goja.Undefined()
		})
		s.Set(key, send)
		return send
	case "getSnapshot":
		rt, a := s.rt, s.actor
		return rt.vm.ToValue(func(goja.FunctionCall) goja.Value { return rt.snapshotJS(a) })
	case "_parent":
		// XState's actor's parent, which some machines read.
		if p := s.actor.Parent(); p != nil {
			return s.rt.actorRef(p)
		}
		return goja.Undefined()
	case "system":
		return s.rt.systemJS(s.actor) // self.system.get(...)
	case "toJSON":
		// As XState's actor refs: JSON shows {xstate$$type: 1, id}.
		rt, id := s.rt, s.actor.ID
		return rt.vm.ToValue(func(goja.FunctionCall) goja.Value {
			o := rt.vm.NewObject()
			_ = o.Set("xstate$$type", 1)
			_ = o.Set("id", id)
			return o
		})
	}
	return nil
}

// Set sets a property of self (goja.DynamicObject).
func (s *selfObj) Set(key string, v goja.Value) bool {
	if s.props == nil {
		s.props = map[string]goja.Value{}
	}
	s.props[key] = v
	return true
}

// Has reports whether self has a property (goja.DynamicObject).
func (s *selfObj) Has(key string) bool {
	_, ok := s.props[key]
	return ok || slices.Contains(selfKeys, key)
}

// Delete deletes a property set on self (goja.DynamicObject).
func (s *selfObj) Delete(key string) bool {
	delete(s.props, key)
	return !slices.Contains(selfKeys, key)
}

// Keys lists the properties of self (goja.DynamicObject).
func (s *selfObj) Keys() []string {
	keys := slices.Clone(selfKeys)
	for k := range s.props {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys[len(selfKeys):])
	return keys
}

// plain is an actor ref as JSON shows it, as XState's toJSON gives it
// ({xstate$$type: 1, id}), with the properties set on it.
func (s *selfObj) plain() map[string]any {
	m := map[string]any{"xstate$$type": smallNumbers[1], "id": s.actor.ID}
	for k, v := range s.props {
		if _, isFn := goja.AssertFunction(v); !isFn && k != "id" {
			m[k] = s.rt.fromJS(v)
		}
	}
	return m
}

// keep converts a value to Go and remembers the conversion, so that the
// next step gives the runtime back the same JavaScript value (an actor's
// state, which the next step passes to JavaScript again).
// keepOutput is keep for a promise's output, whose undefined the done
// event shows as undefined (no output), not null.
func (rt *jsRuntime) keepOutput(v goja.Value) any {
	if v == nil || goja.IsUndefined(v) {
		return interp.Undefined{}
	}
	return rt.keep(v)
}

func (rt *jsRuntime) keep(v goja.Value) any {
	g := rt.fromJS(v)
	rt.remember(g, v)
	return g
}

// lazy keeps an object or array a step made as a JavaScript value until
// the step ends; other values are converted at once.
func (rt *jsRuntime) lazy(v goja.Value) any {
	if o, ok := v.(*goja.Object); ok {
		if _, isFn := goja.AssertFunction(o); !isFn {
			return &jsLazy{rt: rt, v: o}
		}
	}
	return rt.fromJS(v)
}

// partialUpdate sets in ctx what an assign function returned: an object
// whose properties go into the context.
func (rt *jsRuntime) partialUpdate(v goja.Value, ctx map[string]any) {
	o, ok := v.(*goja.Object)
	if !ok {
		return
	}
	if _, isFn := goja.AssertFunction(o); isFn {
		return
	}
	for _, k := range rt.keysOf(o) {
		setOrDrop(ctx, k, o.Get(k), rt)
	}
}

// enqueueFns returns the runtime's enqueue and check functions for
// enqueueActions, made on first use.
func (rt *jsRuntime) enqueueFns() (*goja.Object, goja.Value) {
	if rt.enqueue != nil {
		return rt.enqueue, rt.check
	}
	vm := rt.vm
	push := func(kind string, args []goja.Value) {
		if rt.enq == nil {
			return
		}
		if len(rt.qargs)+len(args) > cap(rt.qargs) {
			// A new backing array: the queued actions keep the old one.
			rt.qargs = make([]goja.Value, 0, max(64, 2*len(args)))
		}
		n := len(rt.qargs)
		rt.qargs = append(rt.qargs, args...)
		rt.queue = append(rt.queue, queuedAction{kind, rt.qargs[n:len(rt.qargs):len(rt.qargs)]})
	}
	enq := vm.ToValue(func(call goja.FunctionCall) goja.Value {
		push("", []goja.Value{call.Argument(0)})
		return goja.Undefined()
	}).ToObject(vm)
	for name := range creatorFields {
		if name == "log" || name == "forwardTo" {
			continue // XState's enqueue has neither
		}
		_ = enq.Set(name, func(call goja.FunctionCall) goja.Value {
			push(name, call.Arguments)
			return goja.Undefined()
		})
	}
	rt.enqueue = rt.frozen(enq).(*goja.Object)
	rt.check = vm.ToValue(func(call goja.FunctionCall) goja.Value {
		if rt.enq == nil {
			panic(vm.NewTypeError("check() called outside enqueueActions"))
		}
		ok, err := rt.enq.checkGuard(rt, call.Argument(0))
		if err != nil {
			panic(rt.newError(err.Error()))
		}
		return vm.ToValue(ok)
	})
	rt.frozen(rt.check)
	return rt.enqueue, rt.check
}

// probeJS converts a probed event to a Proxy that records the reads of any
// field but "type", for a module that gets plain objects (eventObj notes
// them for the others).
func (rt *jsRuntime) probeJS(ev interp.Event) goja.Value {
	target := rt.toJS(interp.Event{Type: ev.Type, Data: ev.Data}).(*goja.Object)
	note := func(property string) {
		if property != "type" {
			ev.Get(property)
		}
	}
	p := rt.vm.NewProxy(target, &goja.ProxyTrapConfig{
		Get: func(t *goja.Object, property string, receiver goja.Value) goja.Value {
			note(property)
			return t.Get(property)
		},
		Has: func(t *goja.Object, property string) bool {
			note(property)
			return t.Get(property) != nil
		},
	})
	return rt.vm.ToValue(p)
}

// snapshotJS is an actor's snapshot as getSnapshot() gives it: the one
// the actor holds, so during a step the snapshot from before the event,
// as in XState. A machine's has value, context, status, output, error,
// children and the methods matches and hasTag; another actor's has its
// status.
func (rt *jsRuntime) snapshotJS(a *interp.Actor) goja.Value {
	o := rt.vm.NewObject()
	var status, output any
	var err error
	if m := a.Machine(); m != nil {
		s := a.Snapshot()
		status, output, err = s.Status.String(), s.Output(), s.Err()
		_ = o.Set("value", rt.toJS(s.Value()))
		_ = o.Set("context", rt.contextJS(s.Context))
		children := rt.vm.NewObject()
		for _, id := range s.Children() {
			if c := s.Child(id); c != nil {
				_ = children.Set(id, rt.actorRef(c))
			}
		}
		_ = o.Set("children", children)
		_ = o.Set("matches", func(call goja.FunctionCall) goja.Value {
			return rt.vm.ToValue(s.Matches(rt.fromJS(call.Argument(0))))
		})
		_ = o.Set("hasTag", func(call goja.FunctionCall) goja.Value {
			return rt.vm.ToValue(s.HasTag(call.Argument(0).String()))
		})
		// tags: a Set, in the order of the active nodes; getMeta(): the
		// meta of the active nodes that have one, by node id.
		var tags []any
		seen := map[string]bool{}
		for _, n := range s.Nodes() {
			for _, t := range n.Tags {
				if !seen[t] {
					seen[t] = true
					tags = append(tags, t)
				}
			}
		}
		if set, err := rt.vm.New(rt.vm.Get("Set"), rt.vm.NewArray(tags...)); err == nil {
			_ = o.Set("tags", set)
		}
		_ = o.Set("getMeta", func(goja.FunctionCall) goja.Value {
			meta := rt.vm.NewObject()
			for _, n := range s.Nodes() {
				if n.Meta != nil {
					_ = meta.Set(n.ID, rt.toJS(n.Meta))
				}
			}
			return meta
		})
		_ = o.Set("can", func(call goja.FunctionCall) goja.Value {
			obj, _ := rt.fromJS(call.Argument(0)).(map[string]any)
			ev, ok := interp.EventFromObject(obj)
			if !ok {
				panic(rt.vm.NewTypeError("can() needs an event object with a type"))
			}
			var can bool
			var err error
			if s.Machine.Impl.Host == interp.Host(rt.mod) {
				can, err = s.CanIn(rt, ev) // this runtime: the step's
			} else {
				can, err = s.Can(ev)
			}
			if err != nil {
				panic(rt.newError(err.Error()))
			}
			return rt.vm.ToValue(can)
		})
	} else {
		// A promise's output, a transition actor's context, the input of
		// a promise or callback.
		v := a.SnapshotValue()
		status, output = v["status"], v["output"]
		err, _ = v["error"].(error)
		if c := v["context"]; c != nil {
			_ = o.Set("context", rt.toJS(c))
		}
		if in, ok := v["input"]; ok {
			_ = o.Set("input", rt.toJS(in))
		}
	}
	_ = o.Set("status", status)
	if status == interp.StatusDone.String() {
		_ = o.Set("output", rt.toJS(output))
	} else {
		_ = o.Set("output", goja.Undefined())
	}
	if err != nil {
		_ = o.Set("error", rt.toJS(err))
	} else {
		_ = o.Set("error", goja.Undefined())
	}
	return o
}
