package js

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/stategate/stategate/xstate"
)

// Machine code runs without I/O, timers or a process (see the package
// doc): a module that calls fetch or setTimeout loads, and fails at its
// first call ("fetch is not defined"). ioWarnings finds, as a module
// loads, the globals of that kind its code uses, and warns of each, with
// what to do instead: the code is analyzed as instrument analyzes it
// (every identifier resolved lexically), and a name that no scope
// declares, read other than as typeof's operand, is the global's.

const (
	ioAdvice      = "`%s` is not available to machine code (it runs without I/O): call the service as an upstream MCP server's tool bound to this machine (docs/upstreams.md), or implement the actor in Go (a Registry actor: docs/machines.md#implementations-written-in-go)"
	timerAdvice   = "`%s` is not available to machine code: use XState's delayed transitions (`after`) or delayed events (`raise(..., { delay })`)"
	processAdvice = "`%s` is not available to machine code: pass values in through the machine's input (`meta.input`: docs/tools.md) or context"
	storeAdvice   = "`%s` is not available to machine code: keep what the machine must remember in its context, which stategate stores with each instance"
	requireAdvice = "`%s` is not available: use `import` (a machine module may import its own modules and JSON files in the machines folder)"
)

// unavailable maps the globals machine code may expect but does not have
// (TestUnavailableGlobalsAreUndefined checks that each is undefined in a
// module's runtime) to what the warning says of them (a format of the
// name).
var unavailable = func() map[string]string {
	m := map[string]string{}
	for advice, names := range map[string][]string{
		ioAdvice:      {"fetch", "XMLHttpRequest", "WebSocket", "EventSource"},
		timerAdvice:   {"setTimeout", "setInterval", "clearTimeout", "clearInterval", "setImmediate", "clearImmediate", "requestAnimationFrame"},
		processAdvice: {"process", "Deno", "Bun"},
		storeAdvice:   {"localStorage", "sessionStorage", "indexedDB"},
		requireAdvice: {"require"},
	} {
		for _, n := range names {
			m[n] = advice
		}
	}
	return m
}()

// esbuildRequire is the helper esbuild's bundle calls for a require() it
// cannot resolve (require(name)): a use of it is the module's require.
const esbuildRequire = "__require"

// mayUseUnavailable matches a file that may use one of the unavailable
// globals (a word of theirs anywhere, in comments and strings too): only
// then is the bundle analyzed for them.
var mayUseUnavailable = regexp.MustCompile(`\b(` + strings.Join(slices.Sorted(maps.Keys(unavailable)), "|") + `)\b`)

// ioWarnings returns a warning for each unavailable global the module's
// own files use (not the xstate shim's code), one per name and file, at
// its first use: where it is written in the file (through the bundle's
// source map), with the line's text. A name a file tests with typeof is
// taken as guarded there, and not warned of. It finds nothing when the
// bundle cannot be analyzed (goja.Compile then says why).
func ioWarnings(b *bundled, module string, h helperNames) []xstate.Diagnostic {
	a, err := analyze(b.code, h)
	if err != nil {
		return nil
	}
	var sm *srcMap
	type key struct{ file, name string }
	type found struct {
		pos   srcPos
		count int
	}
	uses := map[key]*found{}
	guarded := map[key]bool{}
	var order []key
	// The globals, and the uses of esbuild's __require (declared by the
	// bundle, so no global).
	candidates := a.globalUses()
	for _, u := range a.uses {
		if u.name == esbuildRequire && u.at > 0 {
			candidates = append(candidates, u)
		}
	}
	slices.SortStableFunc(candidates, func(x, y use) int { return int(x.at - y.at) })
	for _, u := range candidates {
		name := u.name
		if name == esbuildRequire {
			name = "require"
		} else if _, ok := unavailable[name]; !ok {
			continue
		}
		if sm == nil {
			if sm, err = newSrcMap(b.code, b.wd, module); err != nil {
				return nil
			}
		}
		p, ok := sm.pos(int(u.at) - 1)
		if !ok || !p.user() {
			continue
		}
		k := key{p.file, name}
		if u.typeOf {
			guarded[k] = true
			continue
		}
		if f := uses[k]; f != nil {
			f.count++
			continue
		}
		uses[k] = &found{pos: p, count: 1}
		order = append(order, k)
	}
	var out []xstate.Diagnostic
	for _, k := range order {
		if guarded[k] {
			continue
		}
		f := uses[k]
		msg := fmt.Sprintf(unavailable[k.name], k.name)
		if f.count > 1 {
			msg += fmt.Sprintf(" (and %d more %s in this file)", f.count-1, plural(f.count-1, "use", "uses"))
		}
		d := xstate.Diagnostic{File: f.pos.file, Line: f.pos.line, Column: f.pos.col, Msg: msg, Warning: true}
		d.SetSource([]byte(sm.sm.SourceContent(f.pos.source)))
		out = append(out, d)
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// notDefined matches the message of a ReferenceError of a name.
var notDefined = regexp.MustCompile(`^([A-Za-z_$][\w$]*) is not defined$`)

// unavailableAdvice is what to do instead of using a global that machine
// code does not have, when msg is the ReferenceError of one ("fetch is
// not defined": a module's top-level code used it); "" for another
// message.
func unavailableAdvice(msg string) string {
	m := notDefined.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	advice, ok := unavailable[m[1]]
	if !ok {
		return ""
	}
	return fmt.Sprintf(advice, m[1])
}
