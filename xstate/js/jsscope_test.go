package js

import (
	"testing"

	"github.com/dop251/goja"
)

// TestInstrumentKeepsMeaning checks that the code instrument makes does
// what the code did (the readers only register, and only while loading),
// on the constructs it rewrites around: a reader in a function's body
// after its directives, in an arrow function's expression body, in a
// block, in a loop's body made a block, in each case of a switch, in a
// catch block; and that the readers read what closures keep.
func TestInstrumentKeepsMeaning(t *testing.T) {
	for _, src := range []string{
		`const f = (x) => ({ a: x, b: () => x }); return [f(1).a, f(2).b()];`,
		`const add = (x) => (y) => x + y; return add(2)(3);`,
		`const fs = []; for (let i = 0; i < 3; i++) fs.push(() => i); return fs.map((f) => f());`,
		`const fs = []; for (const x of [1, 2]) if (x > 1) fs.push(() => x); else fs.push(() => -x); return fs.map((f) => f());`,
		`const fs = []; outer: for (let i = 0; i < 3; i++) { for (const j of [0, 1]) { if (j) continue outer; fs.push(() => i * 10 + j); } } return fs.map((f) => f());`,
		`const fs = []; for (const k in { a: 1, b: 2 }) fs.push(() => k); return fs.map((f) => f());`,
		`function g(n) { switch (n) { case 1: let q = 'one'; return () => q; default: { let r = 'many'; return () => r; } } } return [g(1)(), g(2)()];`,
		`let e2; try { throw new Error('boom'); } catch (e) { e2 = () => e.message; } return e2();`,
		`function h(a, b = () => a) { return b(); } return h(7);`,
		`function d(a) { 'use strict'; const f = () => a; return f(); } return d(8);`,
		`class C { constructor() { this.n = 1; this.get = () => this.n; } inc() { return () => ++this.n; } } const c = new C(); c.inc()(); return c.get();`,
		`function* gen(limit) { let i = 0; const peek = () => i; while (i < limit) yield [i++, peek()]; } return [...gen(3)];`,
		`let count = 0; const inc = () => ++count; inc(); inc(); return count;`,
		`const o = { get v() { const w = 5; return (() => w)(); } }; return o.v;`,
		"const s = `=> ${((x) => x)('t')} /=>/`; return [s, /=>/.test('a=>b'), ('a', (0, 'b'))];",
		`const { a, ...rest } = { a: 1, b: 2, c: 3 }; const get = () => [a, rest]; return get();`,
		`var hoisted = () => late; var late = 'late'; return hoisted();`,
		`const f = function named(n) { return n ? named(n - 1) + 1 : 0; }; return (() => f(3))();`,
		`const m = new Map([[1, 'a']]); const look = (k) => m.get(k); return look(1);`,
		`{ function inBlock() { return 'block'; } var viaBlock = () => inBlock(); } return viaBlock();`,
	} {
		plain, err := runWrapped(t, src, false)
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		got, err := runWrapped(t, src, true)
		if err != nil {
			t.Errorf("%s, instrumented: %v", src, err)
			continue
		}
		if got != plain {
			t.Errorf("%s = %s, instrumented %s", src, plain, got)
		}
	}
}

// runWrapped runs src as the body of a module's function and returns the
// JSON of what it returns: as it is, or instrumented (with readers that
// read every variable they are given at once).
func runWrapped(t *testing.T, src string, instrumented bool) (string, error) {
	t.Helper()
	h := newHelperNames("test")
	code := "var " + h.exports + " = (() => { 'use strict'; return JSON.stringify((() => {" + src + "})()); })();"
	vm := goja.New()
	if !instrumented {
		v, err := vm.RunString("(() => { " + code + " return " + h.exports + "; })()")
		if err != nil {
			return "", err
		}
		return v.String(), nil
	}
	in, err := instrument(code, h)
	if err != nil {
		return "", err
	}
	v, err := vm.RunString(in.code)
	if err != nil {
		return "", err
	}
	run, _ := goja.AssertFunction(v)
	var readers []goja.Callable
	read := vm.ToValue(func(call goja.FunctionCall) goja.Value {
		f, _ := goja.AssertFunction(call.Argument(0))
		readers = append(readers, f)
		return goja.Undefined()
	})
	res, err := run(goja.Undefined(), goja.Undefined(), goja.Undefined(), read)
	if err != nil {
		return "", err
	}
	pair := res.ToObject(vm)
	for _, r := range readers {
		for i := range 8 {
			_, _ = r(goja.Undefined(), vm.ToValue(i)) // a variable not initialized throws
		}
	}
	return pair.Get("0").String(), nil
}
