package xstate

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/stategate/stategate/internal/config"
	"github.com/stategate/stategate/interp"
)

// The size limits of a machine, checked as its config is read (a JSON
// config's, or the object a module built), before the compile, whose time
// and memory grow with the square of a machine's size: a machine over
// either fails to load with an error that names the limit, the file, and
// the line and state where it was crossed.
const (
	// MaxStates bounds a machine's state nodes, its root included.
	MaxStates = config.MaxStates
	// MaxTransitions bounds a machine's transitions (each of on, always,
	// after, onDone and the invoked actors' handlers).
	MaxTransitions = config.MaxTransitions
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
			d.Line, d.Column = pe.Line, pe.Col
			d.Msg = "invalid JSON: " + pe.Err.Error()
			d.SetSource(data)
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
// Its diagnostics name the line and column of each problem; check quotes
// the line (quoteSources), the server's log does not.
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
		out[i] = Diagnostic{File: p.File, Line: p.Line, Column: p.Column, State: p.State, Msg: p.Msg, Warning: p.Warning}
	}
	return out
}

// MissingDiagnostics lists the named guards, actions, actors and delays of
// a machine that have no implementation, each where the machine's source
// names it when that is known. Guards, actors and delays are errors for a
// served machine; actions are warnings (XState skips them).
func MissingDiagnostics(file string, m *interp.Machine) []Diagnostic {
	var out []Diagnostic
	for _, u := range m.Unresolved() {
		d := Diagnostic{File: cmp.Or(u.File, file), Line: u.Line, Column: u.Column, State: u.State, Warning: u.Kind == "action"}
		if d.Warning {
			d.Msg = fmt.Sprintf("action %q has no implementation; XState skips it", u.Name)
		} else {
			d.Msg = fmt.Sprintf("%s %q has no implementation", u.Kind, u.Name)
		}
		out = append(out, d)
	}
	return out
}
