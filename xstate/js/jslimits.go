package js

import (
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/dop251/goja"
)

// A call into goja is interrupted only between the instructions of the
// interpreter: a built-in written in Go runs to its end. The watchdog
// cannot stop one that makes a string, an array or a buffer of a size its
// arguments name (String.prototype.repeat, new ArrayBuffer(n)), or that
// walks an array by its length, which costs nothing to set
// (new Array(2**32-1).join()), or that multiplies what it is given
// (join and JSON.stringify of an array that holds itself many times over).
// The sandbox bounds those built-ins: past its limits they throw a
// RangeError, as V8 does for lengths it cannot make.
//
// The built-ins bounded, found by reading goja's (each one that loops or
// allocates by a length, a count or the product of its inputs):
//
//   - String.prototype: repeat, padStart, padEnd, concat, split, replace,
//     replaceAll, [Symbol.iterator]; String.raw.
//   - RegExp.prototype: [Symbol.replace], [Symbol.split], [Symbol.match],
//     [Symbol.matchAll] (which String.prototype's replace, split, match
//     and matchAll call).
//   - Array.prototype: every method that walks the array by its length
//     (concat, copyWithin, entries, every, fill, filter, flat, flatMap,
//     forEach, includes, indexOf, join, keys, lastIndexOf, map, reduce,
//     reduceRight, reverse, shift, slice, some, sort, splice,
//     toLocaleString, toReversed, toSorted, toSpliced, unshift, values,
//     with, [Symbol.iterator], which spread and for...of use); Array.from.
//     (find, findIndex, findLast and findLastIndex call their function for
//     every index, so the watchdog stops them; at, pop and push do not
//     walk.)
//   - Function.prototype.apply, Reflect.apply and Reflect.construct (an
//     array-like of any length as arguments).
//   - Object.keys, values, entries, getOwnPropertyNames,
//     getOwnPropertyDescriptors and assign, and Reflect.ownKeys, of a
//     string (one property per character).
//   - JSON.stringify (its output, and how deep it goes) and JSON.parse.
//   - ArrayBuffer and the typed arrays' constructors, %TypedArray%.from,
//     and the typed arrays' join and toLocaleString.
//
// Code from strings (eval, the Function constructors) is not allowed:
// goja's parser recurses without a bound, and a deep enough expression
// would overflow the Go stack, which ends the process. BigInt is not
// available: goja computes 2n ** 10000000000n or 1n << 10000000000n in one
// step, of any size.

// sandboxLimits are what one call of a built-in may make or walk.
type sandboxLimits struct {
	maxString   int64 // characters of a string made
	maxElements int64 // elements of an array made or walked, arguments of a call, characters iterated
	maxBytes    int64 // bytes of an ArrayBuffer
}

// limitsFor derives the limits from a memory budget: a string of a
// quarter of it (two bytes a character at most), and as many elements as
// the budget holds at a kilobyte each (what an element costs at most, as
// the promise of Promise.all; an array's own costs 16 bytes).
func limitsFor(budget int64) sandboxLimits {
	if budget <= 0 {
		budget = DefaultMemory
	}
	e := max(budget/1024, 1024)
	return sandboxLimits{maxString: budget / 4, maxElements: e, maxBytes: 8 * e}
}

// rangeError makes a RangeError with a message, to throw into code.
func (rt *jsRuntime) rangeError(msg string) goja.Value { return rt.jsError("RangeError", msg) }

// jsError makes an error of a global error constructor (RangeError,
// SyntaxError) with a message, to throw into code.
func (rt *jsRuntime) jsError(ctorName, msg string) goja.Value {
	if ctor, ok := goja.AssertConstructor(rt.vm.Get(ctorName)); ok {
		if o, err := ctor(nil, rt.vm.ToValue(msg)); err == nil {
			return o
		}
	}
	return rt.vm.NewTypeError(msg)
}

// sandbox installs the limits in a runtime.
type sandbox struct {
	rt  *jsRuntime
	vm  *goja.Runtime
	lim sandboxLimits
	// replace is RegExp.prototype[Symbol.replace] as goja has it, which
	// counts matches.
	replace goja.Callable
	// The regular expressions' (jsregexp.go): RegExp.prototype's source
	// and flags getters, the RegExp constructor, the sandbox's exec, and
	// the prototype of the iterators of matchAll.
	source, flags      goja.Callable
	regExpCtor, execFn *goja.Object
	iterProto          *goja.Object
}

// installLimits bounds the built-ins of a runtime (see sandboxLimits).
func (rt *jsRuntime) installLimits() error {
	x := &sandbox{rt: rt, vm: rt.vm, lim: rt.mod.limits}
	for _, f := range []func() error{x.strings, x.regexps, x.arrays, x.functions, x.objects, x.json, x.typedArrays, x.codeFromStrings, x.noBigInt, x.guardMutators, x.recordBind} {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

func (x *sandbox) tooLong() {
	panic(x.rt.rangeError(fmt.Sprintf("Invalid string length: in stategate's sandbox a built-in makes strings of at most %d characters", x.lim.maxString)))
}

func (x *sandbox) tooMany() {
	panic(x.rt.rangeError(fmt.Sprintf("Invalid array length: in stategate's sandbox a built-in makes or walks at most %d elements", x.lim.maxElements)))
}

func (x *sandbox) tooDeep() {
	panic(x.rt.rangeError(fmt.Sprintf("Maximum call stack size exceeded: in stategate's sandbox values nest at most %d levels deep", maxNesting)))
}

// object returns a global's property path ("String.prototype").
func (x *sandbox) object(path string) (*goja.Object, error) {
	v, err := x.vm.RunString(path)
	if err != nil {
		return nil, err
	}
	o, ok := v.(*goja.Object)
	if !ok {
		return nil, fmt.Errorf("%s is not an object", path)
	}
	return o, nil
}

type wrapper func(orig goja.Callable, call goja.FunctionCall) goja.Value

// method replaces obj[name] by a native function that gets the original.
func (x *sandbox) method(obj *goja.Object, name string, f wrapper) error {
	fn, err := x.wrap(obj.Get(name), name, f)
	if err != nil {
		return err
	}
	return obj.DefineDataProperty(name, fn, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// symMethod is method for a property named by a symbol.
func (x *sandbox) symMethod(obj *goja.Object, sym *goja.Symbol, name string, f wrapper) error {
	fn, err := x.wrap(obj.GetSymbol(sym), name, f)
	if err != nil {
		return err
	}
	return obj.DefineDataPropertySymbol(sym, fn, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// wrap makes the native function that stands for orig, with its name and
// length.
func (x *sandbox) wrap(origV goja.Value, name string, f wrapper) (goja.Value, error) {
	orig, ok := goja.AssertFunction(origV)
	if !ok {
		return nil, fmt.Errorf("%s is not a function", name)
	}
	fn := x.vm.ToValue(func(call goja.FunctionCall) goja.Value { return f(orig, call) }).(*goja.Object)
	_ = fn.DefineDataProperty("name", x.vm.ToValue(name), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	_ = fn.DefineDataProperty("length", origV.(*goja.Object).Get("length"), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	return fn, nil
}

// invoke calls f, throwing on what it throws.
func invoke(f goja.Callable, this goja.Value, args ...goja.Value) goja.Value {
	v, err := f(this, args...)
	if err != nil {
		panic(err) // an exception is thrown again; an interrupt goes on up
	}
	return v
}

// str is ECMAScript's ToString of v, as a string value.
func (x *sandbox) str(v goja.Value) goja.String {
	s := v.ToString()
	if gs, ok := s.(goja.String); ok {
		return gs
	}
	return x.vm.ToValue(s.String()).(goja.String)
}

func nullish(v goja.Value) bool { return v == nil || goja.IsUndefined(v) || goja.IsNull(v) }

// strlen is the length of a string value, in UTF-16 code units.
func strlen(v goja.Value) int64 {
	if s, ok := v.(goja.String); ok {
		return int64(s.Length())
	}
	return int64(len(v.String()))
}

// lengthOf is the ToLength of an object's length.
func lengthOf(o *goja.Object) int64 { return toLength(o.Get("length")) }

// toUint32 is ECMAScript's ToUint32 of a number.
func toUint32(v goja.Value) int64 {
	f := v.ToFloat()
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	m := math.Mod(math.Trunc(f), 1<<32)
	if m < 0 {
		m += 1 << 32
	}
	return int64(m)
}

// hasMethod reports whether v is an object with a method under sym (a
// RegExp's Symbol.split or Symbol.replace).
func hasMethod(v goja.Value, sym *goja.Symbol) bool {
	o, ok := v.(*goja.Object)
	return ok && isFunction(o.GetSymbol(sym))
}

func (x *sandbox) strings() error {
	proto, err := x.object("String.prototype")
	if err != nil {
		return err
	}
	str, err := x.object("String")
	if err != nil {
		return err
	}
	max := float64(x.lim.maxString)
	wrappers := map[string]wrapper{
		"repeat": func(orig goja.Callable, call goja.FunctionCall) goja.Value {
			if nullish(call.This) {
				return invoke(orig, call.This, call.Arguments...)
			}
			s, count := x.str(call.This), call.Argument(0).ToNumber()
			if n := count.ToFloat(); n > 0 && !math.IsInf(n, 0) && float64(strlen(s))*math.Trunc(n) > max {
				x.tooLong()
			}
			return invoke(orig, s, count)
		},
		"concat": func(orig goja.Callable, call goja.FunctionCall) goja.Value {
			if nullish(call.This) {
				return invoke(orig, call.This, call.Arguments...)
			}
			s := x.str(call.This)
			total := strlen(s)
			args := make([]goja.Value, len(call.Arguments))
			for i, a := range call.Arguments {
				args[i] = x.str(a)
				total += strlen(args[i])
			}
			if float64(total) > max {
				x.tooLong()
			}
			return invoke(orig, s, args...)
		},
		"split": func(orig goja.Callable, call goja.FunctionCall) goja.Value {
			sep := call.Argument(0)
			if nullish(call.This) || hasMethod(sep, goja.SymSplit) {
				return invoke(orig, call.This, call.Arguments...) // a RegExp's split is bounded itself
			}
			return x.split(orig, x.str(call.This), call.Argument(1), func(s, limit goja.Value) goja.Value { return invoke(orig, s, sep, limit) })
		},
		"replace":    x.stringReplace(false),
		"replaceAll": x.stringReplace(true),
	}
	pad := func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		if nullish(call.This) {
			return invoke(orig, call.This, call.Arguments...)
		}
		s, maxLength, fill := x.str(call.This), call.Argument(0).ToNumber(), call.Argument(1)
		if !goja.IsUndefined(fill) {
			fill = x.str(fill)
		}
		if n := maxLength.ToFloat(); n > max && n > float64(strlen(s)) && (goja.IsUndefined(fill) || strlen(fill) > 0) {
			x.tooLong()
		}
		return invoke(orig, s, maxLength, fill)
	}
	wrappers["padStart"], wrappers["padEnd"] = pad, pad
	for name, f := range wrappers {
		if err := x.method(proto, name, f); err != nil {
			return err
		}
	}
	if err := x.symMethod(proto, goja.SymIterator, "[Symbol.iterator]", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		if nullish(call.This) {
			return invoke(orig, call.This)
		}
		s := x.str(call.This)
		if strlen(s) > x.lim.maxElements {
			x.tooMany()
		}
		return invoke(orig, s)
	}); err != nil {
		return err
	}
	// String.raw, written here: its template names how many pieces it
	// joins, and each may be long.
	raw := x.vm.ToValue(func(call goja.FunctionCall) goja.Value {
		pieces := call.Argument(0).ToObject(x.vm).Get("raw")
		if nullish(pieces) {
			panic(x.vm.NewTypeError("Cannot convert undefined or null to object"))
		}
		r := pieces.ToObject(x.vm)
		n := lengthOf(r)
		if n > x.lim.maxElements {
			x.tooMany()
		}
		var b goja.StringBuilder
		var total int64
		add := func(v goja.Value) {
			s := x.str(v)
			if total += strlen(s); float64(total) > max {
				x.tooLong()
			}
			b.WriteString(s)
		}
		for i := range n {
			add(r.Get(indexKey(i)))
			if i+1 < n && int(i+1) < len(call.Arguments) {
				add(call.Arguments[i+1])
			}
		}
		return b.String()
	}).(*goja.Object)
	_ = raw.DefineDataProperty("name", x.vm.ToValue("raw"), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	return str.DefineDataProperty("raw", raw, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// split runs a split of s (by a string, or a RegExp's own) with its limit
// capped one past the most elements allowed, and throws when the result
// reaches it.
func (x *sandbox) split(orig goja.Callable, s, limitArg goja.Value, run func(s, limit goja.Value) goja.Value) goja.Value {
	limit := int64(math.MaxUint32)
	if !goja.IsUndefined(limitArg) {
		limit = toUint32(limitArg)
	}
	res := run(s, x.vm.ToValue(min(limit, x.lim.maxElements+1)))
	if limit > x.lim.maxElements {
		if o, ok := res.(*goja.Object); ok && lengthOf(o) > x.lim.maxElements {
			x.tooMany()
		}
	}
	return res
}

// stringReplace bounds String.prototype.replace and replaceAll with a
// string pattern (a RegExp's are bounded by RegExp.prototype's).
func (x *sandbox) stringReplace(all bool) wrapper {
	return func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		pattern := call.Argument(0)
		if nullish(call.This) || hasMethod(pattern, goja.SymReplace) {
			return invoke(orig, call.This, call.Arguments...)
		}
		s, p, r := x.str(call.This), x.str(pattern), call.Argument(1)
		if fn, ok := goja.AssertFunction(r); ok {
			return invoke(orig, s, p, x.boundedReplacer(fn, strlen(s)))
		}
		tpl := x.str(r)
		sl, pl := strlen(s), strlen(p)
		t := tpl.String()
		// What one match may become: the template, with $& the pattern
		// and $` and $' at most the string.
		per := float64(strlen(tpl)) + float64(strings.Count(t, "$&"))*float64(pl) + float64(strings.Count(t, "$`")+strings.Count(t, "$'"))*float64(sl)
		matches := 1.0
		if all {
			matches = float64(sl + 1)
			if pl > 0 {
				matches = float64(sl/pl + 1)
			}
		}
		if float64(sl)+matches*per > float64(x.lim.maxString) {
			// Count the matches themselves.
			gs, gp := s.String(), p.String()
			switch {
			case !strings.Contains(gs, gp):
				matches = 0
			case !all:
				matches = 1
			case gp == "":
				matches = float64(sl + 1)
			default:
				matches = float64(strings.Count(gs, gp))
			}
			if float64(sl)+matches*per > float64(x.lim.maxString) {
				x.tooLong()
			}
		}
		return invoke(orig, s, p, tpl)
	}
}

// boundedReplacer wraps the function of a replace: what its results add up
// to, with the string replaced (of length sl), may not pass the limit.
func (x *sandbox) boundedReplacer(fn goja.Callable, sl int64) goja.Value {
	total := sl
	return x.vm.ToValue(func(call goja.FunctionCall) goja.Value {
		r := x.str(invoke(fn, goja.Undefined(), call.Arguments...))
		if total += strlen(r); total > x.lim.maxString {
			x.tooLong()
		}
		return r
	})
}

func (x *sandbox) regexps() error {
	proto, err := x.object("RegExp.prototype")
	if err != nil {
		return err
	}
	replace, ok := goja.AssertFunction(proto.GetSymbol(goja.SymReplace))
	if !ok {
		return fmt.Errorf("RegExp.prototype[Symbol.replace] is not a function")
	}
	x.replace = replace
	if err := x.installRegExps(proto); err != nil {
		return err
	}
	// goja's replace, match and search, made to match through exec
	// (markChanged).
	if err := x.symMethod(proto, goja.SymReplace, "[Symbol.replace]", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		rx, s, r := call.This, x.str(call.Argument(0)), call.Argument(1)
		markChanged(rx)
		if fn, ok := goja.AssertFunction(r); ok {
			return invoke(orig, rx, s, x.boundedReplacer(fn, strlen(s)))
		}
		tpl := x.str(r)
		sl := float64(strlen(s))
		// At most every position matches, and a $ becomes at most the string.
		if per := float64(strlen(tpl)) + float64(strings.Count(tpl.String(), "$"))*sl; sl+(sl+1)*per > float64(x.lim.maxString) {
			// Measure: what each match becomes, without making it.
			total := int64(sl)
			x.eachMatch(rx, s, func(args []goja.Value) {
				if total += substitutionLength(tpl.String(), args, int64(sl)); total > x.lim.maxString {
					x.tooLong()
				}
			})
		}
		return invoke(orig, rx, s, tpl)
	}); err != nil {
		return err
	}
	if err := x.symMethod(proto, goja.SymSearch, "[Symbol.search]", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		markChanged(call.This)
		return invoke(orig, call.This, call.Arguments...)
	}); err != nil {
		return err
	}
	// A global match makes one element per match: a long string is counted
	// first.
	return x.symMethod(proto, goja.SymMatch, "[Symbol.match]", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		rx, s := call.This, x.str(call.Argument(0))
		markChanged(rx)
		if strlen(s)+1 > x.lim.maxElements {
			n := int64(0)
			x.eachMatch(rx, s, func([]goja.Value) {
				if n++; n > x.lim.maxElements {
					x.tooMany()
				}
			})
		}
		return invoke(orig, rx, s)
	})
}

// eachMatch calls f with what a replace function would get for each match
// of rx in s (once, unless rx is global), and leaves rx's lastIndex as it
// was.
func (x *sandbox) eachMatch(rx, s goja.Value, f func(args []goja.Value)) {
	o, ok := rx.(*goja.Object)
	if !ok {
		return
	}
	last := o.Get("lastIndex")
	empty := x.vm.ToValue("")
	markChanged(rx)
	invoke(x.replace, rx, s, x.vm.ToValue(func(call goja.FunctionCall) goja.Value {
		f(call.Arguments)
		return empty
	}))
	_ = o.Set("lastIndex", last)
}

// substitutionLength is the length of what a replace template becomes
// for a match (ECMAScript's GetSubstitution), from what a replace
// function would get: the match, the captures, its position, the string
// and, when the RegExp has named groups, the groups. Lengths of the
// template's own text are counted in bytes, at least its UTF-16 units.
func substitutionLength(tpl string, args []goja.Value, sl int64) int64 {
	n := len(args)
	var groups goja.Value
	if n > 0 {
		if o, ok := args[n-1].(*goja.Object); ok {
			groups, n = o, n-1
		}
	}
	if n < 3 {
		return int64(len(tpl))
	}
	matched := strlen(args[0])
	pos := toLength(args[n-2])
	caps := args[1 : n-2]
	var total int64
	for i := 0; i < len(tpl); i++ {
		if tpl[i] != '$' || i+1 == len(tpl) {
			total++
			continue
		}
		switch c := tpl[i+1]; {
		case c == '$':
			total++
			i++
		case c == '&':
			total += matched
			i++
		case c == '`':
			total += pos
			i++
		case c == '\'':
			total += max(0, sl-pos-matched)
			i++
		case c >= '0' && c <= '9':
			d := int(c - '0')
			if i+2 < len(tpl) && tpl[i+2] >= '0' && tpl[i+2] <= '9' && d*10+int(tpl[i+2]-'0') <= len(caps) && d*10+int(tpl[i+2]-'0') > 0 {
				d = d*10 + int(tpl[i+2]-'0')
				i++
			}
			if d >= 1 && d <= len(caps) {
				if v := caps[d-1]; !nullish(v) {
					total += strlen(v)
				}
				i++
			} else {
				total++
			}
		case c == '<' && groups != nil:
			end := strings.IndexByte(tpl[i+2:], '>')
			if end < 0 {
				total++
				continue
			}
			if v := groups.(*goja.Object).Get(tpl[i+2 : i+2+end]); !nullish(v) {
				total += strlen(v.ToString())
			}
			i += 2 + end
		default:
			total++
		}
	}
	return total
}

func (x *sandbox) arrays() error {
	proto, err := x.object("Array.prototype")
	if err != nil {
		return err
	}
	arr, err := x.object("Array")
	if err != nil {
		return err
	}
	// checked throws when the array (this) is longer than the limit, and
	// calls the method with it as an object.
	checked := func(extra func(o *goja.Object, n int64, call goja.FunctionCall)) wrapper {
		return func(orig goja.Callable, call goja.FunctionCall) goja.Value {
			o := call.This.ToObject(x.vm)
			n := lengthOf(o)
			if n > x.lim.maxElements {
				x.tooMany()
			}
			if extra != nil {
				extra(o, n, call)
			}
			return invoke(orig, o, call.Arguments...)
		}
	}
	for _, name := range []string{"copyWithin", "entries", "every", "fill", "filter", "forEach", "includes", "indexOf", "keys",
		"lastIndexOf", "map", "reduce", "reduceRight", "reverse", "shift", "slice", "some", "sort", "splice", "with", "toReversed", "toSorted"} {
		if err := x.method(proto, name, checked(nil)); err != nil {
			return err
		}
	}
	// More elements than it had.
	grows := checked(func(o *goja.Object, n int64, call goja.FunctionCall) {
		if n+int64(len(call.Arguments)) > x.lim.maxElements {
			x.tooMany()
		}
	})
	for _, name := range []string{"unshift", "toSpliced"} {
		if err := x.method(proto, name, grows); err != nil {
			return err
		}
	}
	// values is also [Symbol.iterator] (one function), which spread,
	// for...of and destructuring use.
	values, err := x.wrap(proto.Get("values"), "values", checked(nil))
	if err != nil {
		return err
	}
	if err := proto.DefineDataProperty("values", values, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return err
	}
	if err := proto.DefineDataPropertySymbol(goja.SymIterator, values, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return err
	}
	if err := x.method(proto, "concat", checked(func(o *goja.Object, n int64, call goja.FunctionCall) {
		for _, a := range call.Arguments {
			if n += x.spreadLength(a); n > x.lim.maxElements {
				x.tooMany()
			}
		}
	})); err != nil {
		return err
	}
	if err := x.method(proto, "flat", checked(func(o *goja.Object, n int64, call goja.FunctionCall) {
		depth := 1.0
		if d := call.Argument(0); !goja.IsUndefined(d) {
			depth = d.ToFloat()
		}
		count := int64(0)
		x.flatCount(o, depth, 0, &count)
	})); err != nil {
		return err
	}
	if err := x.method(proto, "flatMap", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		o := call.This.ToObject(x.vm)
		if lengthOf(o) > x.lim.maxElements {
			x.tooMany()
		}
		fn, ok := goja.AssertFunction(call.Argument(0))
		if !ok {
			return invoke(orig, o, call.Arguments...) // throws the TypeError
		}
		thisArg, total := call.Argument(1), int64(0)
		bounded := x.vm.ToValue(func(c goja.FunctionCall) goja.Value {
			r := invoke(fn, thisArg, c.Arguments...)
			if total += x.arrayLength(r); total > x.lim.maxElements {
				x.tooMany()
			}
			return r
		})
		return invoke(orig, o, bounded)
	}); err != nil {
		return err
	}
	if err := x.method(proto, "join", func(_ goja.Callable, call goja.FunctionCall) goja.Value {
		sep := goja.Value(x.vm.ToValue(","))
		if s := call.Argument(0); !goja.IsUndefined(s) {
			sep = x.str(s)
		}
		return x.join(call.This.ToObject(x.vm), sep, nil)
	}); err != nil {
		return err
	}
	if err := x.method(proto, "toLocaleString", func(_ goja.Callable, call goja.FunctionCall) goja.Value {
		return x.join(call.This.ToObject(x.vm), x.vm.ToValue(","), func(e goja.Value) goja.Value {
			f, ok := goja.AssertFunction(e.ToObject(x.vm).Get("toLocaleString"))
			if !ok {
				panic(x.vm.NewTypeError("toLocaleString is not a function"))
			}
			return invoke(f, e)
		})
	}); err != nil {
		return err
	}
	return x.method(arr, "from", x.from)
}

// from is Array.from and %TypedArray%.from: the elements it makes are
// counted through the map function it is given (its own, when the caller
// gives one).
func (x *sandbox) from(orig goja.Callable, call goja.FunctionCall) goja.Value {
	items, mapFn, thisArg := call.Argument(0), call.Argument(1), call.Argument(2)
	var user goja.Callable
	if !goja.IsUndefined(mapFn) {
		var ok bool
		if user, ok = goja.AssertFunction(mapFn); !ok {
			return invoke(orig, call.This, call.Arguments...) // throws the TypeError
		}
	}
	if o, ok := items.(*goja.Object); ok && !hasMethod(o, goja.SymIterator) && lengthOf(o) > x.lim.maxElements {
		x.tooMany() // an array-like, whose length is made at once
	}
	n := int64(0)
	counted := x.vm.ToValue(func(c goja.FunctionCall) goja.Value {
		if n++; n > x.lim.maxElements {
			x.tooMany()
		}
		if user != nil {
			return invoke(user, thisArg, c.Argument(0), c.Argument(1))
		}
		return c.Argument(0)
	})
	return invoke(orig, call.This, items, counted)
}

// spreadLength is how many elements concat makes of an argument.
func (x *sandbox) spreadLength(v goja.Value) int64 {
	o, ok := v.(*goja.Object)
	if !ok {
		return 1
	}
	spread := o.ClassName() == "Array"
	if s := o.GetSymbol(goja.SymIsConcatSpreadable); s != nil && !goja.IsUndefined(s) {
		spread = s.ToBoolean()
	}
	if !spread {
		return 1
	}
	return lengthOf(o)
}

// arrayLength is the length of an array, 1 for another value (what
// flatMap makes of a result).
func (x *sandbox) arrayLength(v goja.Value) int64 {
	if o, ok := v.(*goja.Object); ok && o.ClassName() == "Array" {
		return lengthOf(o)
	}
	return 1
}

// flatCount counts the elements flat makes of o, at a depth, and throws
// past the limits.
func (x *sandbox) flatCount(o *goja.Object, depth float64, level int, count *int64) {
	if level > maxNesting {
		x.tooDeep()
	}
	n := lengthOf(o)
	if n > x.lim.maxElements {
		x.tooMany()
	}
	for i := range n {
		e := o.Get(indexKey(i))
		if e == nil {
			continue // a hole: left out
		}
		if eo, ok := e.(*goja.Object); ok && depth >= 1 && eo.ClassName() == "Array" {
			x.flatCount(eo, depth-1, level+1, count)
			continue
		}
		if *count++; *count > x.lim.maxElements {
			x.tooMany()
		}
	}
}

// join joins an array's elements as Array.prototype.join does (each made
// a string by str, or ToString), throwing past the limits: the elements
// it walks (those of the arrays joined within it too), the string it
// makes, and how deep arrays in arrays go. An array that holds itself
// joins as "", as in V8.
func (x *sandbox) join(o *goja.Object, sep goja.Value, str func(goja.Value) goja.Value) goja.Value {
	n := lengthOf(o)
	if n > x.lim.maxElements {
		x.tooMany()
	}
	rt := x.rt
	for _, j := range rt.joining {
		if j == o {
			return x.vm.ToValue("")
		}
	}
	if len(rt.joining) >= maxNesting {
		x.tooDeep()
	}
	if len(rt.joining) == 0 {
		rt.joined = 0
	}
	// The elements of arrays joined within this join count too: an array
	// that holds another twice, nested, is joined 2^depth times over.
	if rt.joined += n; rt.joined > x.lim.maxElements {
		x.tooMany()
	}
	rt.joining = append(rt.joining, o)
	defer func() { rt.joining = rt.joining[:len(rt.joining)-1] }()
	var b goja.StringBuilder
	sl, total := strlen(sep), int64(0)
	for i := range n {
		if i > 0 {
			if total += sl; total > x.lim.maxString {
				x.tooLong()
			}
			b.WriteString(sep.(goja.String))
		}
		e := o.Get(indexKey(i))
		if nullish(e) {
			continue
		}
		var s goja.Value
		if str != nil {
			s = x.str(str(e))
		} else {
			s = x.str(e)
		}
		if total += strlen(s); total > x.lim.maxString {
			x.tooLong()
		}
		b.WriteString(s.(goja.String))
	}
	return b.String()
}

func (x *sandbox) functions() error {
	fp, err := x.object("Function.prototype")
	if err != nil {
		return err
	}
	reflect, err := x.object("Reflect")
	if err != nil {
		return err
	}
	// argsAt bounds the array-like at position i, made a list of
	// arguments at once.
	argsAt := func(i int) wrapper {
		return func(orig goja.Callable, call goja.FunctionCall) goja.Value {
			if o, ok := call.Argument(i).(*goja.Object); ok && lengthOf(o) > x.lim.maxElements {
				panic(x.rt.rangeError(fmt.Sprintf("Too many arguments in function call: in stategate's sandbox a call takes at most %d", x.lim.maxElements)))
			}
			return invoke(orig, call.This, call.Arguments...)
		}
	}
	if err := x.method(fp, "apply", argsAt(1)); err != nil {
		return err
	}
	if err := x.method(reflect, "apply", argsAt(2)); err != nil {
		return err
	}
	return x.method(reflect, "construct", argsAt(1))
}

func (x *sandbox) objects() error {
	object, err := x.object("Object")
	if err != nil {
		return err
	}
	reflect, err := x.object("Reflect")
	if err != nil {
		return err
	}
	// A string has a property per character.
	checkString := func(v goja.Value) {
		n := int64(0)
		if s, ok := v.(goja.String); ok {
			n = int64(s.Length())
		} else if o, ok := v.(*goja.Object); ok && o.ClassName() == "String" {
			n = lengthOf(o)
		}
		if n > x.lim.maxElements {
			x.tooMany()
		}
	}
	first := func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		checkString(call.Argument(0))
		return invoke(orig, call.This, call.Arguments...)
	}
	for _, name := range []string{"keys", "values", "entries", "getOwnPropertyNames", "getOwnPropertyDescriptors"} {
		if err := x.method(object, name, first); err != nil {
			return err
		}
	}
	if err := x.method(reflect, "ownKeys", first); err != nil {
		return err
	}
	return x.method(object, "assign", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		for _, a := range call.Arguments[min(1, len(call.Arguments)):] {
			checkString(a)
		}
		return invoke(orig, call.This, call.Arguments...)
	})
}

func (x *sandbox) json() error {
	j, err := x.object("JSON")
	if err != nil {
		return err
	}
	if err := x.method(j, "stringify", x.stringify); err != nil {
		return err
	}
	return x.method(j, "parse", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		text := x.str(call.Argument(0))
		x.checkJSONText(text.String())
		return invoke(orig, call.This, text, call.Argument(1))
	})
}

// checkJSONText throws for JSON text that would make more values than the
// limit, or nest deeper than maxNesting, before goja parses it.
func (x *sandbox) checkJSONText(s string) {
	depth, values := 0, int64(0)
	inString, escaped := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			if depth++; depth > maxNesting {
				x.tooDeep()
			}
			values++
		case ']', '}':
			depth--
		case ',':
			values++
		}
		if values > x.lim.maxElements {
			x.tooMany()
		}
	}
}

// stringify is JSON.stringify, with a replacer of its own that sees every
// value written (after toJSON, and the caller's replacer) and throws past
// the limits: the string it makes (counted as the keys, the strings and a
// few characters a value, with the indentation of its depth) and how deep
// it goes. A list of properties as replacer is kept: the value is written
// once with it checked, then with the list.
func (x *sandbox) stringify(orig goja.Callable, call goja.FunctionCall) goja.Value {
	value, replacer, space := call.Argument(0), call.Argument(1), call.Argument(2)
	gap := int64(0)
	switch {
	case goja.IsNumber(space):
		gap = int64(min(10, max(0, space.ToFloat())))
	case goja.IsString(space):
		gap = min(10, strlen(space))
	}
	user, _ := goja.AssertFunction(replacer)
	var list map[string]bool
	if o, ok := replacer.(*goja.Object); ok && user == nil && o.ClassName() == "Array" {
		list = map[string]bool{}
		n := lengthOf(o)
		if n > x.lim.maxElements {
			x.tooMany()
		}
		for i := range n {
			if e := o.Get(indexKey(i)); goja.IsString(e) || goja.IsNumber(e) {
				list[e.String()] = true
			} else if eo, ok := e.(*goja.Object); ok && (eo.ClassName() == "String" || eo.ClassName() == "Number") {
				list[e.String()] = true
			}
		}
	}
	depth := map[*goja.Object]int{}
	var size, count int64
	checking := x.vm.ToValue(func(c goja.FunctionCall) goja.Value {
		holder, _ := c.This.(*goja.Object)
		key, v := c.Argument(0), c.Argument(1)
		if user != nil {
			v = invoke(user, c.This, key, v)
		}
		if list != nil && holder != nil && holder.ClassName() != "Array" && len(depth) > 0 && !list[key.String()] {
			return goja.Undefined()
		}
		d := depth[holder] + 1
		if d > maxNesting {
			x.tooDeep()
		}
		if count++; count > x.lim.maxElements {
			x.tooMany()
		}
		size += strlen(key) + 4 + int64(d)*gap
		switch {
		case goja.IsString(v):
			size += strlen(v)
		default:
			if o, ok := v.(*goja.Object); ok {
				depth[o] = d
			} else {
				size += 24
			}
		}
		if size > x.lim.maxString {
			x.tooLong()
		}
		if len(depth) == 0 {
			depth[holder] = 0 // the root's holder, marked as seen
		}
		return v
	})
	if list == nil {
		return invoke(orig, call.This, value, checking, space)
	}
	invoke(orig, call.This, value, checking, space)
	return invoke(orig, call.This, value, replacer, space)
}

func (x *sandbox) typedArrays() error {
	// An ArrayBuffer is made at once, of the length named.
	if err := x.guardConstructor("ArrayBuffer", func(args []goja.Value) {
		if n := toLength(argument(args, 0)); n > x.lim.maxBytes {
			panic(x.rt.rangeError(fmt.Sprintf("Array buffer allocation failed: in stategate's sandbox an ArrayBuffer has at most %d bytes", x.lim.maxBytes)))
		}
	}); err != nil {
		return err
	}
	for name, size := range map[string]int64{"Int8Array": 1, "Uint8Array": 1, "Uint8ClampedArray": 1, "Int16Array": 2, "Uint16Array": 2,
		"Int32Array": 4, "Uint32Array": 4, "Float32Array": 4, "Float64Array": 8} {
		if err := x.guardConstructor(name, func(args []goja.Value) {
			if x.typedLength(args, size) > x.lim.maxElements {
				panic(x.rt.rangeError(fmt.Sprintf("Invalid typed array length: in stategate's sandbox a typed array has at most %d elements", x.lim.maxElements)))
			}
		}); err != nil {
			return err
		}
	}
	ta, err := x.object("Object.getPrototypeOf(Int8Array.prototype).constructor")
	if err != nil {
		return err
	}
	if err := x.method(ta, "from", x.from); err != nil {
		return err
	}
	proto, err := x.object("Object.getPrototypeOf(Int8Array.prototype)")
	if err != nil {
		return err
	}
	// What join makes: at most 24 characters an element (a double), and
	// the separators.
	joined := func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		o := call.This.ToObject(x.vm)
		n, sep := lengthOf(o), int64(1)
		if s := call.Argument(0); !goja.IsUndefined(s) {
			sep = strlen(x.str(s))
		}
		if n*24+n*sep > x.lim.maxString {
			x.tooLong()
		}
		return invoke(orig, o, call.Arguments...)
	}
	if err := x.method(proto, "join", joined); err != nil {
		return err
	}
	return x.method(proto, "toLocaleString", joined)
}

func argument(args []goja.Value, i int) goja.Value {
	if i < len(args) {
		return args[i]
	}
	return goja.Undefined()
}

var arrayBufferType = reflect.TypeFor[goja.ArrayBuffer]()

// typedLength is the length a typed array constructor's arguments make.
func (x *sandbox) typedLength(args []goja.Value, size int64) int64 {
	a := argument(args, 0)
	o, ok := a.(*goja.Object)
	switch {
	case !ok:
		return toLength(a)
	case o.ExportType() == arrayBufferType:
		if l := argument(args, 2); !goja.IsUndefined(l) {
			return toLength(l)
		}
		return (toLength(o.Get("byteLength")) - toLength(argument(args, 1))) / size
	case hasMethod(o, goja.SymIterator):
		return 0 // iterated, by iterators that are bounded themselves
	}
	return lengthOf(o)
}

// guardConstructor puts a proxy in place of a global constructor whose
// construct trap checks its arguments first; the prototype's constructor
// is the proxy too, so that code finds no other way to the original.
func (x *sandbox) guardConstructor(name string, check func(args []goja.Value)) error {
	target, err := x.object(name)
	if err != nil {
		return err
	}
	ctor, ok := goja.AssertConstructor(target)
	if !ok {
		return fmt.Errorf("%s is not a constructor", name)
	}
	p := x.vm.ToValue(x.vm.NewProxy(target, &goja.ProxyTrapConfig{
		Construct: func(_ *goja.Object, args []goja.Value, newTarget *goja.Object) *goja.Object {
			check(args)
			o, err := ctor(newTarget, args...)
			if err != nil {
				panic(err)
			}
			return o
		},
	}))
	if err := x.instances(target, p); err != nil {
		return err
	}
	return x.vm.GlobalObject().DefineDataProperty(name, p, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// instances makes proxy p stand for the constructor target: the
// prototype's constructor is p, and target has a Symbol.hasInstance of its
// own, which p forwards to (goja's instanceof takes no proxy of a function
// otherwise).
func (x *sandbox) instances(target *goja.Object, p goja.Value) error {
	if err := target.Get("prototype").ToObject(x.vm).DefineDataProperty("constructor", p, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return err
	}
	hasInstance := x.vm.ToValue(func(call goja.FunctionCall) goja.Value {
		c, ok := call.This.(*goja.Object)
		o, isObj := call.Argument(0).(*goja.Object)
		if !ok || !isObj {
			return x.vm.ToValue(false)
		}
		proto, ok := c.Get("prototype").(*goja.Object)
		if !ok {
			panic(x.vm.NewTypeError("Function has non-object prototype in instanceof check"))
		}
		for q := o.Prototype(); q != nil; q = q.Prototype() {
			if q.SameAs(proto) {
				return x.vm.ToValue(true)
			}
		}
		return x.vm.ToValue(false)
	})
	return target.DefineDataPropertySymbol(goja.SymHasInstance, hasInstance, goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// codeFromStrings takes eval and the Function constructors away: they
// throw an EvalError, as V8 does where code generation is disallowed.
func (x *sandbox) codeFromStrings() error {
	deny := func() *goja.Object {
		msg := x.vm.ToValue("Code generation from strings disallowed: stategate's sandbox runs no code made at run time (eval, new Function)")
		if ctor, ok := goja.AssertConstructor(x.vm.Get("EvalError")); ok {
			if o, err := ctor(nil, msg); err == nil {
				return o
			}
		}
		return x.vm.NewTypeError(msg)
	}
	if err := x.vm.Set("eval", func(goja.FunctionCall) goja.Value { panic(deny()) }); err != nil {
		return err
	}
	for _, src := range []string{"Function", "(function*(){}).constructor", "(async function(){}).constructor"} {
		target, err := x.object(src)
		if err != nil {
			return err
		}
		p := x.vm.ToValue(x.vm.NewProxy(target, &goja.ProxyTrapConfig{
			Apply:     func(*goja.Object, goja.Value, []goja.Value) goja.Value { panic(deny()) },
			Construct: func(*goja.Object, []goja.Value, *goja.Object) *goja.Object { panic(deny()) },
		}))
		if err := x.instances(target, p); err != nil {
			return err
		}
		if src == "Function" {
			if err := x.vm.GlobalObject().DefineDataProperty("Function", p, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
				return err
			}
		}
	}
	return nil
}

// noBigInt takes BigInt away: a BigInt literal (which esbuild makes a call
// of BigInt) throws a TypeError that says why.
func (x *sandbox) noBigInt() error {
	g := x.vm.GlobalObject()
	for _, name := range []string{"BigInt64Array", "BigUint64Array"} {
		if err := g.Delete(name); err != nil {
			return err
		}
	}
	dv, err := x.object("DataView.prototype")
	if err != nil {
		return err
	}
	for _, name := range []string{"getBigInt64", "getBigUint64", "setBigInt64", "setBigUint64"} {
		if err := dv.Delete(name); err != nil {
			return err
		}
	}
	return x.vm.Set("BigInt", func(goja.FunctionCall) goja.Value {
		panic(x.vm.NewTypeError("BigInt is not available in stategate's sandbox: its arithmetic cannot be bounded"))
	})
}
