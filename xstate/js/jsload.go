package js

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"
	"github.com/evanw/esbuild/pkg/api"

	"github.com/stategate/stategate/internal/config"
	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/xstate"
)

// DefaultTimeout is how long one call into a machine's JavaScript (a
// guard, an action, an expression) may run before it is interrupted.
const DefaultTimeout = time.Second

// Host loads JavaScript and TypeScript modules for an xstate.Loader (its
// Modules), and runs their code in goja runtimes, bounded in time and
// memory. The zero Host is ready to use; its settings are read as its
// first module loads, and not changed after.
type Host struct {
	// Timeout bounds each call into JavaScript; DefaultTimeout when zero.
	Timeout time.Duration
	// Memory is the memory budget of the machines' JavaScript, in bytes:
	// a call into it (or a module's top-level code, as it loads) is
	// interrupted once the Go heap has grown by more than this since it
	// began, and the built-ins that make a string or an array in one step
	// refuse to make one that could not fit in it (a RangeError).
	// DefaultMemory when zero. Negative: calls have no budget (for tests
	// of other things only); the built-ins keep the bounds of
	// DefaultMemory.
	Memory int64
	// Console receives what machines' code writes with console.log and the
	// like, as log records (log and info at level Info, warn at Warn,
	// error at Error, debug and trace at Debug); nil discards it.
	Console *slog.Logger

	once       sync.Once
	prelude    *goja.Program
	hardenProg *goja.Program
	names      helperNames // the names the modules' code gives the host's helpers
	plan       hardenPlan  // how to freeze the intrinsics of a runtime
	clock      *hostClock  // performance.now's, shared by the runtimes
	err        error

	dogOnce sync.Once
	dog     *watchdog // bounds the JavaScript of the host's modules
}

var _ xstate.ContextModules = (*Host)(nil)

// watchdog returns the host's watchdog, made with its settings as they
// are at the first module's load.
func (h *Host) watchdog() *watchdog {
	h.dogOnce.Do(func() { h.dog = newWatchdog(h.timeout(), h.memory()) })
	return h.dog
}

func (h *Host) memory() int64 {
	if h.Memory == 0 {
		return DefaultMemory
	}
	return h.Memory
}

func (h *Host) timeout() time.Duration {
	if h.Timeout > 0 {
		return h.Timeout
	}
	return DefaultTimeout
}

// setup compiles, once per host, the shim as a script whose value is its
// API (enqueueActions makes actions with it) and the hardener's script,
// and names the helpers the modules' code is given.
func (h *Host) setup() error {
	h.once.Do(func() {
		res := api.Transform(shimSource, api.TransformOptions{
			Format: api.FormatIIFE, GlobalName: "__sgXState", Target: api.ES2017, Loader: api.LoaderJS,
		})
		if len(res.Errors) > 0 {
			h.err = fmt.Errorf("the xstate shim: %s", res.Errors[0].Text)
			return
		}
		// A function's variable, not a global: the script's value is the API.
		shim := "(() => {\n" + string(res.Code) + "\nreturn __sgXState;\n})()"
		if h.prelude, h.err = goja.Compile("xstate-shim.js", shim, false); h.err != nil {
			return
		}
		if h.hardenProg, h.err = goja.Compile("stategate-harden.js", hardenSource, true); h.err != nil {
			return
		}
		var tag [8]byte
		_, _ = rand.Read(tag[:])
		h.names = newHelperNames(hex.EncodeToString(tag[:]))
		h.clock = &hostClock{start: time.Now()}
	})
	return h.err
}

// loadModule bundles and evaluates a module, its files read in root, and
// returns it with its roots described as Go values, and its bundle; ctx
// bounds its top-level code, as the time and memory limits do.
func (h *Host) loadModule(ctx context.Context, root *xstate.Root, file string, roots func(*goja.Runtime, *goja.Object) ([]goja.Value, error)) (*jsModule, []any, *bundled, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, nil, fmt.Errorf("%s: not loaded: %w", file, context.Cause(ctx))
	}
	if err := h.setup(); err != nil {
		return nil, nil, nil, err
	}
	b, diags := bundle(file, root, h.names.exports)
	if len(diags) > 0 {
		return nil, nil, nil, &xstate.LoadError{File: file, Diags: diags}
	}
	code, files := b.code, b.files
	compileErr := func(err error) error {
		return &xstate.LoadError{File: file, Diags: []xstate.Diagnostic{{File: file, Msg: "cannot compile the bundled module: " + err.Error(), Quotes: true}}}
	}
	in, err := instrument(rewriteSpreads(code, h.names), h.names)
	if err != nil {
		return nil, nil, nil, compileErr(err)
	}
	prog, err := goja.Compile(file, in.code, false)
	if err != nil {
		return nil, nil, nil, compileErr(err)
	}
	mod := &jsModule{file: file, files: files, prog: prog, prelude: h.prelude, hardenProg: h.hardenProg, clock: h.clock, plan: &h.plan, dog: h.watchdog(), limits: limitsFor(h.memory()), roots: roots, plainObjects: b.locks, console: h.Console, stateful: in.stateful}
	rt, described, err := mod.newRuntime(ctx)
	if err != nil {
		// The diagnostic names the file itself.
		msg := strings.TrimPrefix(err.Error(), file+": ")
		if advice := unavailableAdvice(msg); advice != "" {
			msg += " (" + advice + ")"
		}
		d := xstate.Diagnostic{File: file, Msg: msg}
		var ex *goja.Exception
		if errors.As(err, &ex) {
			d.File, d.Line, d.Column = thrownAt(ex, file, b.wd, files)
		}
		return nil, nil, nil, &xstate.LoadError{File: file, Diags: []xstate.Diagnostic{d}, Err: err}
	}
	mod.put(rt)
	return mod, described, b, nil
}

// thrownAt says where in the files a module was bundled from (files,
// absolute) the exception its top-level code threw was thrown: the file,
// line and column of the innermost frame that goja placed, through the
// bundle's source map, in one of them; file and no line when none is.
//
// goja names a mapped frame's file by the source map's path (relative
// to wd, where esbuild ran) joined to the module's folder, which is not
// the file's path unless the module is in wd: each file is known by the
// name goja gives it.
func thrownAt(ex *goja.Exception, file, wd string, files []string) (string, int, int) {
	known := map[string]string{}
	for _, f := range append(slices.Clone(files), file) { // the module last: named as it was given
		abs, err := filepath.Abs(f)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(wd, abs); err == nil && wd != "" {
			known[filepath.Join(filepath.Dir(file), filepath.ToSlash(rel))] = f
		}
	}
	for _, fr := range ex.Stack() {
		p := fr.Position()
		if p.Line <= 0 {
			continue
		}
		if f, ok := known[filepath.Clean(p.Filename)]; ok {
			return f, p.Line, p.Column
		}
	}
	return file, 0, 0
}

func isMarker(v goja.Value, kind string) bool {
	o, ok := v.(*goja.Object)
	if !ok {
		return false
	}
	k := o.Get(shimMark)
	return k != nil && k.String() == kind
}

// pickMachine finds the machine a module exports: its default export, or
// `machine`, or the only machine among its exports (as the oracle does).
func pickMachine(vm *goja.Runtime, exports *goja.Object) ([]goja.Value, error) {
	for _, name := range []string{"default", "machine"} {
		if v := exports.Get(name); isMarker(v, "machine") {
			return []goja.Value{v}, nil
		}
	}
	var found []goja.Value
	for _, k := range exports.Keys() {
		if v := exports.Get(k); isMarker(v, "machine") {
			found = append(found, v)
		}
	}
	if len(found) == 1 {
		return found, nil
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("%w (a machine module exports one: as its default export, as `machine`, or as its only machine export)", xstate.ErrNoMachine)
	}
	return nil, fmt.Errorf("the module must export exactly one machine (as its default export, as `machine`, or as its only machine export); it exports %d", len(found))
}

// Files lists the files the module was bundled from, as absolute paths
// (xstate.FilesHost).
func (m *jsModule) Files() []string { return m.files }

// pickImplementations finds the implementations a module exports: its
// default export, else the module itself ({guards, actions, actors,
// delays}).
func pickImplementations(vm *goja.Runtime, exports *goja.Object) ([]goja.Value, error) {
	if v := exports.Get("default"); v != nil && !goja.IsUndefined(v) {
		return []goja.Value{v}, nil
	}
	return []goja.Value{exports}, nil
}

// LoadMachine loads the machine a module exports (xstate.Modules): the
// module is bundled with the files it imports, each read through root,
// and run; names its code does not define are taken from base.
func (h *Host) LoadMachine(root *xstate.Root, file string, base interp.Implementations) (*interp.Machine, []xstate.Diagnostic, error) {
	return h.LoadMachineContext(context.Background(), root, file, base)
}

// LoadMachineContext is LoadMachine bounded by ctx
// (xstate.ContextModules): the module's top-level code is interrupted
// when ctx ends, and the load fails with an error that wraps
// interp.ErrStopped and ctx's cause.
func (h *Host) LoadMachineContext(ctx context.Context, root *xstate.Root, file string, base interp.Implementations) (*interp.Machine, []xstate.Diagnostic, error) {
	mod, roots, b, err := h.loadModule(ctx, root, file, pickMachine)
	if err != nil {
		return nil, nil, err
	}
	marker, ok := roots[0].(*jsMarker)
	if !ok || marker.kind != "machine" {
		return nil, nil, &xstate.LoadError{File: file, Diags: []xstate.Diagnostic{{File: file, Msg: "the module exports no machine"}}}
	}
	cfg, ok := marker.get("config").(*config.Object)
	if !ok {
		return nil, nil, &xstate.LoadError{File: file, Diags: []xstate.Diagnostic{{File: file, Msg: "createMachine() needs a config object"}}}
	}
	loc := (&configLocator{index: newBundleIndex(b, file)}).forConfig(cfg)
	r := &jsResolver{mod: mod, atLoad: true, loc: loc}
	impl, diags := r.implementations(marker.get("implementations"))
	if len(diags) > 0 {
		return nil, nil, &xstate.LoadError{File: file, Diags: diags}
	}
	m, warns, err := compile(file, cfg, r, config.Merge(base, impl))
	// The machine keeps no reference to the bundle's code.
	r.loc = nil
	return m, append(warns, h.codeWarnings(b, file)...), err
}

// codeWarnings are the warnings about a module's code: the globals it
// uses that machine code does not have (ioWarnings).
func (h *Host) codeWarnings(b *bundled, file string) []xstate.Diagnostic {
	if !b.unavailable {
		return nil
	}
	return ioWarnings(b, file, h.names)
}

// LoadImplementations loads a module whose default export is {guards,
// actions, actors, delays}, to give a JSON machine (xstate.Modules).
func (h *Host) LoadImplementations(root *xstate.Root, file string) (interp.Implementations, error) {
	return h.LoadImplementationsContext(context.Background(), root, file)
}

// LoadImplementationsContext is LoadImplementations bounded by ctx, as
// LoadMachineContext is (xstate.ContextModules).
func (h *Host) LoadImplementationsContext(ctx context.Context, root *xstate.Root, file string) (interp.Implementations, error) {
	impl, _, err := h.loadImplementations(ctx, root, file, false)
	return impl, err
}

// LoadImplementationsWarnings is LoadImplementationsContext that also
// returns the warnings about the module's code, as LoadMachineContext
// does (xstate.Modules has no place for them).
func (h *Host) LoadImplementationsWarnings(ctx context.Context, root *xstate.Root, file string) (interp.Implementations, []xstate.Diagnostic, error) {
	return h.loadImplementations(ctx, root, file, true)
}

func (h *Host) loadImplementations(ctx context.Context, root *xstate.Root, file string, warn bool) (interp.Implementations, []xstate.Diagnostic, error) {
	mod, roots, b, err := h.loadModule(ctx, root, file, pickImplementations)
	if err != nil {
		return interp.Implementations{}, nil, err
	}
	impl, diags := (&jsResolver{mod: mod, atLoad: true}).implementations(roots[0])
	if len(diags) > 0 {
		return interp.Implementations{}, nil, &xstate.LoadError{File: file, Diags: diags}
	}
	var warns []xstate.Diagnostic
	if warn {
		warns = h.codeWarnings(b, file)
	}
	return impl, warns, nil
}

// compile compiles a config a module built, its functions resolved by
// r (which locates its problems), as xstate compiles a JSON config.
func compile(file string, cfg *config.Object, r *jsResolver, impl interp.Implementations) (*interp.Machine, []xstate.Diagnostic, error) {
	m, warns, errs := config.Compile(file, cfg, r, impl)
	var index *bundleIndex
	if r.loc != nil {
		index = r.loc.index
	}
	if len(errs) > 0 {
		return nil, diagnostics(warns, index), &xstate.LoadError{File: file, Diags: diagnostics(errs, index)}
	}
	return m, diagnostics(warns, index), nil
}

// diagnostics converts the config reader's problems, with the text of
// the line of each that has one (from the bundle's sources, when index is
// not nil).
func diagnostics(ps []config.Problem, index *bundleIndex) []xstate.Diagnostic {
	if len(ps) == 0 {
		return nil
	}
	out := make([]xstate.Diagnostic, len(ps))
	files := map[string]bool{}
	for i, p := range ps {
		out[i] = xstate.Diagnostic{File: p.File, Line: p.Line, Column: p.Column, State: p.State, Msg: p.Msg, Warning: p.Warning}
	}
	if index == nil {
		return out
	}
	for _, d := range out {
		if d.Line > 0 && !files[d.File] {
			files[d.File] = true
			xstate.SetSources(out, d.File, []byte(index.content(d.File)))
		}
	}
	return out
}
