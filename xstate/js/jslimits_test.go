package js

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dop251/goja"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/xstate"
)

// sandboxRuntime returns a runtime of a module loaded with a memory
// budget of 16 MiB: its built-ins make at most 16384 elements and strings
// of 4 Mi characters.
func sandboxRuntime(t *testing.T) *jsRuntime {
	t.Helper()
	m, _, err := (&xstate.Loader{Modules: &Host{Memory: 16 << 20}}).LoadModule(jsFile("counter.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := m.Impl.Host.(*jsModule).get()
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// eval runs code in the runtime as a call into it (watched, as a guard's):
// a block, whose completion value it returns, or, for code that names
// the array spread helpers as a module's code does (testNames), a
// function body given them.
func eval(rt *jsRuntime, code string) (string, error) {
	var out string
	err := rt.guard(func() error {
		if !strings.Contains(code, testNames.spread) {
			v, err := rt.vm.RunString("{" + code + "}")
			if err == nil {
				out = v.String()
			}
			return err
		}
		spread, spread1, err := installSpread(rt.vm, rt.mod.limits, (&sandbox{rt: rt, lim: rt.mod.limits}).tooMany)
		if err != nil {
			return err
		}
		v, err := rt.vm.RunString("(" + testNames.spread + ", " + testNames.spread1 + ") => {" + code + "}")
		if err != nil {
			return err
		}
		f, _ := goja.AssertFunction(v)
		if v, err = f(goja.Undefined(), spread, spread1); err == nil {
			out = v.String()
		}
		return err
	})
	return out, err
}

// testNames are helper names for code the tests rewrite.
var testNames = newHelperNames("test")

// TestSandboxBoundsBuiltins checks that the built-ins that would make or
// walk far more than the memory budget in one step, which no interrupt
// can stop, throw a RangeError instead, quickly.
func TestSandboxBoundsBuiltins(t *testing.T) {
	rt := sandboxRuntime(t)
	const (
		huge = "2**32-1"
		dag  = "let a=[1]; for (let i=0;i<40;i++) a=[a,a]; "
		deep = "let o={}; for (let i=0;i<5000;i++) o={a:o}; "
	)
	for _, tc := range []struct{ code, want string }{
		{"'x'.repeat(2**30)", "RangeError: Invalid string length"},
		{"''.padStart(2**30, 'x')", "RangeError: Invalid string length"},
		{"'x'.padEnd(2**30)", "RangeError: Invalid string length"},
		{"'ab'.concat('x'.repeat(3e6), 'x'.repeat(3e6))", "RangeError: Invalid string length"},
		{"new Array(" + huge + ").join('x')", "RangeError: Invalid array length"},
		{"new Array(" + huge + ").fill(0)", "RangeError: Invalid array length"},
		{"new Array(" + huge + ").indexOf(1)", "RangeError: Invalid array length"},
		{"let a = []; a.length = " + huge + "; a.forEach(x => x)", "RangeError: Invalid array length"},
		{"new Array(" + huge + ").toReversed()", "RangeError: Invalid array length"},
		{"Array.prototype.map.call({length: " + huge + "}, x => x)", "RangeError: Invalid array length"},
		{"Array.from({length: " + huge + "})", "RangeError: Invalid array length"},
		{"Array.from(new Array(1e6).keys())", "RangeError: Invalid array length"},
		{"[...new Array(" + huge + ")]", "RangeError: Invalid array length"},
		{"return " + rewriteSpreads("[...new Array("+huge+"), 1]", testNames), "Invalid array length"},
		{"Math.max(...new Array(" + huge + "))", "RangeError: Invalid array length"},
		{"new Set(new Array(" + huge + ").keys())", "RangeError: Invalid array length"},
		{"[].concat(new Array(" + huge + "))", "RangeError: Invalid array length"},
		{"(function(){}).apply(null, {length: " + huge + "})", "RangeError: Too many arguments"},
		{"Reflect.apply(Math.max, null, {length: " + huge + "})", "RangeError: Too many arguments"},
		{"new ArrayBuffer(2**40)", "RangeError: Array buffer allocation failed"},
		{"new Uint8Array(2**40)", "RangeError: Invalid typed array length"},
		{"new Float64Array({length: " + huge + "})", "RangeError: Invalid typed array length"},
		{"new (new Uint8Array(1).constructor)(2**40)", "RangeError: Invalid typed array length"},
		{"new Uint8Array(new ArrayBuffer(65536))", "RangeError: Invalid typed array length"},
		{"Uint8Array.from({length: " + huge + "})", "RangeError: Invalid array length"},
		{"new Uint8Array(1000).join('x'.repeat(1e4))", "RangeError: Invalid string length"},
		{dag + "String(a)", "RangeError: Invalid array length"},
		{dag + "a.join()", "RangeError: Invalid array length"},
		{"let s=['x'.repeat(1e6)]; for (let i=0;i<3;i++) s=[s,s]; s.join()", "RangeError: Invalid string length"},
		{dag + "JSON.stringify(a)", "RangeError: Invalid array length"},
		{dag + "a.flat(Infinity)", "RangeError: Invalid array length"},
		{deep + "JSON.stringify(o)", "RangeError: Maximum call stack size exceeded"},
		{"JSON.stringify({a: 'x'.repeat(3e6), b: 'x'.repeat(3e6)})", "RangeError: Invalid string length"},
		{"JSON.parse('['.repeat(5000) + ']'.repeat(5000))", "RangeError: Maximum call stack size exceeded"},
		{"JSON.parse('[' + '0,'.repeat(1e5) + '0]')", "RangeError: Invalid array length"},
		{"'x'.repeat(1e5).split('')", "RangeError: Invalid array length"},
		{"'x'.repeat(1e5).split(/(?:)/)", "RangeError: Invalid array length"},
		{"'x'.repeat(1e5).match(/x/g)", "RangeError: Invalid array length"},
		{"[...'x'.repeat(1e5).matchAll(/x/g)]", "RangeError: Invalid array length"},
		{"[...'x'.repeat(1e5)]", "RangeError: Invalid array length"},
		{"'xy'.repeat(5e4).replace(/x/g, 'z'.repeat(1000))", "RangeError: Invalid string length"},
		{"'xy'.repeat(5e4).replace(/x/g, '$`')", "RangeError: Invalid string length"},
		{"'x'.repeat(5000).replaceAll('x', 'y'.repeat(5000))", "RangeError: Invalid string length"},
		{"'x'.repeat(5000).replace(/x/g, () => 'y'.repeat(5000))", "RangeError: Invalid string length"},
		{"Object.keys('x'.repeat(1e5))", "RangeError: Invalid array length"},
		{"Object.assign({}, 'x'.repeat(1e5))", "RangeError: Invalid array length"},
		{"String.raw({raw: {length: " + huge + "}})", "RangeError: Invalid array length"},
		{"String.raw({raw: new Array(1e4).fill('x'.repeat(1e4))})", "RangeError: Invalid string length"},
		{"eval('1 + 1')", "EvalError: Code generation from strings disallowed"},
		{"new Function('return 1')()", "EvalError: Code generation from strings disallowed"},
		{"(function(){}).constructor('return 1')()", "EvalError: Code generation from strings disallowed"},
		{"Object.getPrototypeOf(function*(){}).constructor('yield 1')", "EvalError: Code generation from strings disallowed"},
		{"BigInt(1)", "TypeError: BigInt is not available"},
		{"typeof BigInt64Array", ""},
		{"structuredClone((() => { const o = {}; o.o = o; return o })())", "RangeError: the value is nested more than 1000 levels deep, or cyclic"},
	} {
		start := time.Now()
		out, err := eval(rt, tc.code)
		took := time.Since(start)
		switch {
		case tc.want == "" && (err != nil || out != "undefined"):
			t.Errorf("%s = %.80q, %v; want undefined", tc.code, out, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s = %.80q, %v; want %s", tc.code, out, err, tc.want)
		}
		if took > 500*time.Millisecond {
			t.Logf("%s took %v", tc.code, took)
		}
	}
}

// TestSandboxKeepsBuiltins checks that the bounded built-ins still do
// what ECMAScript says within the limits.
func TestSandboxKeepsBuiltins(t *testing.T) {
	rt := sandboxRuntime(t)
	for _, tc := range []struct{ code, want string }{
		{"'ab'.repeat(3)", "ababab"},
		{"'5'.padStart(3, '0') + '5'.padEnd(3) + '|'", "0055  |"},
		{"'a'.concat(1, null, [2, 3])", "a1null2,3"},
		{"'a-b-c'.split('-').length + ':' + 'a-b-c'.split('-', 2)", "3:a,b"},
		{"'a1b22'.split(/(\\d+)/).join('|')", "a|1|b|22|"},
		{"'a1b2'.replace(/(\\d)/g, '<$1>')", "a<1>b<2>"},
		{"'x-y'.replace(/(?<first>\\w)-(\\w)/, '$<first>$2$&$`$\\'$$')", "xyx-y$"},
		{"'aaa'.replaceAll('a', '$&$&')", "aaaaaa"},
		{"'abc'.replace('b', (m, i, s) => m.toUpperCase() + i + s)", "aB1abcc"},
		{"'a.b.c'.replaceAll('.', () => '/')", "a/b/c"},
		{"JSON.stringify('abcb'.match(/b/g)) + 'abc'.match(/b/).index", `["b","b"]1`},
		{"[...'a1b2'.matchAll(/\\d/g)].map(m => m[0] + m.index).join()", "11,23"},
		{"String.raw`a\\n${1}b${2}`", "a\\n1b2"},
		{"[...'héllo'].length", "5"},
		{"[1, 2, 3].join('-')", "1-2-3"},
		{"[1, [2, [3, null]], undefined].join()", "1,2,3,,"},
		{"let a = [1]; a.push(a, 2); a.join()", "1,,2"},
		{"[1, 2.5].toLocaleString()", "1,2.5"},
		{"String([1, [2, 3]])", "1,2,3"},
		{"[1, 2, 3].map(x => x * 2).filter(x => x > 2).join()", "4,6"},
		{"Array.from('abc').join() + Array.from({length: 3}, (_, i) => i * i).join()", "a,b,c0,1,4"},
		{"Array.from(new Set([1, 1, 2])).join() + Array.from([1, 2], function (x) { return x + this.d }, {d: 10}).join()", "1,211,12"},
		{"[1, 2].concat([3], [4, 5], 6).length", "6"},
		{"[[1, [2]], [3]].flat(Infinity).join() + '|' + [[1, [2]], [3]].flat().length", "1,2,3|3"},
		{"[1, 2].flatMap(x => [x, x]).join()", "1,1,2,2"},
		{"let r = []; for (const x of [1, 2]) r.push(x); const [p, q] = [3, 4]; r.concat(p, q, ...[5]).join()", "1,2,3,4,5"},
		{"Math.max.apply(null, [1, 5, 3]) + Reflect.apply(Math.min, null, [4, 2])", "7"},
		{"Object.keys({a: 1, b: 2}).join() + Object.keys('ab').join()", "a,b0,1"},
		{"JSON.stringify({a: [1, {b: 2}]}, null, 2)", "{\n  \"a\": [\n    1,\n    {\n      \"b\": 2\n    }\n  ]\n}"},
		{"JSON.stringify({a: 1, b: 2, c: 3}, ['c', 'a'])", `{"c":3,"a":1}`},
		{"JSON.stringify({a: 1, d: new Date(0)}, (k, v) => typeof v === 'number' ? v + 1 : v)", `{"a":2,"d":"1970-01-01T00:00:00.000Z"}`},
		{"JSON.stringify([undefined, () => 1, , 'x'])", `[null,null,null,"x"]`},
		{"JSON.parse('{\"a\": [1, \"[{\"]}', (k, v) => typeof v === 'number' ? v * 2 : v).a.join()", "2,[{"},
		{"new Uint8Array([1, 2, 3]).join() + new Uint8Array(new ArrayBuffer(8), 2, 4).length", "1,2,34"},
		{"String(new Float64Array(new ArrayBuffer(800)).length) + new Uint8Array(new ArrayBuffer(800), 100).length", "100700"},
		{"new Float64Array(2).fill(1.5).join('+') + Uint8Array.from([1, 2], x => x * 3).join()", "1.5+1.53,6"},
		{"new Uint8Array(4) instanceof Uint8Array && new Uint8Array(1).constructor === Uint8Array && new ArrayBuffer(2).byteLength === 2", "true"},
		{"class B extends Uint8Array {}; new B(3).length", "3"},
		{"(() => {}) instanceof Function && typeof Function.prototype === 'function' && (function(){}).constructor === Function", "true"},
		{"structuredClone({a: [1, {b: 'c'}], d: new Date(0)}).a[1].b", "c"},
		{"[3, 1, 2].sort().reverse().slice(1).join() + [1, 2, 3].indexOf(2) + [1, 2, 3].includes(3)", "2,11true"},
	} {
		out, err := eval(rt, tc.code)
		if err != nil || out != tc.want {
			t.Errorf("%s = %.80q, %v; want %q", tc.code, out, err, tc.want)
		}
	}
}

// TestBigIntLiteralFails checks that a module cannot make a BigInt: a
// literal, which esbuild makes a call of BigInt for ES2017, throws.
func TestBigIntLiteralFails(t *testing.T) {
	a := startModule(t, &xstate.Loader{Modules: &Host{}}, "bigint.mjs")
	a.Send(interp.Event{Type: "POW"})
	if s := a.Snapshot(); s.Status != interp.StatusError || !strings.Contains(s.Err().Error(), "BigInt is not available") {
		t.Fatalf("status %v, error %v", s.Status, s.Err())
	}
}

// TestConversionBounded checks that a value a step leaves in the context
// that cannot be kept (cyclic, nested too deep, too large) fails the step
// with an error that says so, and the actor keeps the state before it.
func TestConversionBounded(t *testing.T) {
	m, _, err := (&xstate.Loader{Modules: &Host{Memory: 16 << 20}}).LoadModule(jsFile("unkeepable.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	for ev, want := range map[string]string{
		"CYCLE":  "cyclic",
		"DEEP":   "nested more than 1000 levels deep",
		"SPARSE": "too large to keep",
		"WIDE":   "too large to keep",
		"NESTED": "cyclic",
	} {
		a := interp.NewActor(m, interp.ActorOptions{})
		a.Start()
		a.Send(interp.Event{Type: ev})
		s := a.Snapshot()
		if s.Status != interp.StatusError || s.Err() == nil || !strings.Contains(s.Err().Error(), want) {
			t.Errorf("%s: status %v, error %v; want %q", ev, s.Status, s.Err(), want)
			continue
		}
		if s.Value() != "idle" {
			t.Errorf("%s: value %v, want the state before the event", ev, s.Value())
		}
	}
	// A value within the limits is kept as before.
	a := interp.NewActor(m, interp.ActorOptions{})
	a.Start()
	a.Send(interp.Event{Type: "FINE"})
	if s := a.Snapshot(); s.Status != interp.StatusActive || s.Value() != "done" {
		t.Fatalf("FINE: %v %v %v", s.Status, s.Value(), s.Err())
	}
	if err := a.Snapshot().Err(); errors.Is(err, ErrMemory) {
		t.Fatal(err)
	}
}
