//go:build unix

package xstate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

func fifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("cannot make a FIFO: %v", err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

const okModule = `import { createMachine } from 'xstate';
export default createMachine({ id: 'ok', initial: 'a', states: { a: {} } });
`

// TestReadOnlyRegularFiles checks that only regular files of at most
// MaxFileSize are read, and that a FIFO or a device is refused at once,
// not waited on or read without end.
func TestReadOnlyRegularFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{"ok.json": `{"id":"ok"}`})
	fifo(t, filepath.Join(dir, "pipe.json"))
	symlink(t, "/dev/zero", filepath.Join(dir, "zero.json"))
	if err := os.Mkdir(filepath.Join(dir, "folder.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(dir, "big.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(MaxFileSize + 1); err != nil { // sparse: costs no disk
		t.Fatal(err)
	}
	big.Close()
	for name, want := range map[string]error{
		"ok.json":     nil,
		"pipe.json":   ErrNotRegular,
		"zero.json":   ErrNotRegular,
		"folder.json": ErrNotRegular,
		"big.json":    ErrTooLarge,
	} {
		start := time.Now()
		_, err := ReadFile(filepath.Join(dir, name))
		if !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %v", name, d)
		}
		// Loading it as a machine fails the same way, with the file named
		// (a link to /dev/zero is outside the folder, first).
		if name == "zero.json" {
			want = ErrOutsideRoot
		}
		_, _, err = (&Loader{}).Load(filepath.Join(dir, name))
		if want != nil && (!errors.Is(err, want) || !strings.Contains(err.Error(), name)) {
			t.Errorf("loading %s: %v, want %v naming the file", name, err, want)
		}
	}
}

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
