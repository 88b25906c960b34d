package js

import (
	"errors"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/file"
	"github.com/dop251/goja/parser"
)

// goja spreads an array into an array literal ([...context.log, entry],
// the commonest line of XState machines) through the iterator protocol,
// one result object per element, which makes it many times slower than
// copying. rewriteSpreads rewrites such literals into a call of a native
// helper that copies arrays directly and iterates anything else (the
// helpers are named by the host; see helperNames):
//
//	[a, ...b, c]  →  spread("010", a, b, c)
//	[...a, b]     →  spread1(a, b)
//
// Only array literals are rewritten; the text of their elements is kept,
// so line numbers do not move.
func rewriteSpreads(code string, names helperNames) string {
	if !strings.Contains(code, "...") {
		return code
	}
	prog, err := parser.ParseFile(nil, "", code, 0, parser.WithDisableSourceMaps)
	if err != nil {
		return code // goja.Compile reports it
	}
	var lits []*ast.ArrayLiteral
	collectSpreads(reflect.ValueOf(prog), &lits, map[uintptr]bool{})
	if len(lits) == 0 {
		return code
	}
	sort.Slice(lits, func(i, j int) bool { return lits[i].LeftBracket < lits[j].LeftBracket })
	return rewriteRange(code, 0, len(code), lits, names)
}

// rewriteLiteral renders one array literal as a helper call, with the
// literals nested in it rewritten too.
func rewriteLiteral(code string, lit *ast.ArrayLiteral, nested []*ast.ArrayLiteral, names helperNames) string {
	var flags strings.Builder
	var args []string
	for _, e := range lit.Value {
		expr := e
		if s, ok := e.(*ast.SpreadElement); ok {
			flags.WriteByte('1')
			expr = s.Expression
		} else {
			flags.WriteByte('0')
		}
		from, to := widenParens(code, int(expr.Idx0())-1, int(expr.Idx1())-1)
		var inner []*ast.ArrayLiteral
		for _, n := range nested {
			if s := int(n.LeftBracket) - 1; s >= from && s < to {
				inner = append(inner, n)
			}
		}
		args = append(args, "("+rewriteRange(code, from, to, inner, names)+")")
	}
	f := flags.String()
	if f[0] == '1' && !strings.Contains(f[1:], "1") {
		// [...a, x, y]: the elements of a, then x and y.
		return names.spread1 + "(" + strings.Join(args, ", ") + ")"
	}
	return names.spread + `("` + f + `", ` + strings.Join(args, ", ") + ")"
}

// widenParens widens an element's span to the parentheses around its
// start and end. goja's AST keeps no parentheses: the span of
// (a = b) != null ? a : c starts after the first one, and cut there the
// text would not parse. Between an element and the comma or bracket next
// to it there is nothing but its own parentheses and spaces.
func widenParens(code string, from, to int) (int, int) {
	for {
		i := from - 1
		for i >= 0 && isJSSpace(code[i]) {
			i--
		}
		if i < 0 || code[i] != '(' {
			break
		}
		from = i
	}
	for {
		j := to
		for j < len(code) && isJSSpace(code[j]) {
			j++
		}
		if j >= len(code) || code[j] != ')' {
			break
		}
		to = j + 1
	}
	return from, to
}

func isJSSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// rewriteRange renders code[from:to] with the given literals rewritten.
func rewriteRange(code string, from, to int, lits []*ast.ArrayLiteral, names helperNames) string {
	var b strings.Builder
	pos := from
	for i := 0; i < len(lits); {
		lit := lits[i]
		start := int(lit.LeftBracket) - 1
		if start < pos {
			i++
			continue
		}
		end := int(lit.Idx1()) - 1
		j := i + 1
		for j < len(lits) && int(lits[j].LeftBracket)-1 < end {
			j++
		}
		b.WriteString(code[pos:start])
		b.WriteString(rewriteLiteral(code, lit, lits[i+1:j], names))
		pos = end
		i = j
	}
	b.WriteString(code[pos:to])
	return b.String()
}

var (
	arrayLiteralType = reflect.TypeOf(&ast.ArrayLiteral{})
	idxType          = reflect.TypeOf(file.Idx(0))
)

// collectSpreads finds the array literals with a spread element and no
// hole, walking the AST by reflection.
func collectSpreads(v reflect.Value, out *[]*ast.ArrayLiteral, seen map[uintptr]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
		if v.Type() == arrayLiteralType {
			lit := v.Interface().(*ast.ArrayLiteral)
			spread, hole := false, false
			for _, e := range lit.Value {
				if e == nil {
					hole = true
				} else if _, ok := e.(*ast.SpreadElement); ok {
					spread = true
				}
			}
			if spread && !hole {
				*out = append(*out, lit)
			}
		}
		collectSpreads(v.Elem(), out, seen)
	case reflect.Interface:
		if !v.IsNil() {
			collectSpreads(v.Elem(), out, seen)
		}
	case reflect.Struct:
		if v.Type() == idxType {
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				collectSpreads(v.Field(i), out, seen)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			collectSpreads(v.Index(i), out, seen)
		}
	}
}

// installSpread makes the helpers of a runtime (spread and spread1,
// given to the module's code as parameters). They copy arrays element by
// element in Go, which spares goja's concat (a species lookup and one
// property definition per element); anything else goes through
// Array.from, the iterator protocol, as a spread would.
func installSpread(vm *goja.Runtime, lim sandboxLimits, tooMany func()) (spread, spread1 goja.Value, err error) {
	from, ok := goja.AssertFunction(vm.Get("Array").ToObject(vm).Get("from"))
	if !ok {
		//lint:ignore ST1005 JavaScript's own wording, as V8 says it
		return nil, nil, errors.New("Array.from is not a function")
	}
	// appendSpread appends the elements v spreads to, with room for extra
	// more.
	appendSpread := func(out []any, v goja.Value, extra int) []any {
		o, isObj := v.(*goja.Object)
		if !isObj || o.ClassName() != "Array" {
			arr, err := from(goja.Undefined(), v)
			if err != nil {
				panic(err) // rethrown in the runtime
			}
			o = arr.ToObject(vm)
		}
		n := int(toLength(o.Get("length")))
		if int64(len(out)+n+extra) > lim.maxElements {
			tooMany() // the length of an array costs nothing to set
		}
		out = slices.Grow(out, n+extra)
		for i := range n {
			e := o.Get(strconv.Itoa(i))
			if e == nil {
				e = goja.Undefined()
			}
			out = append(out, e)
		}
		return out
	}
	// spread(flags, ...values): flags tells which values to spread.
	spread = vm.ToValue(func(call goja.FunctionCall) goja.Value {
		flags := call.Argument(0).String()
		out := make([]any, 0, len(call.Arguments))
		for i := range len(flags) {
			v := call.Argument(i + 1)
			if flags[i] == '1' {
				out = appendSpread(out, v, 0)
			} else {
				out = append(out, v)
			}
		}
		return vm.NewArray(out...)
	})
	// spread1(spread, ...values)
	spread1 = vm.ToValue(func(call goja.FunctionCall) goja.Value {
		rest := call.Arguments[min(1, len(call.Arguments)):]
		out := appendSpread(nil, call.Argument(0), len(rest))
		for _, v := range rest {
			out = append(out, v)
		}
		return vm.NewArray(out...)
	})
	return spread, spread1, nil
}
