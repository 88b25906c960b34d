package js

import (
	"errors"
	"slices"
	"strconv"

	"github.com/dop251/goja"

	"github.com/stategate/stategate/internal/config"
)

// The walker turns the JavaScript values of a module (a machine config and
// its implementations) into the Go values the config reader reads:
// *config.Object, []any, strings, numbers, booleans and nil, with functions
// replaced by jsFn references and the shim's descriptions by *jsMarker.

// jsFn refers to a JavaScript function: by its number in every runtime of
// the module (id), or, for values made during a step, directly.
type jsFn struct {
	id     int
	direct goja.Value // set for a function met during a step
	name   string     // the function's name, when it has one
}

// callable returns the function as goja calls it.
func (f *jsFn) callable(rt *jsRuntime) (goja.Callable, bool) {
	if f.direct != nil {
		return goja.AssertFunction(f.direct)
	}
	if f.id < len(rt.callables) && rt.callables[f.id] != nil {
		return rt.callables[f.id], true
	}
	c, ok := goja.AssertFunction(rt.fns[f.id])
	if ok {
		if len(rt.callables) < len(rt.fns) {
			rt.callables = append(rt.callables, make([]goja.Callable, len(rt.fns)-len(rt.callables))...)
		}
		rt.callables[f.id] = c
	}
	return c, ok
}

// jsMarker is a value made by the shim: an action, a guard, an actor
// logic or a machine, with its fields.
type jsMarker struct {
	kind   string
	fields *config.Object
}

func (m *jsMarker) get(k string) any {
	v, _ := m.fields.Get(k)
	return v
}

type walker struct {
	rt     *jsRuntime
	direct bool // functions are kept as values, not numbered
	// path holds the objects being walked, outermost first: meeting one
	// of them again is a circular reference.
	path []*goja.Object
}

// maxWalkDepth bounds the nesting of a config.
const maxWalkDepth = 200

func (w *walker) walk(v goja.Value, depth int) (any, error) {
	if depth > maxWalkDepth {
		return nil, errors.New("the machine config is nested too deeply")
	}
	if v == nil || goja.IsUndefined(v) {
		return config.Undefined{}, nil
	}
	if goja.IsNull(v) {
		return nil, nil
	}
	o, isObj := v.(*goja.Object)
	if !isObj {
		return w.rt.fromJS(v), nil
	}
	if _, isFn := goja.AssertFunction(o); isFn {
		f := &jsFn{}
		if n := o.Get("name"); n != nil {
			f.name = n.String()
		}
		if w.direct {
			f.direct = o
		} else {
			f.id = len(w.rt.fns)
			w.rt.fns = append(w.rt.fns, o)
		}
		return f, nil
	}
	if slices.Contains(w.path, o) {
		return nil, errors.New("the machine config refers to itself (a circular reference)")
	}
	w.path = append(w.path, o)
	defer func() { w.path = w.path[:len(w.path)-1] }()
	if o.ClassName() == "Array" {
		n := int(o.Get("length").ToInteger())
		out := make([]any, 0, n)
		for i := range n {
			e, err := w.walk(o.Get(strconv.Itoa(i)), depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	}
	keys := config.KeyOrder(w.rt.keysOf(o))
	fields := &config.Object{Keys: make([]string, 0, len(keys)), Vals: make(map[string]any, len(keys))}
	for _, k := range keys {
		e, err := w.walk(o.Get(k), depth+1)
		if err != nil {
			return nil, err
		}
		if _, undef := e.(config.Undefined); undef {
			if fields.All == nil {
				fields.All = slices.Clone(fields.Keys)
			}
			fields.All = append(fields.All, k)
			fields.Undef = append(fields.Undef, k)
			continue
		}
		if fields.All != nil {
			fields.All = append(fields.All, k)
		}
		fields.Keys = append(fields.Keys, k)
		fields.Vals[k] = e
	}
	if kind, ok := fields.Vals[shimMark].(string); ok {
		delete(fields.Vals, shimMark)
		fields.Keys = slices.DeleteFunc(fields.Keys, func(k string) bool { return k == shimMark })
		if fields.All != nil {
			fields.All = slices.DeleteFunc(fields.All, func(k string) bool { return k == shimMark })
		}
		return &jsMarker{kind: kind, fields: fields}, nil
	}
	return fields, nil
}

// shimMark is the property by which the shim marks what it makes.
const shimMark = "__sg"
