package js

import (
	"reflect"
	"regexp"
	"strconv"
	"sync"

	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"

	"github.com/stategate/stategate/internal/config"
)

// A module's config is an object its code builds as it runs: the config
// reader sees values, not where they were written. The locator finds the
// object literal the config was written as, the argument of a
// createMachine() call in the bundled code (createMachine(...),
// setup({...}).createMachine(...), or a namespace's), and walks it by the
// path of keys of a problem: object literals by their keys (a shorthand
// property or a variable leads to the const or var it names, in a scope
// around the call; a spread, or esbuild's lowering of one, to the
// objects it spreads), array literals by index. The position of the
// deepest key found is mapped through the bundle's source map to the file
// it was written in. The bundle is parsed only when a problem is to be
// located, once per load, and a config made in a way it cannot follow
// (the result of a function) is located as far as it goes, or not at
// all.

// bundleIndex is a bundle's code parsed for locating: the createMachine
// calls whose argument is an object literal, in the module's files.
type bundleIndex struct {
	code, wd, module string

	once  sync.Once
	sm    *srcMap
	calls []machineLiteral
}

// machineLiteral is the config a createMachine call was given.
type machineLiteral struct {
	obj objValue
	at  int  // the argument's offset in the code
	own bool // in the module's own file
}

// objValue is an object written in the code: the literals it is made of,
// the last one's keys over the earlier ones' (a spread, Object.assign),
// and the declarations in scope where it is written.
type objValue struct {
	lits  []*ast.ObjectLiteral
	env   *declEnv
	depth int // the spreads and variables followed to it (maxResolve)
}

// declEnv is a scope's declarations with an initializer (var, let,
// const x = ...), and the scope around it.
type declEnv struct {
	parent *declEnv
	vars   map[string]ast.Expression
}

func (e *declEnv) lookup(name string) (ast.Expression, *declEnv, bool) {
	for ; e != nil; e = e.parent {
		if v, ok := e.vars[name]; ok {
			return v, e, true
		}
	}
	return nil, nil, false
}

func newBundleIndex(b *bundled, module string) *bundleIndex {
	return &bundleIndex{code: b.code, wd: b.wd, module: module}
}

// content returns the contents of one of the bundle's files, named as
// diagnostics name it ("" for the module's own); "" when it has no such
// file.
func (x *bundleIndex) content(file string) string {
	x.once.Do(x.parse)
	if x.sm == nil {
		return ""
	}
	if file == "" {
		file = x.module
	}
	return x.sm.content(file)
}

// configLocator locates the problems of one machine's config (a
// config.Locator): the module's machine, or a child machine it defines,
// told apart by their ids and their shapes (pick).
type configLocator struct {
	index *bundleIndex
	id    string         // the machine's id; "" when its config has none
	cfg   *config.Object // the machine's config, as its code built it
}

var _ config.Locator = (*jsResolver)(nil)

// Locate places a problem of the config at the key its path leads to
// (config.Locator). A resolver with no locator (a machine made after
// load, an implementations module) finds nothing.
func (r *jsResolver) Locate(path []string) (file string, line, col int, ok bool) {
	if r.loc == nil {
		return "", 0, 0, false
	}
	return r.loc.Locate(path)
}

// forConfig returns a locator of the machine whose config is cfg, with
// the same index.
func (l *configLocator) forConfig(cfg *config.Object) *configLocator {
	if l == nil {
		return nil
	}
	id, _ := cfg.Vals["id"].(string)
	return &configLocator{index: l.index, id: id, cfg: cfg}
}

// Locate places the key a path of keys leads to from the config's root:
// its file ("" for the module's own), line and column (from 1, the column
// in bytes); or, when the path goes where the code cannot be followed,
// the deepest key of it found. An empty path is the config's object. ok
// is false when no key of a non-empty path is found, or no config
// literal.
func (l *configLocator) Locate(path []string) (file string, line, col int, ok bool) {
	x := l.index
	x.once.Do(x.parse)
	if x.sm == nil {
		return "", 0, 0, false
	}
	lit, found := l.pick()
	if !found {
		return "", 0, 0, false
	}
	at := -1
	if len(path) == 0 {
		at = lit.at
	}
	var v value = lit.obj
	for _, k := range path {
		next, keyAt, found := v.get(k)
		if !found {
			break
		}
		at = keyAt
		if v = next; v == nil {
			break
		}
	}
	if at < 0 {
		return "", 0, 0, false
	}
	p, ok := x.sm.pos(at)
	if !ok {
		return "", 0, 0, false
	}
	if p.file != x.module {
		file = p.file
	}
	return file, p.line, p.col, true
}

// pick chooses the literal of the locator's machine. A literal whose id
// is another machine's is not; of the others, the one most like the
// config wins: its id, the config's keys it has, the names of the
// config's states it has, and being in the module's own file; the later
// of two alike (the machine a module exports is mostly written after
// the machines it invokes).
func (l *configLocator) pick() (machineLiteral, bool) {
	best, bestScore := -1, -1
	for i, c := range l.index.calls {
		score := 0
		id, hasID := c.obj.stringKey("id")
		switch {
		case hasID && id == l.id:
			score += 100
		case hasID:
			continue // another machine's
		}
		if l.cfg != nil {
			for _, k := range l.cfg.Keys {
				if _, _, has := c.obj.get(k); has {
					score++
				}
			}
			states, _ := l.cfg.Vals["states"].(*config.Object)
			if lit, _, has := c.obj.get("states"); has && states != nil && lit != nil {
				for _, k := range states.Keys {
					if _, _, has := lit.get(k); has {
						score++
					}
				}
			}
		}
		if c.own {
			score++
		}
		if score >= bestScore {
			best, bestScore = i, score
		}
	}
	if best < 0 {
		return machineLiteral{}, false
	}
	return l.index.calls[best], true
}

// parse parses the bundle and finds its createMachine calls; on any
// failure it leaves the index empty (nothing is located).
func (x *bundleIndex) parse() {
	sm, err := newSrcMap(x.code, x.wd, x.module)
	if err != nil {
		return
	}
	prog, err := parser.ParseFile(nil, "", x.code, 0, parser.WithDisableSourceMaps)
	if err != nil {
		return
	}
	f := &callFinder{seen: map[*ast.CallExpression]bool{}}
	f.visit(reflect.ValueOf(prog), nil)
	for _, c := range f.found {
		if len(c.call.ArgumentList) == 0 {
			continue
		}
		p, ok := sm.pos(int(c.call.Callee.Idx0()) - 1)
		if !ok || !p.user() {
			continue // the shim's own code
		}
		arg := c.call.ArgumentList[0]
		obj, ok := resolveObject(arg, c.env, 0)
		if !ok {
			continue
		}
		x.calls = append(x.calls, machineLiteral{obj: obj, at: int(arg.Idx0()) - 1, own: p.file == x.module})
	}
	x.sm = sm
}

// createMachineName matches the names the shim's createMachine has in a
// bundle (esbuild renames it createMachine2 when a module has a
// createMachine of its own).
var createMachineName = regexp.MustCompile(`^createMachine\d*$`)

type foundCall struct {
	call *ast.CallExpression
	env  *declEnv
}

// callFinder walks a program for the createMachine calls, with the
// declarations in scope at each.
type callFinder struct {
	found []foundCall
	seen  map[*ast.CallExpression]bool
}

var (
	blockType   = reflect.TypeFor[*ast.BlockStatement]()
	programType = reflect.TypeFor[*ast.Program]()
	callType    = reflect.TypeFor[*ast.CallExpression]()
)

func (f *callFinder) visit(v reflect.Value, env *declEnv) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		switch v.Type() {
		case programType:
			env = declsOf(v.Interface().(*ast.Program).Body, env)
		case blockType:
			env = declsOf(v.Interface().(*ast.BlockStatement).List, env)
		case callType:
			c := v.Interface().(*ast.CallExpression)
			if f.seen[c] {
				return
			}
			f.seen[c] = true
			if isCreateMachine(c.Callee) {
				f.found = append(f.found, foundCall{call: c, env: env})
			}
		}
		f.visit(v.Elem(), env)
	case reflect.Interface:
		if !v.IsNil() {
			f.visit(v.Elem(), env)
		}
	case reflect.Struct:
		if v.Type() == idxType {
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.visit(v.Field(i), env)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			f.visit(v.Index(i), env)
		}
	}
}

func isCreateMachine(callee ast.Expression) bool {
	switch c := callee.(type) {
	case *ast.Identifier:
		return createMachineName.MatchString(c.Name.String())
	case *ast.DotExpression:
		return c.Identifier.Name.String() == "createMachine"
	case *ast.SequenceExpression: // (0, ns.createMachine)(...)
		return len(c.Sequence) > 0 && isCreateMachine(c.Sequence[len(c.Sequence)-1])
	}
	return false
}

// declsOf returns the scope of a statement list: its declarations of a
// name with an initializer.
func declsOf(list []ast.Statement, parent *declEnv) *declEnv {
	e := &declEnv{parent: parent, vars: map[string]ast.Expression{}}
	add := func(bs []*ast.Binding) {
		for _, b := range bs {
			if id, ok := b.Target.(*ast.Identifier); ok && !isNil(b.Initializer) {
				e.vars[id.Name.String()] = b.Initializer
			}
		}
	}
	for _, st := range list {
		switch st := st.(type) {
		case *ast.VariableStatement:
			add(st.List)
		case *ast.LexicalDeclaration:
			add(st.List)
		}
	}
	if len(e.vars) == 0 {
		return parent
	}
	return e
}

// maxResolve bounds how many variables resolving one value follows.
const maxResolve = 16

// value is an object or an array written in the code.
type value interface {
	// get returns the value at a key (nil when it is neither an object
	// nor an array the code writes), and the offset of the key.
	get(key string) (value, int, bool)
}

// arrValue is an array literal.
type arrValue struct {
	lit *ast.ArrayLiteral
	env *declEnv
}

func (a arrValue) get(key string) (value, int, bool) {
	i, err := strconv.Atoi(key)
	if err != nil || i < 0 || i >= len(a.lit.Value) {
		return nil, 0, false
	}
	for _, e := range a.lit.Value[:i+1] {
		if _, spread := e.(*ast.SpreadElement); spread {
			return nil, 0, false // the index is not the element's
		}
	}
	e := a.lit.Value[i]
	return valueOf(e, a.env), int(e.Idx0()) - 1, true
}

func (o objValue) get(key string) (value, int, bool) {
	for i := len(o.lits) - 1; i >= 0; i-- {
		props := o.lits[i].Value
		for j := len(props) - 1; j >= 0; j-- {
			switch p := props[j].(type) {
			case *ast.PropertyKeyed:
				if !p.Computed && keyName(p.Key) == key {
					return valueOf(p.Value, o.env), int(p.Key.Idx0()) - 1, true
				}
			case *ast.PropertyShort:
				if p.Name.Name.String() == key {
					return valueOf(&p.Name, o.env), int(p.Name.Idx) - 1, true
				}
			case *ast.SpreadElement:
				if inner, ok := resolveObject(p.Expression, o.env, o.depth+1); ok {
					if v, at, found := inner.get(key); found {
						return v, at, true
					}
				}
			}
		}
	}
	return nil, 0, false
}

// stringKey returns the value of a key when it is a string literal.
func (o objValue) stringKey(key string) (string, bool) {
	for i := len(o.lits) - 1; i >= 0; i-- {
		for _, p := range o.lits[i].Value {
			if p, ok := p.(*ast.PropertyKeyed); ok && !p.Computed && keyName(p.Key) == key {
				if s, ok := p.Value.(*ast.StringLiteral); ok {
					return s.Value.String(), true
				}
			}
		}
	}
	return "", false
}

// keyName is a property key's name, as JavaScript names it.
func keyName(k ast.Expression) string {
	switch k := k.(type) {
	case *ast.StringLiteral:
		return k.Value.String()
	case *ast.Identifier:
		return k.Name.String()
	case *ast.NumberLiteral:
		switch n := k.Value.(type) {
		case int64:
			return strconv.FormatInt(n, 10)
		case float64:
			return strconv.FormatFloat(n, 'f', -1, 64)
		}
	}
	return "\x00" // no key's name
}

// valueOf is the object or array an expression writes, or nil.
func valueOf(e ast.Expression, env *declEnv) value {
	e, env, ok := follow(e, env)
	if !ok {
		return nil
	}
	if a, ok := e.(*ast.ArrayLiteral); ok {
		return arrValue{lit: a, env: env}
	}
	if o, ok := resolveObject(e, env, 0); ok {
		return o
	}
	return nil
}

// follow follows a variable to the expression it is declared with.
func follow(e ast.Expression, env *declEnv) (ast.Expression, *declEnv, bool) {
	for range maxResolve {
		id, ok := e.(*ast.Identifier)
		if !ok {
			return e, env, true
		}
		init, denv, found := env.lookup(id.Name.String())
		if !found {
			return nil, nil, false
		}
		e, env = init, denv
	}
	return nil, nil, false
}

// resolveObject is the object an expression writes: an object literal, a
// variable declared with one, or the merge of such objects (esbuild's
// lowering of a spread, __spreadValues and __spreadProps, and
// Object.assign).
func resolveObject(e ast.Expression, env *declEnv, depth int) (objValue, bool) {
	if depth > maxResolve {
		return objValue{}, false
	}
	e, env, ok := follow(e, env)
	if !ok {
		return objValue{}, false
	}
	switch x := e.(type) {
	case *ast.ObjectLiteral:
		return objValue{lits: []*ast.ObjectLiteral{x}, env: env, depth: depth}, true
	case *ast.CallExpression:
		if !isMerge(x.Callee) {
			return objValue{}, false
		}
		out := objValue{env: env, depth: depth}
		for _, a := range x.ArgumentList {
			if o, ok := resolveObject(a, env, depth+1); ok {
				if o.env != env {
					// A literal of another scope keeps its own: spread it
					// as a literal of its own.
					out.lits = append(out.lits, &ast.ObjectLiteral{Value: []ast.Property{&ast.SpreadElement{Expression: a}}})
					continue
				}
				out.lits = append(out.lits, o.lits...)
			}
		}
		return out, len(out.lits) > 0
	}
	return objValue{}, false
}

// isMerge reports whether a callee merges its arguments' properties:
// esbuild's helpers for an object spread lowered to ES2017, and
// Object.assign.
func isMerge(callee ast.Expression) bool {
	switch c := callee.(type) {
	case *ast.Identifier:
		switch c.Name.String() {
		case "__spreadValues", "__spreadProps", "__getOwnPropDescs":
			return true
		}
	case *ast.DotExpression:
		l, ok := c.Left.(*ast.Identifier)
		return ok && l.Name.String() == "Object" && c.Identifier.Name.String() == "assign"
	}
	return false
}
