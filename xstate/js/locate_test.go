package js

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stategate/stategate/internal/config"
	"github.com/stategate/stategate/xstate"
)

// writeModules writes files under dir, and returns the Root of dir.
func writeModules(t *testing.T, dir string, files map[string]string) *xstate.Root {
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
	root, err := xstate.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// posOf returns the line and column (from 1, in bytes) of the first
// occurrence of needle in src.
func posOf(t *testing.T, src, needle string) (int, int) {
	t.Helper()
	i := strings.Index(src, needle)
	if i < 0 || strings.Count(src, needle) != 1 {
		t.Fatalf("%q is not once in the source", needle)
	}
	line := strings.Count(src[:i], "\n") + 1
	return line, i - (strings.LastIndexByte(src[:i], '\n') + 1) + 1
}

const locateParent = `import { createMachine } from 'xstate';
import { part, base } from './part';

const idle = {
  entry: 'hello',
  on: { GO: [{ guard: 'first', target: 'busy' }, { guard: 'second', target: 'done' }] },
};

export default createMachine({
  id: 'parent',
  initial: 'idle',
  states: {
    idle,
    busy: { description: 'café ☕ 😀', onEntry: 'x', "quoted-key": 1, 7: {} },
    spread: { ...base, on: { NEXT: 'idle' } },
    shared: part,
    deep: { initial: 'a', states: { a: { states: { b: { type: 'bogus' } } } } },
    done: { type: 'final' },
  },
});

export const child = createMachine({ id: 'child', initial: 'c1', states: { c1: { always: 'c2' }, c2: {} } });
`

const locatePart = `export const part = {
  type: 'parallel',
};

export const base = {
  initial: 'x',
  states: { x: {} },
};
`

// TestLocateConfigKeys checks that a module's config problems are placed
// at their keys in the file they are written in: a module's own keys (a
// plain createMachine, setup().createMachine, nested states, an element
// of an array and a key in it), through a shorthand property and a
// variable, in a file the module imports, through a spread, the deepest
// key of a path the code does not have, columns in bytes after
// characters of two and four bytes (one and two UTF-16 units), and the
// machine chosen by its id, or, of machines without one, by its likeness
// to the config (its keys and its states' names).
func TestLocateConfigKeys(t *testing.T) {
	type want struct {
		file, src, needle string // the needle's position in src, in file ("" for the module)
	}
	setup := `import { setup } from 'xstate';
const config = {
  initial: 'a',
  states: { a: { onEntry: 'x' } },
};
export default setup({ guards: { ok: () => true } }).createMachine(config);
`
	plainJS := `import { createMachine } from 'xstate';
export default createMachine({ initial: 'a', states: { a: { on: { GO: { target: 'a', guard: 'g' } } } } });
`
	made := `import { createMachine } from 'xstate';
const make = () => ({ initial: 'a', states: { a: {} } });
export default createMachine(make());
`
	twins := `import { createMachine, setup } from 'xstate';
const kid = createMachine({ initial: 'k', states: { k: { onEntry: 'a' } } });
export default setup({ actors: { kid } }).createMachine({ initial: 'p1', states: { p1: { onEntry: 'b' }, p2: {} } });
`
	// shaped is a config as a module's code builds it: keys, and states
	// with their names.
	shaped := func(states ...string) *config.Object {
		st := &config.Object{Vals: map[string]any{}}
		for _, n := range states {
			st.Keys = append(st.Keys, n)
			st.Vals[n] = &config.Object{Vals: map[string]any{}}
		}
		return &config.Object{Keys: []string{"initial", "states"}, Vals: map[string]any{"initial": states[0], "states": st}}
	}
	for _, c := range []struct {
		name   string
		module string // the file of files loaded
		files  map[string]string
		id     string // the machine's
		path   []string
		want   *want          // nil: nothing found
		cfg    *config.Object // the config the locator is for (nil: by id alone)
	}{
		{"a state's key", "parent.ts", nil, "parent", []string{"states", "busy", "onEntry"}, &want{"", locateParent, "onEntry"}, nil},
		{"a quoted key", "parent.ts", nil, "parent", []string{"states", "busy", "quoted-key"}, &want{"", locateParent, `"quoted-key"`}, nil},
		{"a numeric key", "parent.ts", nil, "parent", []string{"states", "busy", "7"}, &want{"", locateParent, "7: {}"}, nil},
		{"an array's element", "parent.ts", nil, "parent", []string{"states", "idle", "on", "GO", "1"}, &want{"", locateParent, "{ guard: 'second'"}, nil},
		{"a key of an array's element", "parent.ts", nil, "parent", []string{"states", "idle", "on", "GO", "1", "guard"}, &want{"", locateParent, "guard: 'second'"}, nil},
		{"through a shorthand property", "parent.ts", nil, "parent", []string{"states", "idle", "entry"}, &want{"", locateParent, "entry: 'hello'"}, nil},
		{"a nested state", "parent.ts", nil, "parent", []string{"states", "deep", "states", "a", "states", "b", "type"}, &want{"", locateParent, "type: 'bogus'"}, nil},
		{"in an imported file", "parent.ts", nil, "parent", []string{"states", "shared", "type"}, &want{"part.ts", locatePart, "type: 'parallel'"}, nil},
		{"through a spread", "parent.ts", nil, "parent", []string{"states", "spread", "states", "x"}, &want{"part.ts", locatePart, "x: {}"}, nil},
		{"the spread's own key", "parent.ts", nil, "parent", []string{"states", "spread", "on", "NEXT"}, &want{"", locateParent, "NEXT"}, nil},
		{"the deepest key there is", "parent.ts", nil, "parent", []string{"states", "busy", "nope", "deeper"}, &want{"", locateParent, "busy:"}, nil},
		{"the root", "parent.ts", nil, "parent", nil, &want{"", locateParent, "{\n  id: 'parent'"}, nil},
		{"no key of the path", "parent.ts", nil, "parent", []string{"nope"}, nil, nil},
		{"the child, by its id", "parent.ts", nil, "child", []string{"states", "c1", "always"}, &want{"", locateParent, "always"}, nil},
		{"setup().createMachine of a variable", "setup.ts", map[string]string{"setup.ts": setup}, "(machine)", []string{"states", "a", "onEntry"}, &want{"", setup, "onEntry"}, nil},
		{"a JavaScript module", "plain.mjs", map[string]string{"plain.mjs": plainJS}, "(machine)", []string{"states", "a", "on", "GO", "guard"}, &want{"", plainJS, "guard"}, nil},
		{"a config a function makes", "made.ts", map[string]string{"made.ts": made}, "(machine)", []string{"states", "a"}, nil, nil},
		{"the parent of two without ids, by its likeness", "twins.ts", map[string]string{"twins.ts": twins}, "(machine)", []string{"states", "p1", "onEntry"}, &want{"", twins, "onEntry: 'b'"}, shaped("p1", "p2")},
		{"the child of two without ids, by its likeness", "twins.ts", map[string]string{"twins.ts": twins}, "(machine)", []string{"states", "k", "onEntry"}, &want{"", twins, "onEntry: 'a'"}, shaped("k")},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			files := c.files
			if files == nil {
				files = map[string]string{"parent.ts": locateParent, "part.ts": locatePart}
			}
			root := writeModules(t, dir, files)
			module := filepath.Join(dir, c.module)
			b, diags := bundle(module, root, "exports")
			if len(diags) > 0 {
				t.Fatal(diags)
			}
			id := c.id
			if id == "(machine)" {
				id = "" // no id in the config
			}
			l := &configLocator{index: newBundleIndex(b, module), id: id, cfg: c.cfg}
			file, line, col, ok := l.Locate(c.path)
			if c.want == nil {
				if ok {
					t.Fatalf("Locate(%q) = %s:%d:%d, want nothing", c.path, file, line, col)
				}
				return
			}
			wantFile := c.want.file
			if wantFile != "" {
				wantFile = filepath.Join(dir, wantFile) // outside the working folder: absolute
			}
			wl, wc := posOf(t, c.want.src, c.want.needle)
			if !ok || file != wantFile || line != wl || col != wc {
				t.Fatalf("Locate(%q) = %q:%d:%d %v, want %q:%d:%d", c.path, file, line, col, ok, wantFile, wl, wc)
			}
		})
	}
}

// TestConfigProblemsAtTheirKeys loads a TypeScript machine with three
// structural errors and a warning: each is reported at its key's line and
// column, with the line's text (for the server's log and check; not in
// what clients are told), and so is an error in a child machine's config.
func TestConfigProblemsAtTheirKeys(t *testing.T) {
	src := `import { createMachine, setup } from 'xstate';

const child = createMachine({ id: 'kid', initial: 'k', states: { k: { type: 'atomic' } } });

export default setup({ actors: { child } }).createMachine({
  id: 'broken',
  initial: 'idle',
  states: {
    idle: {
      onEntry: 'hello',
      on: { GO: [{ target: 'busy', guard: 5 }] },
    },
    busy: { states: 5, invoke: { src: 'child' } },
    done: { type: 'final', mystery: true },
  },
});
`
	dir := t.TempDir()
	writeModules(t, dir, map[string]string{"broken.ts": src})
	file := filepath.Join(dir, "broken.ts")
	_, warns, err := (&xstate.Loader{Modules: &Host{}}).Load(file)
	var le *xstate.LoadError
	if !errors.As(err, &le) {
		t.Fatalf("load: %v, want a LoadError", err)
	}
	type placed struct {
		needle, msg string
	}
	check := func(what string, got []xstate.Diagnostic, want []placed) {
		t.Helper()
		for _, w := range want {
			line, col := posOf(t, src, w.needle)
			found := false
			for _, d := range got {
				if strings.Contains(d.Msg, w.msg) {
					found = true
					if d.File != file || d.Line != line || d.Column != col {
						t.Errorf("%s %q at %s:%d:%d, want %s:%d:%d", what, d.Msg, d.File, d.Line, d.Column, file, line, col)
					}
					if wantSrc := strings.TrimSpace(strings.Split(src, "\n")[line-1]); d.Source != wantSrc {
						t.Errorf("%s %q: Source %q, want %q", what, d.Msg, d.Source, wantSrc)
					}
					if strings.Contains(d.Public(), d.Source) {
						t.Errorf("%s %q: Public() %q quotes the line", what, d.Msg, d.Public())
					}
				}
			}
			if !found {
				t.Errorf("no %s says %q in %v", what, w.msg, got)
			}
		}
	}
	check("error", le.Diags, []placed{
		{"onEntry", `"onEntry" is not an XState v5 state key`},
		{"guard: 5", "a guard must be"},
		{"states: 5", "states must be an object"},
	})
	check("warning", warns, []placed{{"mystery", `unknown key "mystery"`}})
	if len(le.Diags) != 3 {
		t.Errorf("%d errors, want 3: %v", len(le.Diags), le.Diags)
	}

	// The child machine's config is placed in its own literal (and what
	// the parent's error says of it quotes no line of the file).
	src = strings.Replace(src, "type: 'atomic'", "type: 'nope'", 1)
	writeModules(t, dir, map[string]string{"broken.ts": src})
	_, _, err = (&xstate.Loader{Modules: &Host{}}).Load(file)
	line, col := posOf(t, src, "type: 'nope'")
	if want := fmt.Sprintf("%s:%d:%d: state k: unknown state type", file, line, col); err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "const child") {
		t.Errorf("load: %v, want %s, without the line's text", err, want)
	}
}

// TestTopLevelExceptionPlaced checks that an exception thrown by a
// module's top-level code as it loads is placed where it was thrown: in
// the module, or in a file it imports.
func TestTopLevelExceptionPlaced(t *testing.T) {
	helper := "export function load(): number {\n  const cfg: any = undefined;\n  return cfg.max;\n}\n"
	for _, tc := range []struct {
		name, src, in, at string
		// near: the column may be one before at's (goja places a new
		// Error one column early through esbuild's map)
		near bool
	}{
		{"own", "import { createMachine } from 'xstate';\n\nfunction pick(x: any) {\n  return x.deep.value;\n}\nconst v = pick({});\n\nexport default createMachine({ id: 'm', initial: 'a', context: { v }, states: { a: {} } });\n", "m.ts", ".value", false},
		{"imported", "import { createMachine } from 'xstate';\nimport { load } from './helper';\n\nconst max = load();\n\nexport default createMachine({ id: 'm', initial: 'a', context: { max }, states: { a: {} } });\n", "helper.ts", ".max", false},
		{"thrown", "import { createMachine } from 'xstate';\n\nif (1 + 1 === 2) {\n  throw new Error('no config');\n}\n\nexport default createMachine({ id: 'm', initial: 'a', states: { a: {} } });\n", "m.ts", "new Error", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeModules(t, dir, map[string]string{"m.ts": tc.src, "helper.ts": helper})
			_, _, err := (&xstate.Loader{Modules: &Host{}, Root: dir}).Load(filepath.Join(dir, "m.ts"))
			var le *xstate.LoadError
			if !errors.As(err, &le) || len(le.Diags) != 1 {
				t.Fatalf("err = %v, want one diagnostic", err)
			}
			src := tc.src
			if tc.in == "helper.ts" {
				src = helper
			}
			line, col := posOf(t, src, tc.at)
			d := le.Diags[0]
			if tc.near && d.Column == col-1 {
				col--
			}
			if d.File != filepath.Join(dir, tc.in) || d.Line != line || d.Column != col {
				t.Errorf("placed at %s:%d:%d, want %s:%d:%d (%s)", d.File, d.Line, d.Column, filepath.Join(dir, tc.in), line, col, d.Msg)
			}
		})
	}
}
