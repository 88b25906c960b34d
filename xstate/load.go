package xstate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/stategate/stategate/internal/config"
	"github.com/stategate/stategate/interp"
)

// ParseJSON reads an XState v5 JSON config (what visual editors export and
// createMachine accepts) and compiles it. file names the source in
// diagnostics. It returns the warnings even when it fails; the error is a
// *LoadError listing every problem found.
func ParseJSON(file string, data []byte) (*interp.Machine, []Diagnostic, error) {
	root, err := decodeConfig(file, data)
	if err != nil {
		return nil, nil, err
	}
	return compile(file, root, nil, interp.Implementations{})
}

// ParseDef reads an XState v5 JSON config into a definition, without
// compiling it.
func ParseDef(file string, data []byte) (*interp.MachineDef, error) {
	root, err := decodeConfig(file, data)
	if err != nil {
		return nil, err
	}
	def, errs := config.Read(file, root)
	if len(errs) > 0 {
		return nil, &LoadError{File: file, Diags: diagnostics(errs)}
	}
	return def, nil
}

// decodeConfig decodes a JSON config, refusing one nested too deeply for
// the parsers (see config.CheckNesting).
func decodeConfig(file string, data []byte) (*config.Object, error) {
	if err := config.CheckNesting(data); err != nil {
		return nil, &LoadError{File: file, Diags: []Diagnostic{{File: file, Msg: err.Error()}}}
	}
	v, err := config.Decode(data)
	if err != nil {
		d := Diagnostic{File: file, Msg: "invalid JSON: " + err.Error()}
		var pe *config.PosError
		if errors.As(err, &pe) {
			d.Line = pe.Line
			d.Msg = fmt.Sprintf("invalid JSON at column %d: %v", pe.Col, pe.Err)
		}
		return nil, &LoadError{File: file, Diags: []Diagnostic{d}}
	}
	root, ok := v.(*config.Object)
	if !ok {
		return nil, &LoadError{File: file, Diags: []Diagnostic{{File: file, Line: 1, Msg: "a machine config must be a JSON object"}}}
	}
	return root, nil
}

// compile reads a decoded config and compiles it with implementations.
func compile(file string, root *config.Object, fns config.Funcs, impl interp.Implementations) (*interp.Machine, []Diagnostic, error) {
	m, warns, errs := config.Compile(file, root, fns, impl)
	if len(errs) > 0 {
		return nil, diagnostics(warns), &LoadError{File: file, Diags: diagnostics(errs)}
	}
	return m, diagnostics(warns), nil
}

// diagnostics converts the config reader's problems.
func diagnostics(ps []config.Problem) []Diagnostic {
	if len(ps) == 0 {
		return nil
	}
	out := make([]Diagnostic, len(ps))
	for i, p := range ps {
		out[i] = Diagnostic{File: p.File, Line: p.Line, State: p.State, Msg: p.Msg, Warning: p.Warning}
	}
	return out
}

// MissingDiagnostics lists the named guards, actions, actors and delays of
// a machine that have no implementation. Guards, actors and delays are
// errors for a served machine; actions are warnings (XState skips them).
func MissingDiagnostics(file string, m *interp.Machine) []Diagnostic {
	var out []Diagnostic
	for _, u := range m.Unresolved() {
		d := Diagnostic{File: file, State: u.State, Warning: u.Kind == "action"}
		if d.Warning {
			d.Msg = fmt.Sprintf("action %q has no implementation; XState skips it", u.Name)
		} else {
			d.Msg = fmt.Sprintf("%s %q has no implementation", u.Kind, u.Name)
		}
		out = append(out, d)
	}
	return out
}

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
	root, err := l.root(path)
	if err != nil {
		return nil, nil, err
	}
	return l.loadIn(root, path)
}

func (l *Loader) loadIn(root *Root, path string) (*interp.Machine, []Diagnostic, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		cfg, err := readConfig(root, path)
		if err != nil {
			return nil, nil, err
		}
		impl := interp.Implementations{}
		if f := ImplementationsFile(path); f != "" {
			if impl, err = l.loadImplementationsIn(root, f); err != nil {
				return nil, nil, err
			}
		}
		return compile(path, cfg, nil, l.withRegistry(impl))
	case ".js", ".mjs", ".ts", ".mts", ".cjs", ".cts":
		if _, err := os.Stat(path); err != nil {
			return nil, nil, err
		}
		return l.loadModuleIn(root, path)
	}
	return nil, nil, &LoadError{File: path, Diags: []Diagnostic{{File: path, Msg: "not a machine file (.json, .js, .mjs, .ts or .mts)"}}}
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
