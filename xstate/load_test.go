package xstate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// write writes files under dir (a path ending in / is a folder).
func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const okModule = `import { createMachine } from 'xstate';
export default createMachine({ id: 'ok', initial: 'a', states: { a: {} } });
`

// TestDeeplyNestedJSONRefused checks that a JSON machine nested deeper
// than the parsers can take (they would overflow the Go stack, which ends
// the process) is refused with an error naming the file, loaded or parsed.
func TestDeeplyNestedJSONRefused(t *testing.T) {
	dir := t.TempDir()
	const n = 1_000_000
	deep := `{"id": "deep", "context": {"a": ` + strings.Repeat("[", n) + strings.Repeat("]", n) + "}}"
	write(t, dir, map[string]string{"deep.json": deep})
	_, _, err := (&Loader{}).Load(filepath.Join(dir, "deep.json"))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nests too deeply") || !strings.Contains(err.Error(), "deep.json") {
		t.Errorf("loading deep.json: %v", err)
	}
	_, _, err = ParseJSON("deep.json", []byte(deep))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nests too deeply") || !strings.Contains(err.Error(), "deep.json") {
		t.Errorf("parsing deep.json: %v", err)
	}
}

// TestModulesNeedModules checks that a Loader without Modules refuses a
// module, and the implementations module of a JSON machine, with an error
// that names the file and says why.
func TestModulesNeedModules(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"m.mjs":        okModule,
		"door.json":    `{"id":"door","initial":"shut","states":{"shut":{}}}`,
		"door.impl.ts": `export default { guards: {} };`,
		"plain.json":   `{"id":"plain","initial":"a","states":{"a":{}}}`,
	})
	for _, name := range []string{"m.mjs", "door.json"} {
		_, _, err := (&Loader{}).Load(filepath.Join(dir, name))
		if !errors.Is(err, ErrNoModules) || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "runs no JavaScript") {
			t.Errorf("%s: %v, want ErrNoModules", name, err)
		}
	}
	if _, _, err := (&Loader{}).Load(filepath.Join(dir, "plain.json")); err != nil {
		t.Errorf("plain.json: %v", err)
	}
}
