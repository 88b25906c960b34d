//go:build unix

package js

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stategate/stategate/xstate"
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

// TestModuleFilesOnlyRegular checks that a module, or an implementations
// module, that is a FIFO is refused at once, not waited on.
func TestModuleFilesOnlyRegular(t *testing.T) {
	dir := t.TempDir()
	// A module, or an implementations module, that is a FIFO.
	fifo(t, filepath.Join(dir, "pipe.mjs"))
	write(t, dir, map[string]string{"impl.json": `{"id":"impl","initial":"a","states":{"a":{}}}`})
	fifo(t, filepath.Join(dir, "impl.impl.ts"))
	for _, name := range []string{"pipe.mjs", "impl.json"} {
		if _, _, err := (&xstate.Loader{Modules: &Host{}}).Load(filepath.Join(dir, name)); !errors.Is(err, xstate.ErrInvalid) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("loading %s: %v, want not a regular file", name, err)
		}
	}
}

// TestImportsStayInRoot checks that a module reads only files inside its
// Loader's root: relative imports that climb out of it, absolute paths
// outside it and symbolic links that lead out of it are refused, with an
// error naming the file; files and links inside are read.
func TestImportsStayInRoot(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "machines")
	write(t, base, map[string]string{
		"secret/creds.json":       `{"password": "hunter2"}`,
		"secret/steal.js":         `export const password = 'hunter2';`,
		"machines/lib/helper.mjs": `export const limit = 10;`,
		"machines/sub/uses-parent.mjs": `import { createMachine } from 'xstate';
import { limit } from '../lib/helper.mjs';
export default createMachine({ id: 'parent', context: { limit }, initial: 'a', states: { a: {} } });
`,
		"machines/relative.mjs": `import { createMachine } from 'xstate';
import creds from '../secret/creds.json';
export default createMachine({ id: 'r', context: { creds }, initial: 'a', states: { a: {} } });
`,
		"machines/absolute.mjs": `import { createMachine } from 'xstate';
import { password } from '` + filepath.Join(base, "secret", "steal.js") + `';
export default createMachine({ id: 'a', context: { password }, initial: 'a', states: { a: {} } });
`,
		"machines/via-link.mjs": `import { createMachine } from 'xstate';
import creds from './creds.json';
export default createMachine({ id: 'l', context: { creds }, initial: 'a', states: { a: {} } });
`,
		"machines/inside-link.mjs": `import { createMachine } from 'xstate';
import { limit } from './helper-link.mjs';
export default createMachine({ id: 'i', context: { limit }, initial: 'a', states: { a: {} } });
`,
		"machines/absolute-inside.mjs": `import { createMachine } from 'xstate';
import { limit } from '` + filepath.Join(root, "lib", "helper.mjs") + `';
export default createMachine({ id: 'ai', context: { limit }, initial: 'a', states: { a: {} } });
`,
		"outside.json": `{"id": "outside", "initial": "a", "states": {"a": {}}}`,
	})
	symlink(t, filepath.Join(base, "secret", "creds.json"), filepath.Join(root, "creds.json"))
	symlink(t, filepath.Join(root, "lib", "helper.mjs"), filepath.Join(root, "helper-link.mjs"))
	symlink(t, filepath.Join(base, "outside.json"), filepath.Join(root, "linked-machine.json"))
	l := &xstate.Loader{Root: root, Modules: &Host{}}
	for name, refused := range map[string]bool{
		"sub/uses-parent.mjs": false,
		"inside-link.mjs":     false,
		"absolute-inside.mjs": false,
		"relative.mjs":        true,
		"absolute.mjs":        true,
		"via-link.mjs":        true,
		"linked-machine.json": true,
	} {
		m, _, err := l.Load(filepath.Join(root, name))
		switch {
		case refused && (!errors.Is(err, xstate.ErrInvalid) || !strings.Contains(err.Error(), "outside the machines folder")):
			t.Errorf("%s: %v, want it refused for reading outside the folder", name, err)
		case refused && strings.Contains(err.Error(), "hunter2"):
			t.Errorf("%s: the error quotes the file: %v", name, err)
		case !refused && err != nil:
			t.Errorf("%s: %v", name, err)
		case !refused && m == nil:
			t.Errorf("%s: no machine", name)
		}
	}
	// Without a Root, a file's own folder is its root.
	if _, _, err := (&xstate.Loader{Modules: &Host{}}).Load(filepath.Join(root, "sub", "uses-parent.mjs")); !errors.Is(err, xstate.ErrInvalid) {
		t.Errorf("uses-parent.mjs in its own folder: %v, want refused", err)
	}
}

// TestErrorsForClientsQuoteNoFile checks that a load error, as MCP
// clients are shown it, has no line of the file and nothing esbuild
// quotes of it, while the log's form keeps them.
func TestErrorsForClientsQuoteNoFile(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"notes.txt": "the password is hunter2\n",
		"text.mjs": `import { createMachine } from 'xstate';
import notes from './notes.txt';
export default createMachine({ id: 't', context: { notes }, initial: 'a', states: { a: {} } });
`,
		"creds.json": "{\"password\": \"hunter2\" hunter3}\n",
		"json.mjs": `import { createMachine } from 'xstate';
import creds from './creds.json';
export default createMachine({ id: 'j', context: { creds }, initial: 'a', states: { a: {} } });
`,
		"syntax.ts": "import { createMachine } from 'xstate';\nconst secret = 'hunter2' hunter3;\nexport default createMachine({ id: 's' });\n",
	})
	for _, name := range []string{"text.mjs", "json.mjs", "syntax.ts"} {
		_, _, err := (&xstate.Loader{Modules: &Host{}}).Load(filepath.Join(dir, name))
		if err == nil {
			t.Fatalf("%s loaded", name)
		}
		public := xstate.PublicError(err)
		if strings.Contains(public, "hunter") {
			t.Errorf("%s: the error for clients quotes the file: %s", name, public)
		}
		if !strings.Contains(public, ":") || public == "" {
			t.Errorf("%s: the error for clients says nothing: %q", name, public)
		}
		t.Logf("%s: log: %v; clients: %s", name, err, public)
	}
	// The log's form still shows the line, for the file's author.
	_, _, err := (&xstate.Loader{Modules: &Host{}}).Load(filepath.Join(dir, "syntax.ts"))
	if !strings.Contains(err.Error(), "hunter3") {
		t.Errorf("the log's error does not show the line: %v", err)
	}
}

// TestUnusedForbiddenImportFails checks that an import of a package or a
// Node built-in fails at load even when the module does not use it (as
// TypeScript elides unused imports), with a hint for an import of types;
// an `import type` is fine.
func TestUnusedForbiddenImportFails(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"unused.ts": `import * as fs from 'node:fs';
import { createMachine } from 'xstate';
export default createMachine({ id: 'u', initial: 'a', states: { a: {} } });
`,
		"types.ts": `import type { Stats } from 'node:fs';
import { createMachine, type AnyActorRef, ActorRefFrom } from 'xstate';
const s: Stats | null = null;
export default createMachine({ id: 't', initial: 'a', states: { a: {} } });
`,
	})
	_, _, err := (&xstate.Loader{Modules: &Host{}}).Load(filepath.Join(dir, "unused.ts"))
	if !errors.Is(err, xstate.ErrInvalid) || !strings.Contains(err.Error(), `cannot import "node:fs"`) || !strings.Contains(err.Error(), "import type") {
		t.Errorf("unused.ts: %v, want the import refused with the import type hint", err)
	}
	if _, _, err := (&xstate.Loader{Modules: &Host{}}).Load(filepath.Join(dir, "types.ts")); err != nil {
		t.Errorf("types.ts: %v", err)
	}
}

// TestDeeplyNestedFilesRefused checks that a module nested deeper
// than the parsers can take (they would overflow the Go stack, which ends
// the process) is refused with an error naming the line.
func TestDeeplyNestedFilesRefused(t *testing.T) {
	dir := t.TempDir()
	const n = 1_000_000
	write(t, dir, map[string]string{
		"parens.mjs": "export default " + strings.Repeat("(", n) + "1" + strings.Repeat(")", n) + ";\n",
		"bangs.mjs":  "export default " + strings.Repeat("!", n) + "1;\n",
		"assign.mjs": "let a; export default " + strings.Repeat("a=", n) + "1;\n",
		"elses.mjs":  "let a; " + strings.Repeat("if (a) a = 1; else ", n/10) + "a = 2;\n",
		"template.mjs": "import { createMachine } from 'xstate';\nconst s = `a ${ `b ${ 1 + (2) } c` } d`;\n" +
			"export default createMachine({ id: 'tpl', context: { s }, initial: 'a', states: { a: {} } });\n",
	})
	for _, name := range []string{"parens.mjs", "bangs.mjs", "assign.mjs", "elses.mjs"} {
		_, _, err := (&xstate.Loader{Modules: &Host{}}).Load(filepath.Join(dir, name))
		if !errors.Is(err, xstate.ErrInvalid) || !strings.Contains(err.Error(), "nests too deeply") || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Templates, strings and comments are read as such.
	if _, _, err := (&xstate.Loader{Modules: &Host{}}).Load(filepath.Join(dir, "template.mjs")); err != nil {
		t.Errorf("template.mjs: %v", err)
	}
}
