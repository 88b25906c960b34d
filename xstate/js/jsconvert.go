package js

import (
	"fmt"
	"math"
	"reflect"
	"strconv"

	"github.com/dop251/goja"
)

// maxNesting bounds how deeply values may nest where stategate walks them
// with Go code that recurses: a value converted from JavaScript, the input
// of JSON.stringify and JSON.parse, the brackets of a machine file. A
// cyclic value is refused for it too.
const maxNesting = 1000

// fromJS converts a JavaScript value to a JSON-like Go value, as
// JSON.parse(JSON.stringify(v)) would (undefined and functions are
// dropped from objects; NaN and Infinity become null). A value it cannot
// convert (see convert) becomes nil, and its error is kept for Seal, which
// fails the step with it.
func (rt *jsRuntime) fromJS(v goja.Value) any {
	out, err := rt.convert(v)
	if err != nil {
		if rt.convErr == nil {
			rt.convErr = err
		}
		return nil
	}
	return out
}

// fromJSOrThrow is fromJS for a native function called from JavaScript: a
// value it cannot convert throws a RangeError into the calling code.
func (rt *jsRuntime) fromJSOrThrow(v goja.Value) any {
	out, err := rt.convert(v)
	if err != nil {
		panic(rt.rangeError(err.Error()))
	}
	return out
}

// convert converts v, or says why it cannot: a value with more elements
// (array items and object properties, counted as JSON would write them)
// or characters than the sandbox lets a built-in make, nested more than
// maxNesting levels deep, or cyclic.
func (rt *jsRuntime) convert(v goja.Value) (any, error) {
	lim := rt.mod.limits
	c := converter{nodes: lim.maxElements, chars: lim.maxString, maxNodes: lim.maxElements}
	out := c.top(v, 0)
	return out, c.err
}

// converter walks a value under the sandbox's limits: nodes and chars are
// what may still be made.
type converter struct {
	nodes, chars int64
	maxNodes     int64
	err          error
}

func (c *converter) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf(format, args...)
	}
}

// take counts n nodes about to be made, and reports whether they may be.
func (c *converter) take(n int64) bool {
	if c.nodes -= n; c.nodes < 0 {
		c.fail("the value is too large to keep: more than %d array items and object properties", c.maxNodes)
		return false
	}
	return true
}

func (c *converter) deep(depth int) bool {
	if depth > maxNesting {
		c.fail("the value is nested more than %d levels deep, or cyclic", maxNesting)
		return true
	}
	return false
}

// top converts a value as a whole: an object with a toJSON method is what
// that returns, an error its message; a plain object or array, and what
// it holds, as elem does.
func (c *converter) top(v goja.Value, depth int) any {
	if c.err != nil || v == nil || goja.IsUndefined(v) || goja.IsNull(v) || c.deep(depth) {
		return nil
	}
	o, isObj := v.(*goja.Object)
	if !isObj {
		return c.primitive(v)
	}
	if isFunction(o) {
		return nil
	}
	switch o.ClassName() {
	case "Array", "Object":
		if toJSON := o.Get("toJSON"); toJSON == nil || goja.IsUndefined(toJSON) {
			return c.plain(o, depth)
		}
	case "Error":
		m := map[string]any{}
		if msg := o.Get("message"); msg != nil {
			m["message"] = msg.String()
		}
		return m
	}
	if toJSON, ok := goja.AssertFunction(o.Get("toJSON")); ok {
		if r, err := toJSON(o); err == nil {
			return c.top(r, depth+1)
		}
	}
	return c.object(o, depth, c.top)
}

// Types of the dynamic objects code gets, which stand for Go values.
var (
	ctxObjType  = reflect.TypeFor[*ctxObj]()
	argsObjType = reflect.TypeFor[*argsObj]()
	selfObjType = reflect.TypeFor[*selfObj]()
)

// plain converts a plain object or array (or a dynamic object, which
// gives the Go values it stands for) and what it holds.
func (c *converter) plain(o *goja.Object, depth int) any {
	switch o.ExportType() {
	case ctxObjType, argsObjType, selfObjType:
		return normalize(o.Export())
	}
	if o.ClassName() != "Array" {
		return c.object(o, depth, c.elem)
	}
	n := toLength(o.Get("length"))
	if !c.take(n) {
		return nil
	}
	out := make([]any, n)
	for i := range n {
		if c.err != nil {
			return nil
		}
		out[i] = c.elem(o.Get(indexKey(i)), depth+1)
	}
	return out
}

// object converts an object by its own enumerable properties, leaving out
// those JSON leaves out, their values converted by conv.
func (c *converter) object(o *goja.Object, depth int, conv func(goja.Value, int) any) any {
	keys := o.Keys()
	if !c.take(int64(len(keys))) {
		return nil
	}
	m := make(map[string]any, len(keys))
	for _, k := range keys {
		e := o.Get(k)
		if e == nil || goja.IsUndefined(e) || isFunction(e) || isSymbol(e) {
			continue
		}
		if m[k] = conv(e, depth+1); c.err != nil {
			return nil
		}
	}
	return m
}

// elem converts a value that a plain object or array holds, as goja's
// Export and normalize did: plain objects and arrays by what they hold,
// a date as its ISO string, a String, Number or Boolean object as its
// value, other objects by their own enumerable properties; functions and
// symbols are null (and left out of objects).
func (c *converter) elem(v goja.Value, depth int) any {
	if c.err != nil || v == nil || goja.IsUndefined(v) || goja.IsNull(v) || c.deep(depth) {
		return nil
	}
	o, isObj := v.(*goja.Object)
	if !isObj {
		if isSymbol(v) {
			return nil
		}
		return c.primitive(v)
	}
	if isFunction(o) {
		return nil
	}
	switch o.ClassName() {
	case "Array", "Object":
		return c.plain(o, depth)
	case "Date", "String", "Number", "Boolean":
		return normalize(o.Export())
	}
	return c.object(o, depth, c.elem)
}

// primitive converts a value that is not an object, counting a string's
// characters.
func (c *converter) primitive(v goja.Value) any {
	if s, ok := v.(goja.String); ok {
		if c.chars -= int64(s.Length()); c.chars < 0 {
			c.fail("the value is too large to keep: its strings have more characters than the sandbox allows")
			return nil
		}
	}
	return primitive(v)
}

func isSymbol(v goja.Value) bool {
	_, ok := v.(*goja.Symbol)
	return ok
}

// toLength is ECMAScript's ToLength of a value that is not an object's
// (an array's length): an integer from 0 to 2^53-1.
func toLength(v goja.Value) int64 {
	if v == nil {
		return 0
	}
	f := v.ToFloat()
	switch {
	case math.IsNaN(f) || f <= 0:
		return 0
	case f >= 1<<53-1:
		return 1<<53 - 1
	}
	return int64(f)
}

// indexKeys are the property names of the first array indexes, made once
// and only read.
var indexKeys = func() (t [1024]string) {
	for i := range t {
		t[i] = strconv.Itoa(i)
	}
	return t
}()

// indexKey returns the property name of an array index.
func indexKey(i int64) string {
	if i < int64(len(indexKeys)) {
		return indexKeys[i]
	}
	return strconv.FormatInt(i, 10)
}
