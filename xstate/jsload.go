package xstate

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"
	"github.com/evanw/esbuild/pkg/api"

	"github.com/stategate/stategate/internal/config"
	"github.com/stategate/stategate/interp"
)

// DefaultTimeout is how long one call into a machine's JavaScript (a
// guard, an action, an expression) may run before it is interrupted.
const DefaultTimeout = time.Second

// Loader loads machine files: JSON configs, and JS/TS modules run in
// goja. The zero Loader is ready to use.
type Loader struct {
	// Registry supplies Go implementations for names a machine's own code
	// does not define (see Registry).
	Registry *Registry
	// Root is the folder machine files are read from (the machines
	// folder): a module may import only files inside it, and a symbolic
	// link is followed only to a file inside it. "" makes each file's own
	// folder its root.
	Root string
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

	once    sync.Once
	prelude *goja.Program
	err     error

	dogOnce sync.Once
	dog     *watchdog // bounds the JavaScript of the loader's modules
}

// watchdog returns the loader's watchdog, made with its settings as they
// are at the first module's load.
func (l *Loader) watchdog() *watchdog {
	l.dogOnce.Do(func() { l.dog = newWatchdog(l.timeout(), l.memory()) })
	return l.dog
}

func (l *Loader) memory() int64 {
	if l.Memory == 0 {
		return DefaultMemory
	}
	return l.Memory
}

func (l *Loader) timeout() time.Duration {
	if l.Timeout > 0 {
		return l.Timeout
	}
	return DefaultTimeout
}

// preludeProgram compiles the shim as a script that publishes its API as
// the global __sgXState (enqueueActions makes actions with it).
func (l *Loader) preludeProgram() (*goja.Program, error) {
	l.once.Do(func() {
		res := api.Transform(shimSource, api.TransformOptions{
			Format: api.FormatIIFE, GlobalName: "__sgXState", Target: api.ES2017, Loader: api.LoaderJS,
		})
		if len(res.Errors) > 0 {
			l.err = fmt.Errorf("the xstate shim: %s", res.Errors[0].Text)
			return
		}
		l.prelude, l.err = goja.Compile("xstate-shim.js", string(res.Code), false)
	})
	return l.prelude, l.err
}

// loadModule bundles and evaluates a module, its files read in root, and
// returns it with its roots described as Go values.
func (l *Loader) loadModule(root *Root, file string, roots func(*goja.Runtime, *goja.Object) ([]goja.Value, error)) (*jsModule, []any, error) {
	b, diags := bundle(file, root)
	if len(diags) > 0 {
		return nil, nil, &LoadError{File: file, Diags: diags}
	}
	code, files := b.code, b.files
	prelude, err := l.preludeProgram()
	if err != nil {
		return nil, nil, err
	}
	prog, err := goja.Compile(file, rewriteSpreads(code), false)
	if err != nil {
		return nil, nil, &LoadError{File: file, Diags: []Diagnostic{{File: file, Msg: "cannot compile the bundled module: " + err.Error(), quotes: true}}}
	}
	mod := &jsModule{file: file, files: files, prog: prog, prelude: prelude, dog: l.watchdog(), limits: limitsFor(l.memory()), roots: roots, plainObjects: b.locks, console: l.Console}
	rt, described, err := mod.newRuntime()
	if err != nil {
		// The diagnostic names the file itself.
		msg := strings.TrimPrefix(err.Error(), file+": ")
		return nil, nil, &LoadError{File: file, Diags: []Diagnostic{{File: file, Msg: msg}}, Err: err}
	}
	mod.put(rt)
	return mod, described, nil
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
		return nil, fmt.Errorf("%w (a machine module exports one: as its default export, as `machine`, or as its only machine export)", ErrNoMachine)
	}
	return nil, fmt.Errorf("the module must export exactly one machine (as its default export, as `machine`, or as its only machine export); it exports %d", len(found))
}

// ErrNoMachine is wrapped by the error of a module that exports no
// machine: a helper module that machines import, rather than a machine
// with an error.
var ErrNoMachine = errors.New("the module exports no machine")

// Sources lists the files a machine loaded from file was built from: the
// file, its implementations module, and the files they import.
func Sources(file string, m *interp.Machine) []string {
	out := []string{file}
	if f := ImplementationsFile(file); f != "" {
		out = append(out, f)
	}
	if mod, ok := m.Impl.Host.(*jsModule); ok {
		out = append(out, mod.files...)
	}
	seen := map[string]bool{}
	var uniq []string
	for _, f := range out {
		abs, err := filepath.Abs(f)
		if err != nil {
			abs = f
		}
		if !seen[abs] {
			seen[abs] = true
			uniq = append(uniq, abs)
		}
	}
	sort.Strings(uniq)
	return uniq
}

// pickImplementations finds the implementations a module exports: its
// default export, else the module itself ({guards, actions, actors,
// delays}).
func pickImplementations(vm *goja.Runtime, exports *goja.Object) ([]goja.Value, error) {
	if v := exports.Get("default"); v != nil && !goja.IsUndefined(v) {
		return []goja.Value{v}, nil
	}
	return []goja.Value{exports}, nil
}

// LoadModule loads a JS or TS machine module.
func (l *Loader) LoadModule(file string) (*interp.Machine, []Diagnostic, error) {
	root, err := l.root(file)
	if err != nil {
		return nil, nil, err
	}
	return l.loadModuleIn(root, file)
}

func (l *Loader) loadModuleIn(root *Root, file string) (*interp.Machine, []Diagnostic, error) {
	mod, roots, err := l.loadModule(root, file, pickMachine)
	if err != nil {
		return nil, nil, err
	}
	marker, ok := roots[0].(*jsMarker)
	if !ok || marker.kind != "machine" {
		return nil, nil, &LoadError{File: file, Diags: []Diagnostic{{File: file, Msg: "the module exports no machine"}}}
	}
	r := &jsResolver{mod: mod}
	cfg, ok := marker.get("config").(*config.Object)
	if !ok {
		return nil, nil, &LoadError{File: file, Diags: []Diagnostic{{File: file, Msg: "createMachine() needs a config object"}}}
	}
	impl, diags := r.implementations(marker.get("implementations"))
	if len(diags) > 0 {
		return nil, nil, &LoadError{File: file, Diags: diags}
	}
	m, warns, err := compile(file, cfg, r, l.withRegistry(impl))
	return m, warns, err
}

// LoadImplementations loads a module whose default export is {guards,
// actions, actors, delays}, to give a JSON machine (machine.provide()).
func (l *Loader) LoadImplementations(file string) (interp.Implementations, error) {
	root, err := l.root(file)
	if err != nil {
		return interp.Implementations{}, err
	}
	return l.loadImplementationsIn(root, file)
}

func (l *Loader) loadImplementationsIn(root *Root, file string) (interp.Implementations, error) {
	mod, roots, err := l.loadModule(root, file, pickImplementations)
	if err != nil {
		return interp.Implementations{}, err
	}
	impl, diags := (&jsResolver{mod: mod}).implementations(roots[0])
	if len(diags) > 0 {
		return interp.Implementations{}, &LoadError{File: file, Diags: diags}
	}
	return impl, nil
}

// withRegistry adds the registry's implementations under the machine's
// own: a machine's JS comes first, the Go table fills in the rest.
func (l *Loader) withRegistry(impl interp.Implementations) interp.Implementations {
	if l.Registry == nil {
		return impl
	}
	base := l.Registry.implementations()
	base.Host = nil
	merged := base
	merged.Guards = mergeOver(base.Guards, impl.Guards)
	merged.Actions = mergeOver(base.Actions, impl.Actions)
	merged.Actors = mergeOver(base.Actors, impl.Actors)
	merged.Delays = mergeOver(base.Delays, impl.Delays)
	merged.Host = impl.Host
	return merged
}

func mergeOver[V any](base, over map[string]V) map[string]V {
	if len(base) == 0 {
		return over
	}
	out := make(map[string]V, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}
