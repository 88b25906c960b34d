package xstate

import "github.com/stategate/stategate/interp"

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
