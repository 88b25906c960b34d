package js

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/dop251/goja"

	"github.com/stategate/stategate/interp"
)

// Every event sees a module as it was right after it loaded. The module's
// runtimes are pooled, and one runtime serves the events of many
// instances, which belong to different clients: nothing an event changes
// in JavaScript may be seen by the next event, of this instance or of
// another. (XState shares a module's state between the actors of one
// process; stategate's instances are tenants of one server, and a module
// variable that outlived an event would carry one client's data into
// another's guard.) So:
//
//   - the intrinsics (the built-in constructors and prototypes, and those
//     no global names, such as %ArrayIteratorPrototype%) and the global
//     object are frozen before the module runs, as SES's lockdown does: a
//     module that changes a built-in, even at load, fails with a TypeError
//     (stategate's bundles are strict, as ES modules are). A few
//     properties of Object.prototype, Function.prototype and the errors'
//     prototypes become accessors whose setter defines the property on
//     the object assigned to, so that `this.name = ...` in an Error
//     subclass and `obj.toString = ...` work as before (assigning to a
//     frozen prototype's property from an object that inherits it would
//     fail: JavaScript's "override mistake"). The Host's first runtime
//     walks the intrinsics to freeze them and notes the way to each; the
//     others follow those ways, which costs a fraction of the walk.
//   - the host's helpers are no globals: the array spread helpers and the
//     readers are parameters of the function the module is compiled into
//     (named with a random part), the shim's API is kept in Go, and
//     goja's GoError is deleted;
//   - what the module made at load is frozen once it has loaded:
//     everything its exports lead to, and what the variables its
//     functions close over hold (read by the readers instrument adds;
//     jsscope.go), through properties, prototypes, accessors, the entries
//     of Maps and Sets, and the values a WeakMap keeps for them;
//   - what cannot be frozen is put back when the event's runtime is
//     released: a variable some function assigns (a module's `let count`)
//     gets its value at load again, a Map or Set its entries, a Date its
//     time, a RegExp its lastIndex. A change to a WeakMap's or WeakSet's
//     entry for an object made at load cannot be undone: the runtime is
//     then dropped, and the next event gets one made afresh (a few
//     milliseconds).
//   - a module whose load-time state can be neither frozen nor put back (a
//     Proxy, a pending Promise, a generator or an iterator in progress, an
//     ArrayBuffer or a typed array, made at load) is stateful: each of its
//     runtimes serves one step and is dropped;
//   - the host's own objects that code is given and that last beyond a
//     call (the enqueue and check functions of enqueueActions, the signal
//     of promise creators) are frozen, and the conversions a runtime keeps
//     of contexts and events are forgotten when a call comes from another
//     actor tree than the last one (another instance, or another event:
//     the gate makes an actor per event).
//
// Writing to what is frozen throws a TypeError; a step that throws fails
// as for any other exception, and the instance keeps its state.

// hardenSource is the script that gives a runtime's hardener goja's own
// functions it freezes with, and the intrinsics no global leads to. It
// runs before the sandbox's limits are installed, so that neither their
// wrappers nor the module's code come between.
const hardenSource = `(function () {
  'use strict';
  const getProto = Object.getPrototypeOf;
  return [
    Object.getOwnPropertyDescriptors, Object.getOwnPropertyDescriptor, Object.freeze, Object.isFrozen,
    Object.preventExtensions, Object.defineProperty, Map.prototype.forEach, Set.prototype.forEach,
    Map.prototype.set, Map.prototype.clear, Set.prototype.add, Set.prototype.clear,
    Date.prototype.getTime, Date.prototype.setTime, WeakMap.prototype.has, WeakMap.prototype.get,
    [
      getProto(function* () {}), getProto(async function () {}), getProto(Int8Array),
      Object.getOwnPropertyDescriptor((function () { 'use strict'; return arguments; })(), 'callee').get,
      getProto([][Symbol.iterator]()), getProto(new Map()[Symbol.iterator]()),
      getProto(new Set()[Symbol.iterator]()), getProto(''[Symbol.iterator]()),
    ],
  ];
})()`

// The properties of the intrinsics' prototypes that become accessors
// before they are frozen (see above): those that code commonly sets on
// objects that inherit them.
var overrides = map[string][]string{
	"Object.prototype":   {"constructor", "toString", "valueOf", "toLocaleString", "hasOwnProperty", "isPrototypeOf", "propertyIsEnumerable"},
	"Error.prototype":    {"constructor", "name", "message", "toString"},
	"Function.prototype": {"toString", "constructor"},
}

// The native errors, whose prototypes get the overrides of Error.prototype.
var nativeErrors = []string{"EvalError", "RangeError", "ReferenceError", "SyntaxError", "TypeError", "URIError"}

// loaded is what a runtime keeps of an object made at load whose state
// freezing does not fix: its kind, and what to put back (a Map's entries,
// a Set's values, a Date's time).
type loaded struct {
	kind    string // "map", "set", "date", "weakmap", "weakset"
	entries [][2]goja.Value
	time    goja.Value
	changed bool // a mutator ran on it since the runtime was lent
}

// reader is a function instrument's code registered while the module
// loaded: reader(i) gives the i-th variable a scope closes over;
// write(i, v) sets one that some function assigns.
type reader struct {
	fn, write goja.Callable
	n         int
	watch     []int // the variables some function assigns
	suspend   bool  // the scope's function is async or a generator
}

// watchedVar is a variable some function assigns, with its value at load.
type watchedVar struct {
	r *reader
	i int
	v goja.Value
}

// watchedRegExp is a RegExp made at load, with its lastIndex then.
type watchedRegExp struct {
	o    *goja.Object
	last goja.Value
}

// hardener freezes a runtime's objects, with goja's own functions.
type hardener struct {
	rt                                           *jsRuntime
	getDescs, getDesc, freeze, isFrozen, prevent goja.Callable
	define, mapForEach, setForEach               goja.Callable
	mapSet, mapClear, setAdd, setClear           goja.Callable
	getTime, setTime, weakHas, weakGet           goja.Callable
	hidden                                       []goja.Value // intrinsics no global leads to
}

// installHardener takes the functions the hardener uses; it must run
// before the sandbox's limits are installed, and before the module.
func (rt *jsRuntime) installHardener() error {
	v, err := rt.vm.RunProgram(rt.mod.hardenProg)
	if err != nil {
		return err
	}
	list, ok := v.(*goja.Object)
	if !ok {
		return errors.New("the hardener's functions are missing")
	}
	h := &hardener{rt: rt}
	fns := []*goja.Callable{&h.getDescs, &h.getDesc, &h.freeze, &h.isFrozen, &h.prevent, &h.define, &h.mapForEach, &h.setForEach,
		&h.mapSet, &h.mapClear, &h.setAdd, &h.setClear, &h.getTime, &h.setTime, &h.weakHas, &h.weakGet}
	for i, f := range fns {
		if *f, ok = goja.AssertFunction(list.Get(indexKey(int64(i)))); !ok {
			return fmt.Errorf("the hardener's function %d is missing", i)
		}
	}
	hidden := list.Get(indexKey(int64(len(fns)))).ToObject(rt.vm)
	for i := range lengthOf(hidden) {
		h.hidden = append(h.hidden, hidden.Get(indexKey(i)))
	}
	rt.hardener = h
	return nil
}

// The ways a hardenStep reaches an object from another.
const (
	stepRoot = iota
	stepData
	stepGet
	stepSet
	stepProto
)

// hardenStep is how the walk of the intrinsics reached an object: from
// the object of step from (or root number root), by a property's value,
// getter or setter (key, or sym), or as its prototype.
type hardenStep struct {
	from, root int32
	how        uint8
	key        string
	sym        *goja.Symbol
}

// hardenPlan is how to reach every intrinsic of a runtime: the same in
// every runtime of a Host (made alike, before any module code runs), so
// the first runtime's walk is replayed in the others, which is several
// times cheaper than walking.
type hardenPlan struct {
	once  sync.Once
	steps []hardenStep
	err   error
}

// intrinsicRoots are the roots of the intrinsics: the global object, those
// no global leads to, and the host's objects that code can reach.
func (h *hardener) intrinsicRoots() []goja.Value {
	return append(append([]goja.Value{h.rt.vm.GlobalObject()}, h.hidden...), h.rt.hostRoots...)
}

// freezeIntrinsics freezes the intrinsics (after installOverrides, before
// the module runs): by walking them in the Host's first runtime, which
// makes the plan, by the plan in the others. It returns the set of them,
// where the walks of the module's objects stop.
func (h *hardener) freezeIntrinsics(plan *hardenPlan) (map[*goja.Object]bool, error) {
	var walked map[*goja.Object]bool
	plan.once.Do(func() {
		var reason string
		walked, reason, plan.err = h.walk(h.intrinsicRoots(), nil, &plan.steps, true)
		if plan.err == nil && reason != "" {
			plan.err = fmt.Errorf("the built-ins cannot be frozen: %s", reason)
		}
	})
	if plan.err != nil {
		return nil, plan.err
	}
	if walked != nil {
		return walked, nil
	}
	return h.replay(plan.steps)
}

// replay freezes the objects the plan's steps reach.
func (h *hardener) replay(steps []hardenStep) (map[*goja.Object]bool, error) {
	roots := h.intrinsicRoots()
	objs := make([]*goja.Object, len(steps))
	set := make(map[*goja.Object]bool, len(steps))
	for i, st := range steps {
		var v goja.Value
		if st.how == stepRoot {
			if int(st.root) < len(roots) {
				v = roots[st.root]
			}
		} else {
			base := objs[st.from]
			switch st.how {
			case stepData:
				if st.sym != nil {
					v = base.GetSymbol(st.sym)
				} else {
					v = base.Get(st.key)
				}
			case stepProto:
				if p := base.Prototype(); p != nil {
					v = p
				}
			case stepGet, stepSet:
				var key goja.Value = h.rt.vm.ToValue(st.key)
				if st.sym != nil {
					key = st.sym
				}
				d, err := h.getDesc(goja.Undefined(), base, key)
				if err != nil {
					return nil, err
				}
				if do, ok := d.(*goja.Object); ok {
					if st.how == stepGet {
						v = do.Get("get")
					} else {
						v = do.Get("set")
					}
				}
			}
		}
		o, ok := v.(*goja.Object)
		if !ok {
			return nil, fmt.Errorf("the built-ins differ from the first runtime's (step %d: %s)", i, st.key)
		}
		objs[i] = o
		set[o] = true
		if _, err := h.freeze(goja.Undefined(), o); err != nil {
			return nil, err
		}
	}
	return set, nil
}

// walk freezes what roots lead to, through properties (their values,
// getters and setters), prototypes, the entries of Maps and Sets and the
// values WeakMaps keep for the objects walked, stopping at the objects in
// stop (frozen already); it registers what the runtime puts back after
// each event (see loaded). It returns the objects walked, and why they
// cannot be frozen ("" when they can). With record, it notes how it
// reached each object (for a plan, of the intrinsics: intrinsics lets it
// walk the sandbox's proxies through).
func (h *hardener) walk(roots []goja.Value, stop map[*goja.Object]bool, record *[]hardenStep, intrinsics bool) (map[*goja.Object]bool, string, error) {
	seen := map[*goja.Object]bool{}
	type item struct {
		o    *goja.Object
		step int32
	}
	var queue []item
	push := func(v goja.Value, st hardenStep) {
		o, ok := v.(*goja.Object)
		if !ok || seen[o] || stop[o] {
			return
		}
		seen[o] = true
		i := int32(-1)
		if record != nil {
			i = int32(len(*record))
			*record = append(*record, st)
		}
		queue = append(queue, item{o, i})
	}
	for i, r := range roots {
		push(r, hardenStep{how: stepRoot, root: int32(i)})
	}
	var weakMaps []*goja.Object
	for {
		for len(queue) > 0 {
			it := queue[0]
			queue = queue[1:]
			reason, err := h.harden(it.o, it.step, record, intrinsics, push)
			if err != nil || reason != "" {
				return seen, reason, err
			}
			if l := h.rt.atLoad[it.o]; l != nil && l.kind == "weakmap" {
				weakMaps = append(weakMaps, it.o)
			}
		}
		// What a WeakMap keeps for an object made at load is part of the
		// module's state too (esbuild makes a class's private fields
		// WeakMaps).
		for _, wm := range weakMaps {
			for o := range seen {
				if has, err := h.weakHas(wm, o); err == nil && has.ToBoolean() {
					v, err := h.weakGet(wm, o)
					if err != nil {
						return seen, "", err
					}
					push(v, hardenStep{})
				}
			}
		}
		if len(queue) == 0 {
			return seen, "", nil
		}
	}
}

// harden freezes one object, and pushes what it leads to.
func (h *hardener) harden(o *goja.Object, step int32, record *[]hardenStep, intrinsics bool, push func(goja.Value, hardenStep)) (string, error) {
	vm := h.rt.vm
	k := h.rt.kindOf(o)
	switch k {
	case "", "map", "set", "weakmap", "weakset", "date", "regexp", "promise":
	case "proxy":
		if !intrinsics {
			return "a Proxy", nil
		}
	default:
		return k, nil
	}
	if record != nil && (k != "" && k != "proxy") {
		return "an intrinsic that is not an ordinary object (" + k + ")", nil
	}
	dv, err := h.getDescs(goja.Undefined(), o)
	if err != nil {
		return "", err
	}
	descs := dv.ToObject(vm)
	desc := func(d goja.Value, key string, sym *goja.Symbol) {
		do, ok := d.(*goja.Object)
		if !ok {
			return
		}
		if v := do.Get("value"); v != nil {
			push(v, hardenStep{from: step, how: stepData, key: key, sym: sym})
			return
		}
		push(do.Get("get"), hardenStep{from: step, how: stepGet, key: key, sym: sym})
		push(do.Get("set"), hardenStep{from: step, how: stepSet, key: key, sym: sym})
	}
	names := descs.GetOwnPropertyNames()
	for _, key := range names {
		desc(descs.Get(key), key, nil)
	}
	for _, sym := range descs.Symbols() {
		desc(descs.GetSymbol(sym), sym.String(), sym)
	}
	if p := o.Prototype(); p != nil {
		push(p, hardenStep{from: step, how: stepProto})
	}
	var l *loaded
	switch k {
	case "map", "set", "weakmap", "weakset":
		l = &loaded{kind: k}
	case "date":
		t, err := h.getTime(o)
		if err != nil {
			return "", err
		}
		l = &loaded{kind: k, time: t}
	}
	entry := func(call goja.FunctionCall) goja.Value {
		v, key := call.Argument(0), call.Argument(1)
		push(key, hardenStep{})
		push(v, hardenStep{})
		l.entries = append(l.entries, [2]goja.Value{key, v})
		return goja.Undefined()
	}
	switch k {
	case "map":
		if _, err := h.mapForEach(o, vm.ToValue(entry)); err != nil {
			return "", err
		}
	case "set":
		if _, err := h.setForEach(o, vm.ToValue(entry)); err != nil {
			return "", err
		}
	case "promise":
		push(o.Export().(*goja.Promise).Result(), hardenStep{})
	}
	if k == "regexp" {
		// Its lastIndex stays writable (a global RegExp's exec and test
		// set it), and is put back after each event.
		for _, key := range names {
			d := descs.Get(key).ToObject(vm)
			if key == "lastIndex" || !d.Get("configurable").ToBoolean() {
				continue
			}
			attrs := vm.NewObject()
			_ = attrs.Set("configurable", false)
			if d.Get("value") != nil {
				_ = attrs.Set("writable", false)
			}
			if _, err := h.define(goja.Undefined(), o, vm.ToValue(key), attrs); err != nil {
				return "", err
			}
		}
		if _, err := h.prevent(goja.Undefined(), o); err != nil {
			return "", err
		}
		h.rt.regexps = append(h.rt.regexps, watchedRegExp{o, o.Get("lastIndex")})
	} else {
		if _, err := h.freeze(goja.Undefined(), o); err != nil {
			return "an object that cannot be frozen", nil
		}
		if f, err := h.isFrozen(goja.Undefined(), o); err != nil || !f.ToBoolean() {
			return "an object that cannot be frozen", nil
		}
	}
	if l != nil {
		h.rt.atLoad[o] = l
	}
	return "", nil
}

// kindOf tells what an object is, for the hardener: its kind ("map",
// "set", "weakset", "date", "regexp", "promise" when settled, "proxy"),
// "" for an ordinary object, or why it cannot be frozen (a phrase). It
// goes by the object's implementation in goja (the dynamic type of its
// unexported self, read by reflection, which is exact and, unlike a
// brand check, throws nothing), known to be frozen or watched whole;
// anything else cannot be.
func (rt *jsRuntime) kindOf(v goja.Value) string {
	o, ok := v.(*goja.Object)
	if !ok {
		return ""
	}
	switch t := implType(o); t {
	case "baseObject", "arrayObject", "sparseArrayObject", "errorObject", "argumentsObject", "primitiveValueObject",
		"funcObject", "generatorFuncObject", "asyncFuncObject", "classFuncObject", "methodFuncObject",
		"generatorMethodFuncObject", "asyncMethodFuncObject", "arrowFuncObject", "asyncArrowFuncObject",
		"nativeFuncObject", "wrappedFuncObject", "templatedObject", "templatedFuncObject", "templatedArrayObject":
		return ""
	case "boundFuncObject":
		return "" // what it binds was noted as bind was called at load (recordBind)
	case "mapObject":
		return "map"
	case "setObject":
		return "set"
	case "weakSetObject":
		return "weakset"
	case "dateObject":
		return "date"
	case "regexpObject":
		return "regexp"
	case "proxyObject":
		return "proxy"
	case "Promise":
		if o.Export().(*goja.Promise).State() == goja.PromiseStatePending {
			return "a pending Promise"
		}
		return "promise"
	case "arrayBufferObject":
		if len(o.Export().(goja.ArrayBuffer).Bytes()) == 0 {
			return ""
		}
		return "an ArrayBuffer"
	case "typedArrayObject":
		if lengthOf(o) == 0 {
			return ""
		}
		return "a typed array"
	case "weakMapObject":
		return "weakmap"
	case "dataViewObject":
		return "a DataView"
	case "generatorObject":
		return "a generator"
	case "arrayIterObject", "mapIterObject", "setIterObject", "stringIterObject", "regExpStringIterObject":
		return "an iterator"
	default:
		return "an object of the host (" + t + ")"
	}
}

// implType is the name of the type goja implements an object with.
func implType(o *goja.Object) string {
	self := reflect.ValueOf(o).Elem().FieldByName("self")
	if !self.IsValid() || self.IsNil() {
		return ""
	}
	t := self.Elem().Type()
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

// installOverrides makes the properties in overrides accessors, on the
// prototypes named and on the native errors' prototypes.
func (rt *jsRuntime) installOverrides() error {
	x := &sandbox{rt: rt, vm: rt.vm}
	for path, names := range overrides {
		o, err := x.object(path)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := rt.override(o, n); err != nil {
				return fmt.Errorf("%s.%s: %w", path, n, err)
			}
		}
	}
	for _, e := range nativeErrors {
		o, err := x.object(e + ".prototype")
		if err != nil {
			return err
		}
		for _, n := range overrides["Error.prototype"] {
			if err := rt.override(o, n); err != nil {
				return fmt.Errorf("%s.prototype.%s: %w", e, n, err)
			}
		}
	}
	return nil
}

// override turns proto's own data property name into an accessor: its
// getter gives the value; its setter, on another object, defines the
// property there (as assigning would, were the prototype not frozen), and
// on proto itself throws as for a read-only property.
func (rt *jsRuntime) override(proto *goja.Object, name string) error {
	vm := rt.vm
	value := proto.Get(name)
	if value == nil {
		return nil // not there
	}
	getter := vm.ToValue(func(goja.FunctionCall) goja.Value { return value })
	setter := vm.ToValue(func(call goja.FunctionCall) goja.Value {
		this, ok := call.This.(*goja.Object)
		if !ok || this.SameAs(proto) {
			panic(vm.NewTypeError("Cannot assign to read only property '%s' of object", name))
		}
		if err := this.DefineDataProperty(name, call.Argument(0), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
			panic(err)
		}
		return goja.Undefined()
	})
	return proto.DefineAccessorProperty(name, getter, setter, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// hardenLoaded freezes what the module made at load (roots: its exports
// and the shim's API, and what the readers give), the intrinsics being
// frozen already. It returns why the module is stateful ("" when it is
// not).
func (rt *jsRuntime) hardenLoaded(roots []goja.Value) (string, error) {
	vm := rt.vm
	stateful := ""
	all := slices.Clone(roots)
	for i := range rt.readers {
		r := &rt.readers[i]
		for i := range r.n {
			v, err := r.fn(goja.Undefined(), vm.ToValue(i))
			if err != nil {
				// Not initialized (a let after an early return): dead,
				// unless the function may resume and initialize it.
				if r.suspend && stateful == "" {
					stateful = "an async function or a generator left running"
				}
				continue
			}
			all = append(all, v)
			if slices.Contains(r.watch, i) {
				rt.watched = append(rt.watched, watchedVar{r, i, v})
			}
		}
	}
	rt.readers = nil
	all = append(all, rt.bound...)
	rt.bound = nil
	seen, reason, err := rt.hardener.walk(all, rt.intrinsics, nil, false)
	if err != nil {
		return "", err
	}
	rt.madeAtLoad = seen
	if reason != "" && stateful == "" {
		stateful = reason + " made at load"
	}
	return stateful, nil
}

// registerReader is the reader helper instrument's code calls while the
// module loads: reader(fn, watched, n, suspend, write).
func (rt *jsRuntime) registerReader(call goja.FunctionCall) goja.Value {
	if !rt.loading {
		return goja.Undefined()
	}
	fn, ok := goja.AssertFunction(call.Argument(0))
	if !ok {
		return goja.Undefined()
	}
	r := reader{fn: fn, n: int(call.Argument(2).ToInteger()), suspend: call.Argument(3).ToBoolean()}
	r.write, _ = goja.AssertFunction(call.Argument(4))
	if w, ok := call.Argument(1).(*goja.Object); ok {
		for i := range lengthOf(w) {
			r.watch = append(r.watch, int(w.Get(indexKey(i)).ToInteger()))
		}
	}
	rt.readers = append(rt.readers, r)
	return goja.Undefined()
}

// restore puts back what an event changed of the module's state as it
// was after load (see loaded, watchedVar, watchedRegExp), and reports
// whether that cannot be done: the runtime must then be dropped.
func (rt *jsRuntime) restore() (drop bool) {
	if rt.dirty || rt.stateful != "" {
		return true
	}
	vm := rt.vm
	for _, w := range rt.watched {
		v, err := w.r.fn(goja.Undefined(), vm.ToValue(w.i))
		if err == nil && v.SameAs(w.v) {
			continue
		}
		if w.r.write == nil {
			return true
		}
		if _, err := w.r.write(goja.Undefined(), vm.ToValue(w.i), w.v); err != nil {
			return true
		}
	}
	h := rt.hardener
	for _, o := range rt.touched {
		l := rt.atLoad[o]
		l.changed = false
		if err := h.put(o, l); err != nil {
			return true
		}
	}
	rt.touched = rt.touched[:0]
	for _, r := range rt.regexps {
		if v := r.o.Get("lastIndex"); v == nil || !v.SameAs(r.last) {
			if err := r.o.Set("lastIndex", r.last); err != nil {
				return true
			}
		}
	}
	return false
}

// put puts back a Map's entries, a Set's values or a Date's time.
func (h *hardener) put(o *goja.Object, l *loaded) error {
	var err error
	switch l.kind {
	case "map":
		if _, err = h.mapClear(o); err != nil {
			return err
		}
		for _, e := range l.entries {
			if _, err = h.mapSet(o, e[0], e[1]); err != nil {
				return err
			}
		}
	case "set":
		if _, err = h.setClear(o); err != nil {
			return err
		}
		for _, e := range l.entries {
			if _, err = h.setAdd(o, e[1]); err != nil {
				return err
			}
		}
	case "date":
		_, err = h.setTime(o, l.time)
	}
	return err
}

// noteMutation is what a mutator of Map, Set and Date calls before it
// changes this: one made at load is put back after the event.
func (rt *jsRuntime) noteMutation(this goja.Value) {
	if o, ok := this.(*goja.Object); ok {
		if l := rt.atLoad[o]; l != nil && !l.changed && (l.kind == "map" || l.kind == "set" || l.kind == "date") {
			l.changed = true
			rt.touched = append(rt.touched, o)
		}
	}
}

// noteWeakMutation is what a mutator of WeakMap and WeakSet calls before
// it changes this: the entry of an object made at load (or one the
// runtime gives more than one actor tree: a static value's conversion, a
// host object), in one made at load, cannot be put back (a WeakMap's or
// WeakSet's entries cannot be listed), so the runtime is dropped after
// the event.
func (rt *jsRuntime) noteWeakMutation(this, key goja.Value) {
	o, ok := this.(*goja.Object)
	k, isObj := key.(*goja.Object)
	if !ok || !isObj || rt.atLoad[o] == nil {
		return
	}
	if rt.madeAtLoad[k] || rt.intrinsics[k] || hostObject(k) {
		rt.dirty = true
		return
	}
	// What is frozen may be given to every tree (a static value's
	// conversion, params); an object code froze errs on the safe side.
	if f, err := rt.hardener.isFrozen(goja.Undefined(), k); err == nil && f.ToBoolean() {
		rt.dirty = true
	}
}

// hostObject reports whether an object is one of the host's, which it
// gives the calls of more than one actor tree: a context or an event
// (cached), a call's argument object, an actor ref.
func hostObject(o *goja.Object) bool {
	switch o.ExportType() { // not Export, which would read a plain object all
	case ctxObjType, argsObjType, selfObjType:
		return true
	}
	return false
}

// recordBind wraps Function.prototype.bind: while the module loads, what
// a bound function keeps (its target, its this and its arguments, which
// no property leads to) is noted, to be frozen with the rest.
func (x *sandbox) recordBind() error {
	fp, err := x.object("Function.prototype")
	if err != nil {
		return err
	}
	return x.method(fp, "bind", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		if x.rt.loading {
			x.rt.bound = append(x.rt.bound, call.This)
			x.rt.bound = append(x.rt.bound, call.Arguments...)
		}
		return invoke(orig, call.This, call.Arguments...)
	})
}

// guardMutators wraps the mutators of Map, Set, WeakMap, WeakSet and Date.
func (x *sandbox) guardMutators() error {
	for _, g := range []struct {
		proto string
		weak  bool
		names []string
	}{
		{"Map.prototype", false, []string{"set", "delete", "clear"}},
		{"Set.prototype", false, []string{"add", "delete", "clear"}},
		{"WeakMap.prototype", true, []string{"set", "delete"}},
		{"WeakSet.prototype", true, []string{"add", "delete"}},
		{"Date.prototype", false, []string{"setDate", "setFullYear", "setHours", "setMilliseconds", "setMinutes", "setMonth", "setSeconds", "setTime",
			"setUTCDate", "setUTCFullYear", "setUTCHours", "setUTCMilliseconds", "setUTCMinutes", "setUTCMonth", "setUTCSeconds", "setYear"}},
	} {
		proto, err := x.object(g.proto)
		if err != nil {
			return err
		}
		for _, name := range g.names {
			if v := proto.Get(name); v == nil || goja.IsUndefined(v) {
				continue // setYear is Annex B
			}
			weak := g.weak
			if err := x.method(proto, name, func(orig goja.Callable, call goja.FunctionCall) goja.Value {
				if weak {
					x.rt.noteWeakMutation(call.This, call.Argument(0))
				} else {
					x.rt.noteMutation(call.This)
				}
				return invoke(orig, call.This, call.Arguments...)
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

// forActor is called as a call for actor a begins: when a belongs to
// another actor tree than the last call's (or to none), the conversions
// the runtime keeps are forgotten, so that no JavaScript value one tree's
// code could have changed is given to another's.
func (rt *jsRuntime) forActor(a *interp.Actor) {
	root := a
	for root != nil && root.Parent() != nil {
		root = root.Parent()
	}
	if root != nil && root == rt.root {
		return
	}
	rt.root = root
	rt.forget()
}

// forget drops what the runtime keeps of earlier calls' values: the
// conversions of Go values (entries of an earlier gen are not used: making
// the maps again, or emptying them, costs more than a step) and the last
// ones. (The refs of actors need not go: another tree's actors are other
// actors.)
func (rt *jsRuntime) forget() {
	rt.gen++
	rt.last, rt.lastID, rt.lastLen = idEntry{}, nil, 0
	rt.lastSelf, rt.lastSelfJS = nil, nil
	rt.rxCache = nil
	rt.lastSubject = nil
}
