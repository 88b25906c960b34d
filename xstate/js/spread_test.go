package js

import (
	"testing"

	"github.com/dop251/goja"
)

func TestRewriteSpreads(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`[...a, 1]`, `[1,2,3,1]`},
		{`[0, ...[...a, 9], ...'hi']`, `[0,1,2,3,9,"h","i"]`},
		{`[...new Set([1, 1, 2])]`, `[1,2]`},
		{`[...[], ...a.map(x => [...[x]])]`, `[[1],[2],[3]]`},
		{"[...a,\n  4]", `[1,2,3,4]`},
		{`[, ...a]`, `[null,1,2,3]`},
		{"`${[...a].length}`", `"3"`},
		{`Math.max(...a)`, `3`},
		// Elements starting or ending with parentheses (goja's AST spans
		// leave them out), as esbuild writes a ?? b.
		{`[...a, (x = a[0]) != null ? x : 0]`, `[1,2,3,1]`},
		{`[...a, (a[1]), ((1) + (2))]`, `[1,2,3,2,3]`},
		{`[...(a.length ? a : []), ( 5 )]`, `[1,2,3,5]`},
		{`[0, ...(a), (a, 7)]`, `[0,1,2,3,7]`},
		{`[...a, ((x) => x)(5)]`, `[1,2,3,5]`},
		{`[...a, (x) => x + 1].length`, `4`},
		{"[...a, `t${(1)}`]", `[1,2,3,"t1"]`},
		{`[...a, /x(y)/.source]`, `[1,2,3,"x(y)"]`},
		{`[...a, 1 ? (2) : (3)]`, `[1,2,3,2]`},
		{`[...a, x,]`, `[1,2,3,null]`},
		{`[(a), ...a, (function () { return (7) })()]`, `[[1,2,3],1,2,3,7]`},
		{"[...a,\n  (\n  8\n  )\n]", `[1,2,3,8]`},
	} {
		vm := goja.New()
		names := newHelperNames("test")
		spread, spread1, err := installSpread(vm, limitsFor(0), func() { panic("too many") })
		if err != nil {
			t.Fatal(err)
		}
		_ = vm.Set(names.spread, spread)
		_ = vm.Set(names.spread1, spread1)
		code := "var a = [1, 2, 3], x; JSON.stringify(" + rewriteSpreads(tc.src, names) + ")"
		v, err := vm.RunString(code)
		if err != nil {
			t.Errorf("%s: %v (rewritten: %s)", tc.src, err, rewriteSpreads(tc.src, names))
			continue
		}
		if got := v.String(); got != tc.want {
			t.Errorf("%s = %s, want %s (rewritten: %s)", tc.src, got, tc.want, rewriteSpreads(tc.src, names))
		}
	}
}
