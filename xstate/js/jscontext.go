package js

import (
	"maps"
	"slices"

	"github.com/dop251/goja"

	"github.com/stategate/stategate/internal/config"
	"github.com/stategate/stategate/interp"
)

// ctxObj is a machine's context, or an event, as JavaScript code sees it:
// a dynamic object that reads the Go map of the snapshot (or the event's
// data), converting a property when code reads it. Making a plain object
// of every context and event a call gets is what a step spent most on;
// code mostly reads a property or two.
//
// The Go map is never changed through it (a snapshot's context is not
// changed in place, except that Seal replaces a step's JavaScript values
// with equal Go ones). Properties code sets or deletes are kept in the
// object, as they were on the plain object made before: they last while
// the runtime remembers the conversion, and never reach the snapshot.
type ctxObj struct {
	rt *jsRuntime
	m  map[string]any
	// owner is the snapshot whose context (or event) this is: an actor
	// ref kept in it is revived as that snapshot's child.
	owner *interp.Snapshot
	// ev, for an event (isEvent), gives it its "type" (which m, the
	// event's data, does not hold); a probed event notes the reads of its
	// payload.
	ev      interp.Event
	isEvent bool
	typeJS  goja.Value
	// memo holds the first properties read, so that code reading one again
	// gets the very same value.
	memo  [4]ctxProp
	nMemo int
	// set holds properties set by code; deleted, those it deleted.
	set     map[string]goja.Value
	deleted map[string]bool
}

type ctxProp struct {
	key string
	v   goja.Value
}

// contextJS gives JavaScript code a context: for a Go map, a ctxObj,
// made once per map while the runtime remembers it.
func (rt *jsRuntime) contextJS(ctx any) goja.Value {
	m, ok := ctx.(map[string]any)
	if !ok || len(m) == 0 || rt.mod.plainObjects {
		return rt.toJS(ctx)
	}
	if js := rt.cached(m); js != nil {
		return js
	}
	c := &ctxObj{rt: rt, m: m, owner: rt.owner}
	o := rt.vm.NewDynamicObject(c)
	rt.rememberCtx(m, o, c)
	return o
}

// asCtxObj returns the context or event object v is, or nil (by its
// type: Export of a plain object would read it all).
func asCtxObj(v goja.Value) *ctxObj {
	if o, ok := v.(*goja.Object); ok && o.ExportType() == ctxObjType {
		return o.Export().(*ctxObj)
	}
	return nil
}

// renew undoes what code did to the object, for the calls of another
// actor tree (cached): the properties it set or deleted go, and the
// objects it read are converted again (code may have changed them).
// The object itself, which both trees then got, can be told apart by
// neither: it has no state of its own, and one made at load cannot hold
// it across events (see noteWeakMutation for the WeakMaps).
func (c *ctxObj) renew() {
	c.set, c.deleted = nil, nil
	// The values read that are primitives stay: code cannot change one.
	n := 0
	for i := range c.nMemo {
		if _, isObj := c.memo[i].v.(*goja.Object); !isObj {
			c.memo[n] = c.memo[i]
			n++
		}
	}
	clear(c.memo[n:])
	c.nMemo = n
	c.owner = c.rt.owner
}

// eventObj gives JavaScript code an event: a ctxObj over its data, with
// its type; a probed event's object notes the reads of its payload.
func (rt *jsRuntime) eventObj(ev interp.Event) goja.Value {
	if rt.mod.plainObjects && ev.Probe() == nil {
		return rt.toJS(ev)
	}
	c := &ctxObj{rt: rt, m: ev.Data, ev: ev, isEvent: true, owner: rt.owner}
	return rt.vm.NewDynamicObject(c)
}

// Get returns a property (goja.DynamicObject); nil for one the context
// does not have, which goja then looks up in Object.prototype.
func (c *ctxObj) Get(key string) goja.Value {
	if c.isEvent && key != "type" {
		c.ev.Get(key) // notes a read of a probed event's payload
	}
	if c.set != nil {
		if v, ok := c.set[key]; ok {
			return v
		}
	}
	if c.deleted[key] {
		return nil
	}
	if c.isEvent && key == "type" {
		if c.typeJS == nil {
			c.typeJS = c.rt.vm.ToValue(c.ev.Type)
		}
		return c.typeJS
	}
	for i := range c.nMemo {
		if c.memo[i].key == key {
			return c.memo[i].v
		}
	}
	g, ok := c.m[key]
	if !ok {
		return nil
	}
	prev := c.rt.owner
	c.rt.owner = c.owner
	v := c.rt.toJS(g)
	c.rt.owner = prev
	if c.nMemo < len(c.memo) {
		c.memo[c.nMemo] = ctxProp{key, v}
		c.nMemo++
	} else {
		c.setProp(key, v) // read again, it must be the same value
	}
	return v
}

// Set sets a property (goja.DynamicObject), in the object only.
func (c *ctxObj) Set(key string, v goja.Value) bool {
	c.setProp(key, v)
	return true
}

func (c *ctxObj) setProp(key string, v goja.Value) {
	if c.set == nil {
		c.set = map[string]goja.Value{}
	}
	c.set[key] = v
	delete(c.deleted, key)
}

// Has reports whether the context has a property (goja.DynamicObject).
func (c *ctxObj) Has(key string) bool {
	if _, ok := c.set[key]; ok {
		return true
	}
	if c.isEvent {
		if key == "type" {
			return !c.deleted[key]
		}
		c.ev.Get(key) // notes a read of a probed event's payload
	}
	if c.deleted[key] {
		return false
	}
	_, ok := c.m[key]
	return ok
}

// Delete deletes a property, in the object only (goja.DynamicObject).
func (c *ctxObj) Delete(key string) bool {
	delete(c.set, key)
	if _, ok := c.m[key]; ok || (c.isEvent && key == "type") {
		if c.deleted == nil {
			c.deleted = map[string]bool{}
		}
		c.deleted[key] = true
	}
	return true
}

// Keys lists the properties (goja.DynamicObject) in the order a plain
// object made from the context would have them: integer-like keys first,
// in numeric order, as JavaScript orders them; then the context's other
// keys, sorted (a Go map does not keep their insertion order); then those
// code added, sorted.
func (c *ctxObj) Keys() []string {
	keys := make([]string, 0, len(c.m)+len(c.set)+1)
	for k := range c.m {
		if !c.deleted[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	n := len(keys)
	for k := range c.set {
		if _, inMap := c.m[k]; !inMap {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys[n:])
	if c.isEvent && !c.deleted["type"] {
		if _, set := c.set["type"]; !set {
			// An event's type comes first, as in the object made for it.
			keys = append([]string{"type"}, keys...)
		}
	}
	return config.KeyOrder(keys)
}

// plain is the context as JSON shows it, a map of its own: the Go values,
// with what the step's code left or set converted.
func (c *ctxObj) plain() map[string]any {
	out := maps.Clone(c.m)
	if c.isEvent {
		if out == nil {
			out = map[string]any{}
		}
		if !c.deleted["type"] {
			out["type"] = c.ev.Type
		}
	}
	for k, v := range out {
		if c.deleted[k] {
			delete(out, k)
			continue
		}
		if l, lazy := v.(*jsLazy); lazy {
			out[k] = l.rt.fromJS(l.v)
		}
	}
	for k, v := range c.set {
		if isFunction(v) || goja.IsUndefined(v) {
			delete(out, k)
			continue
		}
		out[k] = c.rt.fromJS(v)
	}
	return out
}
