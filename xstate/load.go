package xstate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stategate/stategate/internal/config"
	"github.com/stategate/stategate/interp"
)

// Loader loads machine files: JSON configs, with the Go implementations
// of its Registry, and, given Modules, JavaScript and TypeScript modules
// (machines, and the implementations modules beside JSON machines). The
// zero Loader loads JSON machines alone, each read in its own folder.
type Loader struct {
	// Registry supplies Go implementations for names a machine's own code
	// does not define (see Registry).
	Registry *Registry
	// Root is the folder machine files are read from (the machines
	// folder): a module may import only files inside it, and a symbolic
	// link is followed only to a file inside it. "" makes each file's own
	// folder its root.
	Root string
	// Modules loads JS and TS modules: machines, and the implementations
	// modules beside JSON machines (package xstate/js provides them). nil:
	// such a file fails to load, with an error wrapping ErrNoModules.
	Modules Modules
}

// Modules loads the machines and implementations written as JavaScript
// or TypeScript modules, for a Loader. Package xstate/js provides them.
type Modules interface {
	// LoadMachine loads the machine a module exports. Every file is read
	// through root (the module, and the files it imports); the names the
	// module's code does not define are taken from base (the Loader's
	// Registry). The error of a module that exports no machine wraps
	// ErrNoMachine.
	LoadMachine(root *Root, file string, base interp.Implementations) (*interp.Machine, []Diagnostic, error)
	// LoadImplementations loads a module whose default export is {guards,
	// actions, actors, delays}, to give a JSON machine (as XState's
	// machine.provide()), its files read through root.
	LoadImplementations(root *Root, file string) (interp.Implementations, error)
}

// ContextModules are Modules whose loads a context bounds: a module's
// top-level code stops when the context ends, and the load fails with an
// error that says so. Loader.LoadContext uses them when its Modules are
// (package xstate/js's Host is).
type ContextModules interface {
	Modules
	LoadMachineContext(ctx context.Context, root *Root, file string, base interp.Implementations) (*interp.Machine, []Diagnostic, error)
	LoadImplementationsContext(ctx context.Context, root *Root, file string) (interp.Implementations, error)
}

// WarningModules are Modules whose implementations modules' loads give
// warnings about their code too (package xstate/js's Host: a global that
// machine code lacks, such as fetch), which a JSON machine's load reports
// as its own.
type WarningModules interface {
	LoadImplementationsWarnings(ctx context.Context, root *Root, file string) (interp.Implementations, []Diagnostic, error)
}

// ErrNoMachine is wrapped by the error of a module that exports no
// machine: a helper module that machines import, rather than a machine
// with an error.
var ErrNoMachine = errors.New("the module exports no machine")

// ErrNoModules is wrapped by the error of a JS or TS module loaded by a
// Loader with no Modules.
var ErrNoModules = errors.New("this loader runs no JavaScript (its Modules are not set; package xstate/js provides them)")

// implExts are the extensions of implementations modules, in the order
// they are looked for beside a JSON machine.
var implExts = []string{".impl.ts", ".impl.mts", ".impl.js", ".impl.mjs"}

// ImplementationsFile returns the implementations module beside a JSON
// machine (NAME.json gives NAME.impl.ts, .impl.mts, .impl.js or
// .impl.mjs), or "" when there is none.
func ImplementationsFile(machineFile string) string {
	stem := strings.TrimSuffix(machineFile, filepath.Ext(machineFile))
	for _, ext := range implExts {
		if info, err := os.Stat(stem + ext); err == nil && !info.IsDir() {
			return stem + ext
		}
	}
	return ""
}

// Load loads a machine file by its extension: a JSON config, with the
// implementations of a NAME.impl.ts beside it when there is one, or a JS
// or TS module. Names the machine's own code does not define are taken
// from the Loader's Registry.
//
// Every file is read as ReadFile reads one, inside the Loader's Root (see
// Root): a file that is not regular, too large, nested too deeply, or
// outside the root fails to load, with an error that names it.
func (l *Loader) Load(path string) (*interp.Machine, []Diagnostic, error) {
	return l.LoadContext(context.Background(), path)
}

// LoadContext is Load bounded by ctx: when ctx ends, the JS or TS
// modules loading (a machine, or the implementations beside a JSON
// machine) stop, if the Loader's Modules are ContextModules, and the load
// fails. A reload can so be abandoned, at shutdown.
func (l *Loader) LoadContext(ctx context.Context, path string) (*interp.Machine, []Diagnostic, error) {
	root, err := l.root(path)
	if err != nil {
		return nil, nil, err
	}
	return l.loadIn(ctx, root, path)
}

func (l *Loader) loadIn(ctx context.Context, root *Root, path string) (*interp.Machine, []Diagnostic, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		cfg, err := readConfig(root, path)
		if err != nil {
			return nil, nil, err
		}
		impl := interp.Implementations{}
		var implWarns []Diagnostic
		if f := ImplementationsFile(path); f != "" {
			if wm, ok := l.Modules.(WarningModules); ok {
				impl, implWarns, err = wm.LoadImplementationsWarnings(ctx, root, f)
			} else {
				impl, err = l.loadImplementationsIn(ctx, root, f)
			}
			if err != nil {
				return nil, implWarns, err
			}
		}
		m, warns, err := compile(path, cfg, nil, l.withRegistry(impl))
		return m, append(implWarns, warns...), err
	case ".js", ".mjs", ".ts", ".mts", ".cjs", ".cts":
		if _, err := os.Stat(path); err != nil {
			return nil, nil, err
		}
		return l.loadModuleIn(ctx, root, path)
	}
	return nil, nil, &LoadError{File: path, Diags: []Diagnostic{{File: path, Msg: "not a machine file (.json, .js, .mjs, .ts or .mts)"}}}
}

// LoadModule loads a JS or TS machine module.
func (l *Loader) LoadModule(file string) (*interp.Machine, []Diagnostic, error) {
	root, err := l.root(file)
	if err != nil {
		return nil, nil, err
	}
	return l.loadModuleIn(context.Background(), root, file)
}

func (l *Loader) loadModuleIn(ctx context.Context, root *Root, file string) (*interp.Machine, []Diagnostic, error) {
	if l.Modules == nil {
		return nil, nil, noModules(file)
	}
	if cm, ok := l.Modules.(ContextModules); ok {
		return cm.LoadMachineContext(ctx, root, file, l.withRegistry(interp.Implementations{}))
	}
	return l.Modules.LoadMachine(root, file, l.withRegistry(interp.Implementations{}))
}

// LoadImplementations loads a module whose default export is {guards,
// actions, actors, delays}, to give a JSON machine (machine.provide()).
func (l *Loader) LoadImplementations(file string) (interp.Implementations, error) {
	root, err := l.root(file)
	if err != nil {
		return interp.Implementations{}, err
	}
	return l.loadImplementationsIn(context.Background(), root, file)
}

func (l *Loader) loadImplementationsIn(ctx context.Context, root *Root, file string) (interp.Implementations, error) {
	if l.Modules == nil {
		return interp.Implementations{}, noModules(file)
	}
	if cm, ok := l.Modules.(ContextModules); ok {
		return cm.LoadImplementationsContext(ctx, root, file)
	}
	return l.Modules.LoadImplementations(root, file)
}

// noModules is the error of a module a Loader without Modules is given.
func noModules(file string) error {
	return &LoadError{File: file, Diags: []Diagnostic{{File: file, Msg: "cannot load a JavaScript or TypeScript module: " + ErrNoModules.Error()}}, Err: ErrNoModules}
}

// withRegistry adds the registry's implementations under the machine's
// own: a machine's code comes first, the Go table fills in the rest.
func (l *Loader) withRegistry(impl interp.Implementations) interp.Implementations {
	if l.Registry == nil {
		return impl
	}
	return config.Merge(l.Registry.implementations(), impl)
}

// readConfig reads and decodes a JSON config in root.
func readConfig(root *Root, path string) (*config.Object, error) {
	data, err := root.ReadFile(path)
	if err != nil {
		return nil, &LoadError{File: path, Diags: []Diagnostic{{File: path, Msg: fileError(path, err)}}, Err: err}
	}
	return decodeConfig(path, data)
}

// fileError says why a file cannot be read, without repeating its name
// first (a diagnostic names it).
func fileError(path string, err error) string {
	return strings.TrimPrefix(err.Error(), path+": ")
}

// FilesHost is an interp.Host whose code was read from files (a module,
// and the files it imports): Files lists them, as absolute paths.
type FilesHost interface {
	interp.Host
	Files() []string
}

// Sources lists the files a machine loaded from file was built from: the
// file, its implementations module, and the files their code was read
// from (when the machine's Host is a FilesHost).
func Sources(file string, m *interp.Machine) []string {
	out := []string{file}
	if f := ImplementationsFile(file); f != "" {
		out = append(out, f)
	}
	if h, ok := m.Impl.Host.(FilesHost); ok {
		out = append(out, h.Files()...)
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

// Parse reads a JSON config from memory, as Load reads a JSON machine
// file, with the Loader's Registry for its implementations: a machine
// made in memory, no file read. name names it in diagnostics.
func (l *Loader) Parse(name string, data []byte) (*interp.Machine, []Diagnostic, error) {
	root, err := decodeConfig(name, data)
	if err != nil {
		return nil, nil, err
	}
	return compile(name, root, nil, l.withRegistry(interp.Implementations{}))
}
