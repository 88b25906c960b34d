package js

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/file"
	"github.com/dop251/goja/parser"
	"github.com/dop251/goja/token"
)

// Every event sees a module as it was when it loaded (see harden.go): what
// its code made at load is frozen once it has loaded. Objects are reached
// by walking properties from the module's exports, but a module also keeps
// values where no property leads: in the variables that its functions
// close over (a module-level `let`, the parameter of a function that made
// a closure at load). instrument finds those variables in the bundled
// code and adds, at the start of each scope that declares one, a reader:
// code that, while the module loads (and only then: a flag set by the
// host), registers a function giving the variables' values. Once the
// module has loaded, the host reads them, freezes what they hold, and
// keeps the values of those that some function assigns, to check at the
// end of every event that they still hold them.
//
// The analysis is lexical: every identifier a function uses is resolved
// to the innermost scope around it that declares it; a variable is
// captured when the scope declaring it belongs to another function. `this`
// and `arguments` in an arrow function are those of the function around
// it. The module code is esbuild's (ES2017: no class fields, no private
// names), in sloppy or strict mode, without eval or with-bound names that
// stategate could miss (eval is not available; a `with` body's names are
// resolved lexically, which reads the variable where the object may have
// had the property: the variable is read and frozen either way).

// helperNames are the names the module's code refers to the host's
// helpers by: parameters of the function the module is compiled into,
// not globals, and named with a random part so that the module's own code
// cannot name them.
type helperNames struct {
	spread, spread1 string // the array spread helpers (spread.go)
	loading         string // true while the module loads
	reader          string // registers a reader (see instrument)
	index           string // a reader's parameter
	exports         string // the variable the bundle's exports go in
}

func newHelperNames(tag string) helperNames {
	p := "__sg" + tag + "_"
	return helperNames{spread: p + "spread", spread1: p + "spread1", loading: p + "loading", reader: p + "read", index: p + "i", exports: p + "module"}
}

// instrumented is the module's code made into the function the host calls
// with its helpers, and what the analysis found.
type instrumented struct {
	code string
	// readers counts the scopes given a reader.
	readers int
	// stateful says why a variable a function closes over could not be
	// given a reader ("" for esbuild's output, which has no class fields).
	stateful string
}

// instrument rewrites a bundled module (with its spreads already
// rewritten) into a function expression that takes the host's helpers and
// returns [exports, endLoad]; the module's code runs in strict mode (it is
// made of ES modules), with a reader in every scope that declares a
// variable a function of another scope uses. The code keeps its line
// numbers (the source map is the bundle's): what is added goes on
// existing lines, except one line before the source map.
func instrument(code string, h helperNames) (instrumented, error) {
	a, err := analyze(code, h)
	if err != nil {
		return instrumented{}, err
	}
	var ins []insertion
	n := 0
	stateful := ""
	for _, s := range a.scopes {
		if s.self {
			continue
		}
		if text := a.readerText(s); text != "" {
			if s.place == nil {
				stateful = "a class field's initializer makes a function that keeps its this"
				continue
			}
			if s.headFn {
				stateful = "a for loop's head makes a function that keeps its variable"
			}
			n++
			ins = append(ins, s.place(text)...)
		}
	}
	ins = append(ins, a.extra...)
	body, mapLine := splitSourceMap(code)
	out := applyInsertions(body, ins)
	var b strings.Builder
	fmt.Fprintf(&b, "((%s, %s, %s) => { 'use strict'; let %s = true; ", h.spread, h.spread1, h.reader, h.loading)
	b.WriteString(out)
	fmt.Fprintf(&b, "\n;return [%s, () => { %s = false; }];\n", h.exports, h.loading)
	if mapLine != "" {
		b.WriteString(mapLine)
		b.WriteString("\n")
	}
	b.WriteString("})")
	return instrumented{code: b.String(), readers: n, stateful: stateful}, nil
}

// analyze parses code and resolves the identifiers it uses.
func analyze(code string, h helperNames) (*analyzer, error) {
	prog, err := parser.ParseFile(nil, "", code, 0, parser.WithDisableSourceMaps)
	if err != nil {
		return nil, err
	}
	a := &analyzer{code: code, h: h}
	top := a.newScope(nil, &fnInfo{top: true}, true)
	top.place = atStatement(0)
	a.top = top
	for _, s := range prog.Body {
		a.stmt(top, s)
	}
	a.resolve()
	return a, nil
}

// splitSourceMap splits off the source map comment that ends esbuild's
// output, which goja reads only from the last line (or from before a
// final "})").
func splitSourceMap(code string) (body, mapLine string) {
	trimmed := strings.TrimRight(code, "\n")
	i := strings.LastIndexByte(trimmed, '\n')
	if last := trimmed[i+1:]; strings.HasPrefix(last, "//# sourceMappingURL=") {
		return trimmed[:i+1], last
	}
	return code, ""
}

// insertion is text inserted at a byte offset of the code; at the same
// offset, closing text (a parenthesis or brace that ends what an earlier
// insertion opened) goes first.
type insertion struct {
	at      int
	text    string
	closing bool
}

func applyInsertions(code string, ins []insertion) string {
	slices.SortStableFunc(ins, func(a, b insertion) int {
		if a.at != b.at {
			return a.at - b.at
		}
		switch {
		case a.closing && !b.closing:
			return -1
		case !a.closing && b.closing:
			return 1
		}
		return 0
	})
	var b strings.Builder
	b.Grow(len(code) + 64*len(ins))
	pos := 0
	for _, in := range ins {
		b.WriteString(code[pos:in.at])
		b.WriteString(in.text)
		pos = in.at
	}
	b.WriteString(code[pos:])
	return b.String()
}

// fnInfo is a function (or the program's top level).
type fnInfo struct {
	parent              *fnInfo
	top, arrow, suspend bool // suspend: async or generator, which resume after load
	scope               *scope
}

// nonArrow is the function whose this and arguments f's are.
func (f *fnInfo) nonArrow() *fnInfo {
	for f.arrow && f.parent != nil {
		f = f.parent
	}
	return f
}

// scope is a scope that declares variables: a function's (its
// parameters, its var and top-level declarations), a block's, a for
// loop's head, a catch clause's or a switch's.
type scope struct {
	parent *scope
	fn     *fnInfo
	isFn   bool
	decls  map[string]bool
	// captured are the declared variables a function of another scope
	// uses, in the order found; assigned those a function assigns after
	// load (another function, or this one if it resumes).
	captured []string
	capSet   map[string]bool
	assigned map[string]bool
	// consts are the declared variables that are const (never assigned).
	consts map[string]bool
	// this and arguments: an arrow function in it uses its function's.
	this, args bool
	// self is the scope of a class's or a function expression's own
	// name, which holds the class or the function itself, for good.
	self bool
	// inHead is set while a for loop's head is visited; headFn when a
	// function is made there (whose closure no reader in the body sees
	// for the last iteration).
	inHead, headFn bool
	// place returns where the reader goes.
	place func(text string) []insertion
}

func (s *scope) capture(name string) {
	if s.capSet == nil {
		s.capSet = map[string]bool{}
	}
	if !s.capSet[name] {
		s.capSet[name] = true
		s.captured = append(s.captured, name)
	}
}

// use is an identifier used (or assigned) in fn, in scope s.
type use struct {
	name   string
	s      *scope
	fn     *fnInfo
	assign bool
	// at is where an identifier read is written (0 for others); typeOf
	// is set for the operand of typeof.
	at     file.Idx
	typeOf bool
}

type analyzer struct {
	code   string
	h      helperNames
	top    *scope
	scopes []*scope
	uses   []use
	extra  []insertion // braces around loop bodies that get a reader
	// globalProps are the reads of a property of globalThis
	// (globalThis.fetch), by the property's name (for globalUses).
	globalProps []use
}

func (a *analyzer) newScope(parent *scope, fn *fnInfo, isFn bool) *scope {
	s := &scope{parent: parent, fn: fn, isFn: isFn, decls: map[string]bool{}}
	if isFn {
		fn.scope = s
	}
	a.scopes = append(a.scopes, s)
	return s
}

// resolve finds, for every use, the scope that declares the name, and
// marks what is captured.
func (a *analyzer) resolve() {
	for _, u := range a.uses {
		switch u.name {
		case "this":
			if f := u.fn.nonArrow(); f != u.fn && !f.top {
				f.scope.this = true
			}
			continue
		case "arguments":
			if d := declaring(u.s, u.name); d == nil {
				if f := u.fn.nonArrow(); f != u.fn && !f.top {
					f.scope.args = true
				}
				continue
			}
		}
		d := declaring(u.s, u.name)
		if d == nil {
			continue // a global
		}
		if d.fn != u.fn {
			d.capture(u.name)
		}
		if u.assign && !d.consts[u.name] && (d.fn != u.fn || d.fn.suspend) {
			if d.assigned == nil {
				d.assigned = map[string]bool{}
			}
			d.assigned[u.name] = true
		}
	}
	// A variable a function assigns but no other function reads is still
	// state another event could see: the function that assigns it may read
	// it later. Assigned variables are captured too.
	for _, s := range a.scopes {
		for name := range s.assigned {
			s.capture(name)
		}
		slices.Sort(s.captured) // a stable order for the reader
	}
}

// globalUses returns the reads of names that no scope declares (the
// globals the code uses, typeof's operands included), and of properties
// of globalThis (named by the property), in the order of the code.
func (a *analyzer) globalUses() []use {
	var out []use
	for _, u := range a.uses {
		if u.at > 0 && !u.assign && declaring(u.s, u.name) == nil {
			out = append(out, u)
		}
	}
	for _, u := range a.globalProps {
		if declaring(u.s, "globalThis") == nil {
			out = append(out, u)
		}
	}
	slices.SortStableFunc(out, func(x, y use) int { return int(x.at - y.at) })
	return out
}

// isGlobalThis reports whether an expression is the identifier
// globalThis (whether a scope declares it is for globalUses).
func isGlobalThis(e ast.Expression) bool {
	id, ok := e.(*ast.Identifier)
	return ok && id.Name.String() == "globalThis"
}

func declaring(s *scope, name string) *scope {
	for ; s != nil; s = s.parent {
		if s.decls[name] {
			return s
		}
	}
	return nil
}

// readerText is the reader statement for a scope, or "".
func (a *analyzer) readerText(s *scope) string {
	names := slices.Clone(s.captured)
	if s.isFn && s.this {
		names = append(names, "this")
	}
	if s.isFn && s.args {
		names = append(names, "arguments")
	}
	if len(names) == 0 {
		return ""
	}
	h := a.h
	var b strings.Builder
	fmt.Fprintf(&b, "%s && %s((%s) => ", h.loading, h.reader, h.index)
	for i, n := range names[:len(names)-1] {
		fmt.Fprintf(&b, "%s === %d ? %s : ", h.index, i, n)
	}
	b.WriteString(names[len(names)-1])
	b.WriteString(", [")
	first := true
	for i, n := range names {
		if s.assigned[n] {
			if !first {
				b.WriteString(", ")
			}
			first = false
			b.WriteString(strconv.Itoa(i))
		}
	}
	suspend := 0
	if s.fn.suspend {
		suspend = 1
	}
	fmt.Fprintf(&b, "], %d, %d, ", len(names), suspend)
	// The writer, which puts back a variable that some function assigns.
	if len(s.assigned) == 0 {
		b.WriteString("null)")
		return b.String()
	}
	fmt.Fprintf(&b, "(%s, %s_v) => { ", h.index, h.index)
	for i, n := range names {
		if s.assigned[n] && !s.consts[n] {
			fmt.Fprintf(&b, "if (%s === %d) %s = %s_v; ", h.index, i, n, h.index)
		}
	}
	b.WriteString("})")
	return b.String()
}

// atStatement places a reader as a statement at an offset.
func atStatement(at int) func(string) []insertion {
	return func(text string) []insertion { return []insertion{{at: at, text: text + ";"}} }
}

// after returns the offset just past a statement that ends at idx1 (an
// Idx1), its semicolon included.
func (a *analyzer) after(idx1 int) int {
	i := idx1 - 1
	j := i
	for j < len(a.code) && isJSSpace(a.code[j]) {
		j++
	}
	if j < len(a.code) && a.code[j] == ';' {
		return j + 1
	}
	return i
}

// inBlock places a reader at the start of a block, after its directives
// when it is a function's body.
func (a *analyzer) inBlock(b *ast.BlockStatement, directives bool) func(string) []insertion {
	at := int(b.LeftBrace) // just past the brace
	if directives {
		for _, st := range b.List {
			es, ok := st.(*ast.ExpressionStatement)
			if !ok {
				break
			}
			if _, isStr := es.Expression.(*ast.StringLiteral); !isStr {
				break
			}
			at = a.after(int(es.Idx1()))
		}
	}
	return atStatement(at)
}

// inBody places a reader in a loop's body, made a block when it is not.
func (a *analyzer) inBody(body ast.Statement) func(string) []insertion {
	if b, ok := body.(*ast.BlockStatement); ok {
		return a.inBlock(b, false)
	}
	from, to := a.start(body), a.after(int(body.Idx1()))
	return func(text string) []insertion {
		return []insertion{{at: from, text: "{" + text + ";"}, {at: to, text: "}", closing: true}}
	}
}

// start is the offset a statement starts at (goja leaves an if's at 0:
// it is found before its test).
func (a *analyzer) start(st ast.Statement) int {
	if is, ok := st.(*ast.IfStatement); ok && is.If == 0 {
		i := int(is.Test.Idx0()) - 2
		for i >= 0 && (isJSSpace(a.code[i]) || a.code[i] == '(') {
			i--
		}
		return i - 1 // the "if"
	}
	return int(st.Idx0()) - 1
}

func (a *analyzer) use(s *scope, fn *fnInfo, name string, assign bool) {
	a.uses = append(a.uses, use{name: name, s: s, fn: fn, assign: assign})
}

// declare adds the names a binding target binds to s; a default value or
// a computed key in it is an expression of scope in.
func (a *analyzer) declare(s, in *scope, fn *fnInfo, target ast.Expression, assign bool) {
	if isNil(target) {
		return
	}
	switch t := target.(type) {
	case nil:
	case *ast.Identifier:
		s.decls[t.Name.String()] = true
		if assign {
			a.use(in, fn, t.Name.String(), true)
		}
	case *ast.ArrayPattern:
		for _, e := range t.Elements {
			a.declare(s, in, fn, e, assign)
		}
		a.declare(s, in, fn, t.Rest, assign)
	case *ast.ObjectPattern:
		for _, p := range t.Properties {
			switch p := p.(type) {
			case *ast.PropertyShort:
				s.decls[p.Name.Name.String()] = true
				if assign {
					a.use(in, fn, p.Name.Name.String(), true)
				}
				a.expr(in, fn, p.Initializer)
			case *ast.PropertyKeyed:
				if p.Computed {
					a.expr(in, fn, p.Key)
				}
				a.declare(s, in, fn, p.Value, assign)
			case *ast.SpreadElement:
				a.declare(s, in, fn, p.Expression, assign)
			}
		}
		a.declare(s, in, fn, t.Rest, assign)
	case *ast.AssignExpression: // a default value
		a.declare(s, in, fn, t.Left, assign)
		a.expr(in, fn, t.Right)
	case *ast.Binding:
		a.declare(s, in, fn, t.Target, assign)
		a.expr(in, fn, t.Initializer)
	default:
		a.expr(in, fn, target)
	}
}

// targets records the identifiers an assignment's left side assigns, and
// visits what else is in it.
func (a *analyzer) targets(s *scope, fn *fnInfo, e ast.Expression) {
	if isNil(e) {
		return
	}
	switch t := e.(type) {
	case nil:
	case *ast.Identifier:
		a.use(s, fn, t.Name.String(), true)
	case *ast.ArrayPattern:
		for _, el := range t.Elements {
			a.targets(s, fn, el)
		}
		a.targets(s, fn, t.Rest)
	case *ast.ArrayLiteral:
		for _, el := range t.Value {
			a.targets(s, fn, el)
		}
	case *ast.ObjectPattern:
		for _, p := range t.Properties {
			a.propertyTarget(s, fn, p)
		}
		a.targets(s, fn, t.Rest)
	case *ast.ObjectLiteral:
		for _, p := range t.Value {
			a.propertyTarget(s, fn, p)
		}
	case *ast.AssignExpression:
		a.targets(s, fn, t.Left)
		a.expr(s, fn, t.Right)
	case *ast.SpreadElement:
		a.targets(s, fn, t.Expression)
	case *ast.Binding:
		a.targets(s, fn, t.Target)
		a.expr(s, fn, t.Initializer)
	case *ast.DotExpression:
		// globalThis.x = ... reads no x (see globalProps).
		a.expr(s, fn, t.Left)
	default:
		a.expr(s, fn, e)
	}
}

func (a *analyzer) propertyTarget(s *scope, fn *fnInfo, p ast.Property) {
	switch p := p.(type) {
	case *ast.PropertyShort:
		a.use(s, fn, p.Name.Name.String(), true)
		a.expr(s, fn, p.Initializer)
	case *ast.PropertyKeyed:
		if p.Computed {
			a.expr(s, fn, p.Key)
		}
		a.targets(s, fn, p.Value)
	case *ast.SpreadElement:
		a.targets(s, fn, p.Expression)
	}
}

// hoist declares the var and function names of a function body in its
// scope, not entering nested functions; function declarations in blocks
// are declared in the function too (sloppy mode's web semantics).
func hoistInto(s *scope, st ast.Statement) {
	var walk func(st ast.Statement, nested bool)
	varNames := func(list []*ast.Binding) {
		for _, b := range list {
			bindingNames(b.Target, s.decls)
		}
	}
	walk = func(st ast.Statement, nested bool) {
		if isNil(st) {
			return
		}
		switch st := st.(type) {
		case *ast.VariableStatement:
			varNames(st.List)
		case *ast.FunctionDeclaration:
			if nested && st.Function.Name != nil {
				s.decls[st.Function.Name.Name.String()] = true
			}
		case *ast.BlockStatement:
			for _, x := range st.List {
				walk(x, true)
			}
		case *ast.IfStatement:
			walk(st.Consequent, true)
			walk(st.Alternate, true)
		case *ast.ForStatement:
			if v, ok := st.Initializer.(*ast.ForLoopInitializerVarDeclList); ok {
				varNames(v.List)
			}
			walk(st.Body, true)
		case *ast.ForInStatement:
			if v, ok := st.Into.(*ast.ForIntoVar); ok {
				bindingNames(v.Binding.Target, s.decls)
			}
			walk(st.Body, true)
		case *ast.ForOfStatement:
			if v, ok := st.Into.(*ast.ForIntoVar); ok {
				bindingNames(v.Binding.Target, s.decls)
			}
			walk(st.Body, true)
		case *ast.WhileStatement:
			walk(st.Body, true)
		case *ast.DoWhileStatement:
			walk(st.Body, true)
		case *ast.LabelledStatement:
			walk(st.Statement, true)
		case *ast.WithStatement:
			walk(st.Body, true)
		case *ast.TryStatement:
			walk(st.Body, true)
			if st.Catch != nil {
				walk(st.Catch.Body, true)
			}
			if st.Finally != nil {
				walk(st.Finally, true)
			}
		case *ast.SwitchStatement:
			for _, c := range st.Body {
				for _, x := range c.Consequent {
					walk(x, true)
				}
			}
		}
	}
	walk(st, false)
}

// bindingNames adds the names a binding target binds.
func bindingNames(t ast.Expression, into map[string]bool) {
	if isNil(t) {
		return
	}
	switch t := t.(type) {
	case *ast.Identifier:
		into[t.Name.String()] = true
	case *ast.ArrayPattern:
		for _, e := range t.Elements {
			bindingNames(e, into)
		}
		bindingNames(t.Rest, into)
	case *ast.ObjectPattern:
		for _, p := range t.Properties {
			switch p := p.(type) {
			case *ast.PropertyShort:
				into[p.Name.Name.String()] = true
			case *ast.PropertyKeyed:
				bindingNames(p.Value, into)
			case *ast.SpreadElement:
				bindingNames(p.Expression, into)
			}
		}
		bindingNames(t.Rest, into)
	case *ast.AssignExpression:
		bindingNames(t.Left, into)
	case *ast.Binding:
		bindingNames(t.Target, into)
	}
}

// lexical declares the let, const, class and function declarations of a
// statement list in s.
func lexical(s *scope, list []ast.Statement) {
	for _, st := range list {
		switch st := st.(type) {
		case *ast.LexicalDeclaration:
			for _, b := range st.List {
				bindingNames(b.Target, s.decls)
				if st.Token == token.CONST {
					if s.consts == nil {
						s.consts = map[string]bool{}
					}
					bindingNames(b.Target, s.consts)
				}
			}
		case *ast.ClassDeclaration:
			if st.Class.Name != nil {
				s.decls[st.Class.Name.Name.String()] = true
			}
		case *ast.FunctionDeclaration:
			if st.Function.Name != nil {
				s.decls[st.Function.Name.Name.String()] = true
			}
		}
	}
}

// function visits a function: its parameters and body in a scope of its
// own; name is a function expression's own name (bound around it).
func (a *analyzer) function(s *scope, outer *fnInfo, name *ast.Identifier, params *ast.ParameterList, body ast.ConciseBody, arrow, suspend bool, arrowNode *ast.ArrowFunctionLiteral) {
	if s.inHead {
		s.headFn = true
	}
	if name != nil {
		// A named function expression's name: an immutable binding of a
		// scope of its own around the function.
		ns := a.newScope(s, outer, false)
		ns.decls[name.Name.String()] = true
		ns.self = true
		s = ns
	}
	fn := &fnInfo{parent: outer, arrow: arrow, suspend: suspend}
	fs := a.newScope(s, fn, true)
	if params != nil {
		for _, p := range params.List {
			a.declare(fs, fs, fn, p.Target, false)
			a.expr(fs, fn, p.Initializer)
		}
		a.declare(fs, fs, fn, params.Rest, false)
	}
	switch b := body.(type) {
	case *ast.BlockStatement:
		for _, st := range b.List {
			hoistInto(fs, st)
		}
		lexical(fs, b.List)
		fs.place = a.inBlock(b, true)
		for _, st := range b.List {
			a.stmt(fs, st)
		}
	case *ast.ExpressionBody:
		from, to := widenParens(a.code, int(b.Expression.Idx0())-1, int(b.Expression.Idx1())-1)
		fs.place = func(text string) []insertion {
			return []insertion{{at: from, text: "(" + text + ", "}, {at: to, text: ")", closing: true}}
		}
		a.expr(fs, fn, b.Expression)
	}
}

func (a *analyzer) stmts(s *scope, list []ast.Statement) {
	for _, st := range list {
		a.stmt(s, st)
	}
}

// isNil reports whether a node is nil, or a nil pointer in an interface
// (an absent catch's or finally's block).
func isNil(n any) bool {
	if n == nil {
		return true
	}
	v := reflect.ValueOf(n)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

func (a *analyzer) stmt(s *scope, st ast.Statement) {
	if isNil(st) {
		return
	}
	fn := s.fn
	switch st := st.(type) {
	case nil:
	case *ast.BlockStatement:
		bs := a.newScope(s, fn, false)
		lexical(bs, st.List)
		bs.place = a.inBlock(st, false)
		a.stmts(bs, st.List)
	case *ast.ExpressionStatement:
		a.expr(s, fn, st.Expression)
	case *ast.VariableStatement:
		for _, b := range st.List {
			// var x = v assigns x (hoisted to the function).
			a.targets(s, fn, b.Target)
			a.expr(s, fn, b.Initializer)
		}
	case *ast.LexicalDeclaration:
		for _, b := range st.List {
			a.declare(s, s, fn, b.Target, false)
			a.expr(s, fn, b.Initializer)
		}
	case *ast.FunctionDeclaration:
		f := st.Function
		a.function(s, fn, nil, f.ParameterList, f.Body, false, f.Async || f.Generator, nil)
	case *ast.ClassDeclaration:
		a.class(s, fn, st.Class)
	case *ast.IfStatement:
		a.expr(s, fn, st.Test)
		a.stmt(s, st.Consequent)
		a.stmt(s, st.Alternate)
	case *ast.ForStatement:
		ls := s
		switch init := st.Initializer.(type) {
		case *ast.ForLoopInitializerLexicalDecl:
			ls = a.newScope(s, fn, false)
			ls.inHead = true
			for _, b := range init.LexicalDeclaration.List {
				a.declare(ls, ls, fn, b.Target, false)
				a.expr(ls, fn, b.Initializer)
			}
			ls.place = a.inBody(st.Body)
		case *ast.ForLoopInitializerVarDeclList:
			for _, b := range init.List {
				a.targets(s, fn, b.Target)
				a.expr(s, fn, b.Initializer)
			}
		case *ast.ForLoopInitializerExpression:
			a.expr(s, fn, init.Expression)
		}
		ls.inHead = ls != s
		a.expr(ls, fn, st.Test)
		a.expr(ls, fn, st.Update)
		ls.inHead = false
		a.stmt(ls, st.Body)
	case *ast.ForInStatement:
		a.forInto(s, fn, st.Into, st.Source, st.Body)
	case *ast.ForOfStatement:
		a.forInto(s, fn, st.Into, st.Source, st.Body)
	case *ast.WhileStatement:
		a.expr(s, fn, st.Test)
		a.stmt(s, st.Body)
	case *ast.DoWhileStatement:
		a.stmt(s, st.Body)
		a.expr(s, fn, st.Test)
	case *ast.LabelledStatement:
		a.stmt(s, st.Statement)
	case *ast.ReturnStatement:
		a.expr(s, fn, st.Argument)
	case *ast.ThrowStatement:
		a.expr(s, fn, st.Argument)
	case *ast.TryStatement:
		a.stmt(s, st.Body)
		if c := st.Catch; c != nil {
			cs := a.newScope(s, fn, false)
			a.declare(cs, cs, fn, c.Parameter, false)
			cs.place = a.inBlock(c.Body, false)
			a.stmt(cs, c.Body)
		}
		a.stmt(s, st.Finally)
	case *ast.SwitchStatement:
		a.expr(s, fn, st.Discriminant)
		ss := a.newScope(s, fn, false)
		var all []ast.Statement
		var starts []int
		for _, c := range st.Body {
			all = append(all, c.Consequent...)
			if len(c.Consequent) > 0 {
				starts = append(starts, int(c.Consequent[0].Idx0())-1)
			}
		}
		lexical(ss, all)
		ss.place = func(text string) []insertion {
			var out []insertion
			for _, at := range starts {
				out = append(out, insertion{at: at, text: text + ";"})
			}
			return out
		}
		for _, c := range st.Body {
			a.expr(ss, fn, c.Test)
			a.stmts(ss, c.Consequent)
		}
	case *ast.WithStatement:
		a.expr(s, fn, st.Object)
		a.stmt(s, st.Body)
	case *ast.BranchStatement, *ast.EmptyStatement, *ast.DebuggerStatement, *ast.BadStatement:
	default:
		a.generic(s, fn, reflect.ValueOf(st))
	}
}

func (a *analyzer) forInto(s *scope, fn *fnInfo, into ast.ForInto, source ast.Expression, body ast.Statement) {
	a.expr(s, fn, source)
	ls := s
	switch in := into.(type) {
	case *ast.ForDeclaration:
		ls = a.newScope(s, fn, false)
		a.declare(ls, ls, fn, in.Target, false)
		ls.place = a.inBody(body)
	case *ast.ForIntoVar:
		// for (var x of ...) assigns x at every iteration.
		a.targets(s, fn, in.Binding.Target)
		a.expr(s, fn, in.Binding.Initializer)
	case *ast.ForIntoExpression:
		a.targets(s, fn, in.Expression)
	}
	a.stmt(ls, body)
}

func (a *analyzer) class(s *scope, fn *fnInfo, c *ast.ClassLiteral) {
	cs := s
	if c.Name != nil {
		cs = a.newScope(s, fn, false)
		cs.decls[c.Name.Name.String()] = true
		cs.self = true
	}
	a.expr(cs, fn, c.SuperClass)
	for _, el := range c.Body {
		switch el := el.(type) {
		case *ast.MethodDefinition:
			if el.Computed {
				a.expr(cs, fn, el.Key)
			}
			f := el.Body
			a.function(cs, fn, nil, f.ParameterList, f.Body, false, f.Async || f.Generator, nil)
		case *ast.FieldDefinition:
			if el.Computed {
				a.expr(cs, fn, el.Key)
			}
			if el.Initializer != nil {
				// An initializer runs as a method would, with its own this:
				// a function of its own, with no place for a reader (esbuild
				// lowers fields to ES2017, so there are none in a bundle).
				init := &fnInfo{parent: fn}
				is := a.newScope(cs, init, true)
				a.expr(is, init, el.Initializer)
			}
		case *ast.ClassStaticBlock:
			init := &fnInfo{parent: fn}
			is := a.newScope(cs, init, true)
			hoistInto(is, el.Block)
			lexical(is, el.Block.List)
			is.place = a.inBlock(el.Block, false)
			a.stmts(is, el.Block.List)
		}
	}
}

func (a *analyzer) expr(s *scope, fn *fnInfo, e ast.Expression) {
	if isNil(e) {
		return
	}
	switch e := e.(type) {
	case nil:
	case *ast.Identifier:
		a.uses = append(a.uses, use{name: e.Name.String(), s: s, fn: fn, at: e.Idx})
	case *ast.ThisExpression:
		a.use(s, fn, "this", false)
	case *ast.FunctionLiteral:
		a.function(s, fn, e.Name, e.ParameterList, e.Body, false, e.Async || e.Generator, nil)
	case *ast.ArrowFunctionLiteral:
		a.function(s, fn, nil, e.ParameterList, e.Body, true, e.Async, e)
	case *ast.ClassLiteral:
		a.class(s, fn, e)
	case *ast.AssignExpression:
		a.targets(s, fn, e.Left)
		a.expr(s, fn, e.Right)
	case *ast.UnaryExpression:
		if e.Operator == token.INCREMENT || e.Operator == token.DECREMENT {
			a.targets(s, fn, e.Operand)
			return
		}
		if e.Operator == token.TYPEOF {
			switch o := e.Operand.(type) {
			case *ast.Identifier:
				a.uses = append(a.uses, use{name: o.Name.String(), s: s, fn: fn, at: o.Idx, typeOf: true})
				return
			case *ast.DotExpression:
				if isGlobalThis(o.Left) {
					a.globalProps = append(a.globalProps, use{name: o.Identifier.Name.String(), s: s, fn: fn, at: o.Identifier.Idx, typeOf: true})
				}
			}
		}
		a.expr(s, fn, e.Operand)
	case *ast.DotExpression:
		if isGlobalThis(e.Left) {
			a.globalProps = append(a.globalProps, use{name: e.Identifier.Name.String(), s: s, fn: fn, at: e.Identifier.Idx})
		}
		a.expr(s, fn, e.Left)
	case *ast.PrivateDotExpression:
		a.expr(s, fn, e.Left)
	case *ast.PropertyKeyed:
		if e.Computed {
			a.expr(s, fn, e.Key)
		}
		a.expr(s, fn, e.Value)
	case *ast.PropertyShort:
		a.uses = append(a.uses, use{name: e.Name.Name.String(), s: s, fn: fn, at: e.Name.Idx})
		a.expr(s, fn, e.Initializer)
	case *ast.MetaProperty, *ast.StringLiteral, *ast.NumberLiteral, *ast.BooleanLiteral, *ast.NullLiteral, *ast.RegExpLiteral, *ast.SuperExpression:
	default:
		a.generic(s, fn, reflect.ValueOf(e))
	}
}

var (
	expressionType = reflect.TypeFor[ast.Expression]()
	statementType  = reflect.TypeFor[ast.Statement]()
)

// generic visits the expressions and statements in a node of no other
// concern, by reflection.
func (a *analyzer) generic(s *scope, fn *fnInfo, v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		a.generic(s, fn, v.Elem())
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		switch x := v.Interface().(type) {
		case ast.Statement:
			a.stmt(s, x)
		case ast.Expression:
			a.expr(s, fn, x)
		default:
			a.generic(s, fn, v.Elem())
		}
	case reflect.Struct:
		if v.Type() == idxType {
			return
		}
		for i := range v.NumField() {
			f := v.Field(i)
			if !v.Type().Field(i).IsExported() {
				continue
			}
			switch {
			case f.Type().Implements(statementType) && f.Kind() != reflect.Interface:
				if st, ok := f.Interface().(ast.Statement); ok && !f.IsNil() {
					a.stmt(s, st)
				}
			case f.Type().Implements(expressionType) && f.Kind() != reflect.Interface:
				if ex, ok := f.Interface().(ast.Expression); ok && !(f.Kind() == reflect.Pointer && f.IsNil()) {
					a.expr(s, fn, ex)
				}
			default:
				a.generic(s, fn, f)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			a.generic(s, fn, v.Index(i))
		}
	}
}
