package js

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
)

// Regular expressions are bounded as the rest of machines' code is.
//
// goja matches a pattern it can hand to Go's regexp package (RE2, linear)
// with it, and one that needs backtracking (lookaround, backreferences),
// or a match that starts past the beginning of the string, with
// dlclark/regexp2, which backtracks without bound: /(a+)+$/ on 28
// characters ran for minutes. A match is one step of the interpreter, so
// neither the time limit nor a step's context could stop it. goja sets no
// match timeout on regexp2 (and treats a failed match as no match), and
// gives no hold on the patterns it compiles.
//
// So the sandbox does the matching itself, with regexp2 (what goja would
// use), through the one door every match goes through:
// RegExp.prototype.exec, which the sandbox replaces. test, and the
// [Symbol.match], [Symbol.replace] and [Symbol.search] methods (which
// String.prototype's match, replace, replaceAll and search call), are
// made to go through it: they mark the RegExp as changed, which turns off
// goja's own fast paths, and goja's generic algorithms call exec.
// [Symbol.split] and [Symbol.matchAll] are the sandbox's own (goja's would
// match with its own engine once they construct a RegExp of their own).
// RegExp.prototype.compile, which changes a RegExp's pattern in place, is
// removed (Annex B; no machine needs it).
//
// exec compiles a RegExp's pattern once per runtime with regexp2, as goja
// does, and runs each match in a goroutine of its own, with a match
// timeout that is what remains of the call's time limit and of its step's
// deadline. The call waits for the match, for the watchdog's interrupt, or
// for the step's context to end, whichever comes first: a cancelled call
// stops at once, and the interrupt ends it as for any other code. A match
// left running then stops by its own timeout (regexp2's clock ticks every
// 100 ms), its result unused. A regular expression at a module's top
// level is bounded in the same way, by the load's limits and context.

// boundedRegExp is a pattern compiled by the sandbox: rx, and quick, the
// same with a timeout of quickMatch, never changed; and re2, the pattern
// as Go's regexp package compiles it, when it can (as goja does), which
// matches in linear time. re2Anywhere: its pattern has no assertion that
// looks before where a match starts (^, \b, \B), so it can match from
// any position.
type boundedRegExp struct {
	rx, quick               *regexp2.Regexp
	re2                     *regexp.Regexp
	re2Anywhere             bool
	global, sticky, unicode bool
}

// quickMatch is how long a match runs in the call's own goroutine before
// it is run again in one of its own, which the call can leave (regexp2
// gives up 100 to 200 ms past a timeout this short: its clock ticks every
// 100 ms). Nearly every match ends long before.
const quickMatch = 10 * time.Millisecond

// maxCompiled bounds the patterns a runtime keeps compiled.
const maxCompiled = 256

// errMatchStopped is what a match returns when the call was interrupted
// while it ran; the interrupt is then pending, and raised by the next
// instruction.
var errMatchStopped = errors.New("the match was stopped")

// installRegExps replaces RegExp.prototype's exec, test, [Symbol.split]
// and [Symbol.matchAll], and removes compile; x.regexps wraps the others.
func (x *sandbox) installRegExps(proto *goja.Object) error {
	vm := x.vm
	getter := func(name string) (goja.Callable, error) {
		v, err := vm.RunString(fmt.Sprintf("Object.getOwnPropertyDescriptor(RegExp.prototype, %q).get", name))
		if err != nil {
			return nil, err
		}
		f, ok := goja.AssertFunction(v)
		if !ok {
			return nil, fmt.Errorf("RegExp.prototype.%s has no getter", name)
		}
		return f, nil
	}
	var err error
	if x.source, err = getter("source"); err != nil {
		return err
	}
	if x.flags, err = getter("flags"); err != nil {
		return err
	}
	x.regExpCtor = vm.Get("RegExp").ToObject(vm)
	noop, err := vm.RunString("(function () {})")
	if err != nil {
		return err
	}
	x.rt.noop, _ = goja.AssertFunction(noop)
	exec := x.native("exec", 1, func(call goja.FunctionCall) goja.Value {
		o := x.regExpThis(call.This, "exec")
		return x.exec(o, x.str(call.Argument(0)))
	})
	x.execFn = exec
	test := x.native("test", 1, func(call goja.FunctionCall) goja.Value {
		o, ok := call.This.(*goja.Object)
		if !ok {
			panic(vm.NewTypeError("Method RegExp.prototype.test called on incompatible receiver %s", call.This.String()))
		}
		return vm.ToValue(!goja.IsNull(x.regExpExec(o, x.str(call.Argument(0)))))
	})
	if err := proto.DefineDataProperty("exec", exec, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return err
	}
	if err := proto.DefineDataProperty("test", test, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return err
	}
	if err := proto.DefineDataPropertySymbol(goja.SymSplit, x.native("[Symbol.split]", 2, x.split2), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return err
	}
	if err := proto.DefineDataPropertySymbol(goja.SymMatchAll, x.native("[Symbol.matchAll]", 1, x.matchAll), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return err
	}
	if err := proto.Delete("compile"); err != nil {
		return err
	}
	// The matchAll iterators' prototype: an iterator's, with their tag
	// (each iterator has a next of its own, on its state).
	iterProto, err := x.object("Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]()))")
	if err != nil {
		return err
	}
	x.iterProto = vm.NewObject()
	if err := x.iterProto.SetPrototype(iterProto); err != nil {
		return err
	}
	if err := x.iterProto.DefineDataPropertySymbol(goja.SymToStringTag, vm.ToValue("RegExp String Iterator"), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE); err != nil {
		return err
	}
	x.rt.hostRoots = append(x.rt.hostRoots, x.iterProto)
	return nil
}

// native makes a native function with a name and a length.
func (x *sandbox) native(name string, length int, f func(goja.FunctionCall) goja.Value) *goja.Object {
	fn := x.vm.ToValue(f).(*goja.Object)
	_ = fn.DefineDataProperty("name", x.vm.ToValue(name), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	_ = fn.DefineDataProperty("length", x.vm.ToValue(length), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	return fn
}

// regExpThis is this of a method that needs a RegExp.
func (x *sandbox) regExpThis(this goja.Value, method string) *goja.Object {
	o, ok := this.(*goja.Object)
	if !ok || o.ClassName() != "RegExp" {
		panic(x.vm.NewTypeError("Method RegExp.prototype.%s called on incompatible receiver %s", method, this.String()))
	}
	return o
}

// markChanged makes goja treat a RegExp as one whose methods may have
// been changed, so that its own algorithms call exec rather than match
// by themselves: defining a property does (lastIndex, as it is).
func markChanged(v goja.Value) {
	o, ok := v.(*goja.Object)
	if !ok || o.ClassName() != "RegExp" {
		return
	}
	if last := o.Get("lastIndex"); last != nil {
		_ = o.DefineDataProperty("lastIndex", last, goja.FLAG_NOT_SET, goja.FLAG_NOT_SET, goja.FLAG_NOT_SET)
	}
}

// regExpExec is ECMAScript's RegExpExec: the object's exec, or the
// sandbox's for a RegExp whose exec is not a function.
func (x *sandbox) regExpExec(o *goja.Object, s goja.String) goja.Value {
	execV := o.Get("exec")
	if f, ok := goja.AssertFunction(execV); ok {
		if eo, ok := execV.(*goja.Object); ok && eo.SameAs(x.execFn) && o.ClassName() == "RegExp" {
			return x.exec(o, s) // the sandbox's own: no call through goja
		}
		res := invoke(f, o, s)
		if _, isObj := res.(*goja.Object); !isObj && !goja.IsNull(res) {
			panic(x.vm.NewTypeError("RegExp exec method returned something other than an Object or null"))
		}
		return res
	}
	return x.exec(x.regExpThis(o, "exec"), s)
}

// compiled returns a RegExp's pattern compiled by the sandbox.
func (x *sandbox) compiled(o *goja.Object) *boundedRegExp {
	rt := x.rt
	if b := rt.rxCache[o]; b != nil {
		return b
	}
	src := x.str(invoke(x.source, o))
	flags := invoke(x.flags, o).String()
	key := flags + "/" + src.String()
	b := rt.rxByKey[key]
	if b == nil {
		var err error
		if b, err = compileBounded(src, flags); err != nil {
			panic(x.rt.jsError("SyntaxError", fmt.Sprintf("Invalid regular expression: /%s/: %v", src.String(), err)))
		}
		if rt.rxByKey == nil || len(rt.rxByKey) >= maxCompiled {
			rt.rxByKey = map[string]*boundedRegExp{}
		}
		rt.rxByKey[key] = b
	}
	if rt.rxCache == nil || len(rt.rxCache) >= maxCompiled {
		rt.rxCache = map[*goja.Object]*boundedRegExp{}
	}
	rt.rxCache[o] = b
	return b
}

// compileBounded compiles a pattern (a RegExp's source) as goja compiles
// one for regexp2.
func compileBounded(src goja.String, flags string) (*boundedRegExp, error) {
	b := &boundedRegExp{}
	opts := regexp2.ECMAScript
	re2flags := ""
	dotAll := false
	for _, f := range flags {
		switch f {
		case 'g':
			b.global = true
		case 'y':
			b.sticky = true
		case 'u':
			b.unicode = true
			opts |= regexp2.Unicode
		case 'i':
			opts |= regexp2.IgnoreCase
			re2flags += "i"
		case 'm':
			opts |= regexp2.Multiline
			re2flags += "m"
		case 's':
			opts |= regexp2.Singleline
			re2flags += "s"
			dotAll = true
		}
	}
	pattern := escapeInvalidUTF16(src)
	if b.unicode {
		pattern = regexpToUnicode(pattern)
	} else {
		pattern = regexpToUTF16(pattern)
	}
	// goja's compileRegexp: RE2 when the pattern needs no backtracking.
	if re2, err := parser.TransformRegExp(pattern, dotAll, b.unicode); err == nil {
		if re2flags != "" {
			re2 = "(?" + re2flags + ":" + re2 + ")"
		}
		if r, err := regexp.Compile(re2); err == nil {
			b.re2, b.re2Anywhere = r, !looksBehind(pattern)
		}
	}
	rx, err := regexp2.Compile(pattern, opts)
	if err != nil {
		return nil, err
	}
	b.rx = rx
	quick := *rx
	quick.MatchTimeout = quickMatch
	b.quick = &quick
	return b, nil
}

// exec is RegExp.prototype.exec of a RegExp, bounded: goja's
// (regexpObject.exec), with the sandbox's matching.
func (x *sandbox) exec(o *goja.Object, s goja.String) goja.Value {
	vm := x.vm
	b := x.compiled(o)
	setLast := func(v int64) {
		if err := o.Set("lastIndex", v); err != nil {
			panic(err)
		}
	}
	var index int64
	if b.global || b.sticky {
		index = toLength(o.Get("lastIndex"))
	}
	n := int64(s.Length())
	if index > n {
		if b.global || b.sticky {
			setLast(0)
		}
		return goja.Null()
	}
	idx, groups, err := x.rt.find(b, s, int(index))
	if err != nil {
		if errors.Is(err, regexp2.ErrBacktrackingStackLimit) {
			panic(x.rt.rangeError("Maximum call stack size exceeded: the regular expression backtracks too deeply"))
		}
		return goja.Null() // interrupted: the next instruction raises it
	}
	if idx == nil || (b.sticky && int64(idx[0]) != index) {
		if b.global || b.sticky {
			setLast(0)
		}
		return goja.Null()
	}
	if b.global || b.sticky {
		setLast(int64(idx[1]))
	}
	// goja's execResultToArray.
	count := len(idx) / 2
	values := make([]any, count)
	values[0] = s.Substring(idx[0], idx[1])
	lower := 0
	for i := 1; i < count; i++ {
		if idx[2*i] >= 0 && idx[2*i+1] >= lower {
			values[i] = s.Substring(idx[2*i], idx[2*i+1])
			lower = idx[2*i]
		} else {
			values[i] = goja.Undefined()
		}
	}
	arr := vm.NewArray(values...)
	_ = arr.Set("index", idx[0])
	_ = arr.Set("input", s)
	var groupsV goja.Value = goja.Undefined()
	for i := 1; i < count && i < len(groups); i++ {
		if groups[i] == "" {
			continue
		}
		if goja.IsUndefined(groupsV) {
			g := vm.NewObject()
			_ = g.SetPrototype(nil)
			groupsV = g
		}
		_ = groupsV.(*goja.Object).Set(groups[i], values[i])
	}
	_ = arr.Set("groups", groupsV)
	return arr
}

// subject is a string to match, as regexp2 reads it: UTF-16 code units,
// or (unicode) code points with each one's position in code units.
type subject struct {
	s       goja.String
	unicode bool
	runes   []rune
	pos     []int // unicode: the code unit index of each rune, and the length
}

// subjectOf converts s, or returns the conversion of the last string
// matched when it is the same (a global RegExp's exec, split and replace
// match one string again and again).
func (rt *jsRuntime) subjectOf(s goja.String, unicode bool) *subject {
	if l := rt.lastSubject; l != nil && l.unicode == unicode && l.s.SameAs(s) {
		return l
	}
	n := s.Length()
	sub := &subject{s: s, unicode: unicode}
	if !unicode {
		sub.runes = make([]rune, n)
		for i := range n {
			sub.runes[i] = rune(s.CharAt(i))
		}
	} else {
		sub.runes = make([]rune, 0, n)
		sub.pos = make([]int, 0, n+1)
		for i := 0; i < n; {
			c := rune(s.CharAt(i))
			size := 1
			if utf16.IsSurrogate(c) && i+1 < n {
				if r := utf16.DecodeRune(c, rune(s.CharAt(i+1))); r != utf8.RuneError {
					c, size = r, 2
				}
			}
			sub.runes = append(sub.runes, c)
			sub.pos = append(sub.pos, i)
			i += size
		}
		sub.pos = append(sub.pos, n)
	}
	rt.lastSubject = sub
	return sub
}

// find matches b in s from start (in code units), bounded by the call's
// limits; it returns the match's indexes (start and end of each group,
// -1 for a group that did not take part) and the groups' names.
func (rt *jsRuntime) find(b *boundedRegExp, s goja.String, start int) ([]int, []string, error) {
	sub := rt.subjectOf(s, b.unicode)
	runes, at := sub.runes, start
	if b.unicode {
		// goja's findUnicodeCached: a start inside a surrogate pair
		// starts at the pair's second half.
		at = sort.SearchInts(sub.pos, start)
		if at < len(sub.pos) && sub.pos[at] != start {
			at--
			runes = append([]rune(nil), runes...)
			_, second := utf16.EncodeRune(runes[at])
			runes[at] = second
		}
	}
	if b.re2 != nil && (at == 0 || b.re2Anywhere) && len(runes) == len(sub.runes) {
		// Linear: no bound needed but the string's length.
		idx := b.re2.FindReaderSubmatchIndex(&runeReader{runes: runes[at:]})
		if idx == nil {
			return nil, nil, nil
		}
		for i, v := range idx {
			if v >= 0 {
				v += at
				if b.unicode {
					v = sub.pos[v]
				}
				idx[i] = v
			}
		}
		return idx, b.re2.SubexpNames(), nil
	}
	m, err := rt.match(b, runes, at)
	if err != nil || m == nil {
		return nil, nil, err
	}
	gs := m.Groups()
	idx := make([]int, 0, 2*len(gs))
	names := make([]string, 0, len(gs))
	for _, g := range gs {
		names = append(names, g.Name)
		if len(g.Captures) == 0 {
			idx = append(idx, -1, 0)
			continue
		}
		from, to := g.RuneIndex, g.RuneIndex+g.RuneLength
		if b.unicode {
			from, to = sub.pos[from], sub.pos[to]
		}
		idx = append(idx, from, to)
	}
	return idx, names, nil
}

// runeReader reads runes, each of size 1: Go's regexp then gives indexes
// in runes.
type runeReader struct {
	runes []rune
	pos   int
}

func (r *runeReader) ReadRune() (rune, int, error) {
	if r.pos >= len(r.runes) {
		return 0, 0, io.EOF
	}
	r.pos++
	return r.runes[r.pos-1], 1, nil
}

// looksBehind reports whether a pattern has an assertion about what comes
// before a position (^ outside a class, \b or \B), so that it cannot be
// matched on the string from a later position.
func looksBehind(p string) bool {
	inClass := false
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '\\' && i+1 < len(p):
			i++
			if !inClass && (p[i] == 'b' || p[i] == 'B') {
				return true
			}
		case c == '[':
			inClass = true
		case c == ']':
			inClass = false
		case c == '^' && !inClass:
			return true
		}
	}
	return false
}

type matched struct {
	m   *regexp2.Match
	err error
}

// match runs one match: first here for quickMatch, then, when it takes
// longer, again in a goroutine, waiting for it, for the watchdog's
// interrupt or for the step's context to end; when it does not get the
// match, it raises the interrupt (the runtime stops the call; jsErr says
// why). A match the call leaves goes on until its own timeout: so it is
// run with a timeout that starts at firstChunk and doubles at each try,
// up to what remains of the call's time (its limit, or its step's
// deadline if sooner): what a match left behind burns is at most what
// the call had spent, and a long match costs at most twice its time.
func (rt *jsRuntime) match(b *boundedRegExp, runes []rune, at int) (*regexp2.Match, error) {
	m, err := b.quick.FindRunesMatchStartingAt(runes, at)
	if err == nil || errors.Is(err, regexp2.ErrBacktrackingStackLimit) {
		return m, err
	}
	deadline, done, stepBound := rt.callDeadline()
	outOfTime := func() error {
		if stepBound {
			// The step's deadline: its context ends with it, and says so.
			select {
			case <-done:
			case <-time.After(time.Second):
			}
			rt.interruptNow(nil)
		} else {
			rt.interruptNow(ErrInterrupted)
		}
		return rt.raiseInterrupt()
	}
	left := time.Until(deadline)
	if left <= 0 {
		return nil, outOfTime()
	}
	timer := time.NewTimer(left)
	defer timer.Stop()
	for chunk := firstChunk; ; chunk *= 2 {
		// A copy of the compiled pattern with this try's timeout: the
		// pattern is shared by the matches of the runtime, one of which may
		// still be running, left.
		try := *b.rx
		try.MatchTimeout = min(chunk, time.Until(deadline))
		if try.MatchTimeout <= 0 {
			break
		}
		out := make(chan matched, 1)
		go func() {
			m, err := try.FindRunesMatchStartingAt(runes, at)
			out <- matched{m, err}
		}()
		select {
		case r := <-out:
			if r.err == nil || errors.Is(r.err, regexp2.ErrBacktrackingStackLimit) {
				return r.m, r.err
			}
			continue // its timeout: again, with twice as long
		case <-rt.stop:
			return nil, rt.raiseInterrupt()
		case <-done:
			rt.interruptNow(nil)
			return nil, rt.raiseInterrupt()
		case <-timer.C:
		}
		break
	}
	return nil, outOfTime()
}

// firstChunk is the timeout of a match's first try in a goroutine of its
// own (regexp2's clock ticks every 100 ms).
const firstChunk = 200 * time.Millisecond

// raiseInterrupt throws the runtime's pending interrupt from a native
// function, as goja would at the next instruction (which a native called
// last in a script never reaches): it calls a function of no code, which
// the interrupt stops, and panics with what that returns; goja gives it
// to the call's caller, past any catch. It returns errMatchStopped only
// if the runtime was not interrupted after all.
func (rt *jsRuntime) raiseInterrupt() error {
	if _, err := rt.noop(goja.Undefined()); err != nil {
		panic(err)
	}
	return errMatchStopped
}

// callDeadline returns when the call in progress must end (its time
// limit, or its step's deadline if sooner: stepBound), and the step
// context's Done.
func (rt *jsRuntime) callDeadline() (deadline time.Time, done <-chan struct{}, stepBound bool) {
	m := rt.mod
	m.mu.Lock()
	defer m.mu.Unlock()
	start := time.Now()
	if rt.seen == rt.calls.Load() && !rt.since.IsZero() {
		start = rt.since // the watchdog has seen the call begin
	}
	deadline = start.Add(m.dog.timeout)
	if rt.ctx != nil {
		if d, ok := rt.ctx.Deadline(); ok && d.Before(deadline) {
			deadline, stepBound = d, true
		}
		done = rt.ctx.Done()
	}
	return deadline, done, stepBound
}

// interruptNow interrupts the runtime's call with reason, or with the
// cause of its step's end when reason is nil.
func (rt *jsRuntime) interruptNow(reason error) {
	m := rt.mod
	m.mu.Lock()
	defer m.mu.Unlock()
	if reason == nil {
		reason = ErrInterrupted
		if rt.ctx != nil && rt.ctx.Err() != nil {
			reason = context.Cause(rt.ctx)
		}
	}
	rt.interrupt(reason)
}

// speciesConstructor is ECMAScript's SpeciesConstructor(o, %RegExp%).
func (x *sandbox) speciesConstructor(o *goja.Object) func(args ...goja.Value) *goja.Object {
	vm := x.vm
	c := x.regExpCtor
	if cv := o.Get("constructor"); cv != nil && !goja.IsUndefined(cv) {
		co, ok := cv.(*goja.Object)
		if !ok {
			panic(vm.NewTypeError("object.constructor is not an object"))
		}
		if s := co.GetSymbol(goja.SymSpecies); s != nil && !goja.IsUndefined(s) && !goja.IsNull(s) {
			so, ok := s.(*goja.Object)
			if _, isCtor := goja.AssertConstructor(s); !ok || !isCtor {
				panic(vm.NewTypeError("object.constructor[Symbol.species] is not a constructor"))
			}
			c = so
		}
	}
	ctor, _ := goja.AssertConstructor(c)
	return func(args ...goja.Value) *goja.Object {
		r, err := ctor(nil, args...)
		if err != nil {
			panic(err)
		}
		return r
	}
}

// advance is ECMAScript's AdvanceStringIndex.
func advance(s goja.String, i int64, unicode bool) int64 {
	if !unicode || i+1 >= int64(s.Length()) {
		return i + 1
	}
	if utf16.IsSurrogate(rune(s.CharAt(int(i)))) && s.CharAt(int(i)) < 0xDC00 && s.CharAt(int(i+1)) >= 0xDC00 && s.CharAt(int(i+1)) <= 0xDFFF {
		return i + 2
	}
	return i + 1
}

// split2 is RegExp.prototype[Symbol.split] as ECMAScript has it, matching
// through the splitter's exec, with the sandbox's bound on the elements
// it makes.
func (x *sandbox) split2(call goja.FunctionCall) goja.Value {
	vm := x.vm
	rx, ok := call.This.(*goja.Object)
	if !ok {
		panic(vm.NewTypeError("RegExp.prototype[Symbol.split] called on a non-object"))
	}
	s := x.str(call.Argument(0))
	construct := x.speciesConstructor(rx)
	flags := x.str(rx.Get("flags")).String()
	unicode := strings.Contains(flags, "u")
	newFlags := flags
	if !strings.Contains(flags, "y") {
		newFlags += "y"
	}
	splitter := construct(rx, vm.ToValue(newFlags))
	lim := int64(math.MaxUint32)
	if l := call.Argument(1); !goja.IsUndefined(l) {
		lim = toUint32(l)
	}
	var out []any
	add := func(v goja.Value) bool {
		out = append(out, v)
		if int64(len(out)) > x.lim.maxElements {
			x.tooMany()
		}
		return int64(len(out)) == lim
	}
	if lim == 0 {
		return vm.NewArray()
	}
	size := int64(s.Length())
	if size == 0 {
		if goja.IsNull(x.regExpExec(splitter, s)) {
			out = append(out, s)
		}
		return vm.NewArray(out...)
	}
	p, q := int64(0), int64(0)
	for q < size {
		if err := splitter.Set("lastIndex", q); err != nil {
			panic(err)
		}
		z := x.regExpExec(splitter, s)
		if goja.IsNull(z) {
			q = advance(s, q, unicode)
			continue
		}
		e := min(toLength(splitter.Get("lastIndex")), size)
		if e == p {
			q = advance(s, q, unicode)
			continue
		}
		if add(s.Substring(int(p), int(q))) {
			return vm.NewArray(out...)
		}
		p = e
		zo := z.ToObject(vm)
		captures := max(lengthOf(zo)-1, 0)
		for i := int64(1); i <= captures; i++ {
			v := zo.Get(indexKey(i))
			if v == nil {
				v = goja.Undefined()
			}
			if add(v) {
				return vm.NewArray(out...)
			}
		}
		q = p
	}
	add(s.Substring(int(p), int(size)))
	return vm.NewArray(out...)
}

// matchIterator is the state of an iterator [Symbol.matchAll] made.
type matchIterator struct {
	matcher         *goja.Object
	s               goja.String
	global, unicode bool
	done            bool
}

func (it *matchIterator) next(x *sandbox) goja.Value {
	vm := x.vm
	result := func(v goja.Value, done bool) goja.Value {
		o := vm.NewObject()
		_ = o.Set("value", v)
		_ = o.Set("done", done)
		return o
	}
	if it.done {
		return result(goja.Undefined(), true)
	}
	m := x.regExpExec(it.matcher, it.s)
	if goja.IsNull(m) {
		it.done = true
		return result(goja.Undefined(), true)
	}
	if !it.global {
		it.done = true
		return result(m, false)
	}
	if x.str(m.ToObject(vm).Get("0")).Length() == 0 {
		i := toLength(it.matcher.Get("lastIndex"))
		if err := it.matcher.Set("lastIndex", advance(it.s, i, it.unicode)); err != nil {
			panic(err)
		}
	}
	return result(m, false)
}

// matchAll is RegExp.prototype[Symbol.matchAll] as ECMAScript has it.
func (x *sandbox) matchAll(call goja.FunctionCall) goja.Value {
	vm := x.vm
	rx, ok := call.This.(*goja.Object)
	if !ok {
		panic(vm.NewTypeError("RegExp.prototype[Symbol.matchAll] called on a non-object"))
	}
	s := x.str(call.Argument(0))
	construct := x.speciesConstructor(rx)
	flags := x.str(rx.Get("flags"))
	matcher := construct(rx, flags)
	if err := matcher.Set("lastIndex", toLength(rx.Get("lastIndex"))); err != nil {
		panic(err)
	}
	f := flags.String()
	if strings.Contains(f, "g") && strlen(s)+1 > x.lim.maxElements {
		// [...s.matchAll(rx)] makes one element per match: a long string
		// is counted first, as match's are.
		n := int64(0)
		x.eachMatch(rx, s, func([]goja.Value) {
			if n++; n > x.lim.maxElements {
				x.tooMany()
			}
		})
	}
	state := &matchIterator{matcher: matcher, s: s, global: strings.Contains(f, "g"), unicode: strings.Contains(f, "u")}
	it := vm.NewObject()
	_ = it.SetPrototype(x.iterProto)
	_ = it.DefineDataProperty("next", x.native("next", 0, func(goja.FunctionCall) goja.Value { return state.next(x) }), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	return it
}

// escapeInvalidUTF16 is a pattern's source as a Go string, a lone
// surrogate written \uXXXX (goja's escapeInvalidUtf16).
func escapeInvalidUTF16(s goja.String) string {
	n := s.Length()
	var b strings.Builder
	for i := 0; i < n; i++ {
		c := rune(s.CharAt(i))
		if utf16.IsSurrogate(c) {
			if i+1 < n {
				if r := utf16.DecodeRune(c, rune(s.CharAt(i+1))); r != utf8.RuneError {
					b.WriteRune(r)
					i++
					continue
				}
			}
			fmt.Fprintf(&b, `\u%04x`, c)
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// regexpToUnicode writes the surrogate pairs written \uXXXX\uXXXX in a
// pattern as the characters they make (goja's convertRegexpToUnicode).
func regexpToUnicode(p string) string {
	var b strings.Builder
	pos := 0
	for i := 0; i < len(p)-11; {
		r, size := utf8.DecodeRuneInString(p[i:])
		if r != '\\' {
			i += size
			continue
		}
		i++
		if p[i] == 'u' && p[i+5] == '\\' && p[i+6] == 'u' {
			if first, ok := decodeHex4(p[i+1 : i+5]); ok && utf16.IsSurrogate(rune(first)) && first < 0xDC00 {
				if second, ok := decodeHex4(p[i+7 : i+11]); ok && second >= 0xDC00 && second <= 0xDFFF {
					b.WriteString(p[pos : i-1])
					b.WriteRune(utf16.DecodeRune(rune(first), rune(second)))
					i += 11
					pos = i
					continue
				}
			}
		}
		i++
	}
	if pos == 0 {
		return p
	}
	b.WriteString(p[pos:])
	return b.String()
}

// regexpToUTF16 writes the characters past U+FFFF of a pattern as
// \uXXXX\uXXXX, the code units regexp2 matches (goja's
// convertRegexpToUtf16).
func regexpToUTF16(p string) string {
	var b strings.Builder
	pos := 0
	var prev rune
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRuneInString(p[i:])
		if r > 0xFFFF {
			b.WriteString(p[pos:i])
			if prev == '\\' {
				b.WriteRune('\\')
			}
			first, second := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, first, second)
			pos = i + size
		}
		i += size
		prev = r
	}
	if pos == 0 {
		return p
	}
	b.WriteString(p[pos:])
	return b.String()
}

func decodeHex4(s string) (int, bool) {
	v := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9':
			v = v*16 + int(c-'0')
		case 'a' <= c && c <= 'f':
			v = v*16 + int(c-'a'+10)
		case 'A' <= c && c <= 'F':
			v = v*16 + int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}
