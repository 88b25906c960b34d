package js

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stategate/stategate/xstate"
)

// ioMachine is a module with a machine whose actor runs body.
func ioMachine(imports, body string) string {
	return `import { setup, fromPromise } from 'xstate';
` + imports + `
export default setup({
  actors: {
    load: fromPromise(async ({ input }: { input: any }) => {
` + body + `
    }),
  },
}).createMachine({ id: 'io', initial: 'a', states: { a: { invoke: { src: 'load' } } } });
`
}

// TestUnavailableGlobalWarnings checks the warnings of a module whose code
// uses a global that machine code does not have: each names the global
// where its file first uses it (line and column in that file, through the
// source map, with the line's text), says what to do instead, and counts
// the other uses; a local of that name, a parameter, a property, a key,
// a typeof test and a mention in a comment or a string are not uses of
// the global, and neither is the code of esbuild's own helpers (its
// __require, which a dynamic require calls, uses require).
func TestUnavailableGlobalWarnings(t *testing.T) {
	type want struct {
		name, file, needle string // the needle's position in file ("" for the module)
		more               int
	}
	helper := `export const get = (url: string) => fetch(url);
export const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));
`
	for _, c := range []struct {
		name   string
		module string // the module's file name (.ts or .mjs)
		src    string
		files  map[string]string
		want   []want
	}{
		{"fetch in a promise actor", "m.ts", ioMachine("", `      const r = await fetch('https://example.com/' + input.id);
      return r.json();`), nil, []want{{"fetch", "", "fetch('https", 0}}},
		{"a timer", "m.mjs", `import { createMachine, fromPromise } from 'xstate';
const sleep = fromPromise(() => new Promise((resolve) => setTimeout(resolve, 10)));
export default createMachine({ id: 't', initial: 'a', states: { a: {} } });
`, nil, []want{{"setTimeout", "", "setTimeout(", 0}}},
		{"process, and each use counted", "m.ts", ioMachine("", `      const a = process.env.A;
      const b = process.env.B; const c = process.argv;
      return [a, b, c];`), nil, []want{{"process", "", "process.env.A", 2}}},
		{"a dynamic require", "m.ts", ioMachine("", `      const name = 'node:fs';
      return require(name);`), nil, []want{{"require", "", "require(name)", 0}}},
		{"globalThis's property", "m.ts", ioMachine("", `      return globalThis.fetch('x');`), nil, []want{{"fetch", "", "fetch('x')", 0}}},
		{"several globals, in an imported file", "m.ts", ioMachine(`import { get, wait } from './helper';`, `      await wait(5);
      return get('x');`), map[string]string{"helper.ts": helper}, []want{
			{"fetch", "helper.ts", "fetch(url)", 0},
			{"setTimeout", "helper.ts", "setTimeout(r", 0},
		}},
		// (wait, which the module does not import, is not in the bundle.)
		{"one warning per name and file", "m.ts", ioMachine(`import { get } from './helper';`, `      return [await get('a'), await fetch('b'), await fetch('c')];`), map[string]string{"helper.ts": helper}, []want{
			{"fetch", "", "fetch('b')", 1},
			{"fetch", "helper.ts", "fetch(url)", 0},
		}},
		{"not a local, a parameter, a property or a key", "m.ts", ioMachine("", `      const fetch = (u: string) => u;
      const run = (setTimeout: (f: () => void) => void) => setTimeout(() => {});
      const o = { process: 1, require() { return 2; } };
      run((f) => f());
      return [fetch('x'), input.setInterval, o.process, o.require()];`), nil, nil},
		{"not guarded by typeof", "m.ts", ioMachine("", `      if (typeof fetch === 'function') return fetch('x');
      return typeof globalThis.setTimeout === 'undefined' ? null : globalThis.setTimeout(() => {}, 1);`), nil, nil},
		{"not in a comment or a string", "m.ts", ioMachine("", `      // fetch('x') and setTimeout would not work here
      return 'process require';`), nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{c.module: c.src}
			for k, v := range c.files {
				files[k] = v
			}
			writeModules(t, dir, files)
			file := filepath.Join(dir, c.module)
			_, warns, err := (&xstate.Loader{Modules: &Host{}}).Load(file)
			if err != nil {
				t.Fatal(err)
			}
			var got []xstate.Diagnostic
			for _, w := range warns {
				if strings.Contains(w.Msg, "is not available") {
					got = append(got, w)
				}
			}
			var gotS, wantS []string
			for _, d := range got {
				gotS = append(gotS, fmt.Sprintf("%s:%d:%d %s", d.File, d.Line, d.Column, d.Msg))
			}
			for _, w := range c.want {
				wf, src := file, c.src
				if w.file != "" {
					wf, src = filepath.Join(dir, w.file), files[w.file]
				}
				line, col := posOf(t, src, w.needle)
				msg := fmt.Sprintf(unavailable[w.name], w.name)
				if w.more > 0 {
					msg += fmt.Sprintf(" (and %d more %s in this file)", w.more, plural(w.more, "use", "uses"))
				}
				wantS = append(wantS, fmt.Sprintf("%s:%d:%d %s", wf, line, col, msg))
			}
			slices.Sort(gotS)
			slices.Sort(wantS)
			if !slices.Equal(gotS, wantS) {
				t.Fatalf("warnings:\n%s\nwant:\n%s", strings.Join(gotS, "\n"), strings.Join(wantS, "\n"))
			}
			for _, d := range got {
				if name := strings.SplitN(d.Msg, "`", 3)[1]; !d.Warning || !strings.Contains(d.Source, name) {
					t.Errorf("%s: Warning %v, Source %q: want a warning quoting its line", d.Msg, d.Warning, d.Source)
				}
			}
		})
	}
}

// TestUnavailableGlobalsAreUndefined checks that every global the
// warnings name is undefined in a module's runtime (a host global that
// machines gain must leave the list), and that the shim's own code, and
// esbuild's, are not warned of: a module whose comment names them all
// gets the analysis and no warning.
func TestUnavailableGlobalsAreUndefined(t *testing.T) {
	var names []string
	for n := range unavailable {
		names = append(names, `'`+n+`'`)
	}
	slices.Sort(names)
	src := `import { createMachine } from 'xstate';
// ` + strings.Join(names, " ") + `
const defined = [` + strings.Join(names, ", ") + `].filter((n) => typeof (globalThis as any)[n] !== 'undefined');
if (defined.length > 0) throw new Error('defined: ' + defined.join(', '));
export default createMachine({ id: 'g', initial: 'a', states: { a: {} } });
`
	dir := t.TempDir()
	root := writeModules(t, dir, map[string]string{"g.ts": src})
	file := filepath.Join(dir, "g.ts")
	_, warns, err := (&xstate.Loader{Modules: &Host{}}).Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) > 0 {
		t.Errorf("warnings %v, want none", warns)
	}
	h := &Host{}
	if err := h.setup(); err != nil {
		t.Fatal(err)
	}
	b, diags := bundle(file, root, h.names.exports)
	if len(diags) > 0 || !b.unavailable {
		t.Fatalf("bundle: %v, unavailable %v: want a bundle to analyze", diags, b.unavailable)
	}
	if ws := ioWarnings(b, file, h.names); len(ws) > 0 {
		t.Errorf("ioWarnings = %v, want none (the shim's and esbuild's code are not the module's)", ws)
	}
}

// TestTopLevelUnavailableGlobal checks that a module whose top-level code
// calls a global machine code does not have fails to load with the
// ReferenceError and what to do instead.
func TestTopLevelUnavailableGlobal(t *testing.T) {
	dir := t.TempDir()
	writeModules(t, dir, map[string]string{"top.ts": `import { createMachine } from 'xstate';
const ticker = setInterval(() => {}, 1000);
export default createMachine({ id: 'top', initial: 'a', states: { a: {} } });
`})
	_, _, err := (&xstate.Loader{Modules: &Host{}}).Load(filepath.Join(dir, "top.ts"))
	if want := "setInterval is not defined (`setInterval` is not available to machine code: use XState's delayed transitions"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("load: %v, want %q", err, want)
	}
}

// TestImplementationsWarnings checks that LoadImplementationsWarnings
// returns the warnings of an implementations module's code.
func TestImplementationsWarnings(t *testing.T) {
	src := `import { fromPromise } from 'xstate';
export default {
  actors: { load: fromPromise(() => fetch('https://example.com')) },
};
`
	dir := t.TempDir()
	root := writeModules(t, dir, map[string]string{"m.impl.ts": src})
	file := filepath.Join(dir, "m.impl.ts")
	impl, warns, err := (&Host{}).LoadImplementationsWarnings(context.Background(), root, file)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := impl.Actors["load"]; !ok {
		t.Errorf("actors %v, want load", impl.Actors)
	}
	line, col := posOf(t, src, "fetch(")
	if len(warns) != 1 || warns[0].File != file || warns[0].Line != line || warns[0].Column != col || !strings.HasPrefix(warns[0].Msg, "`fetch` is not available") {
		t.Errorf("warnings %v, want fetch's at %d:%d", warns, line, col)
	}
}

// TestJSONMachineReportsItsImplementationsWarnings checks that a JSON
// machine loaded by a Loader reports the warnings of the implementations
// module beside it (xstate.WarningModules), as check prints them.
func TestJSONMachineReportsItsImplementationsWarnings(t *testing.T) {
	src := `import { fromPromise } from 'xstate';
export default {
  actors: { load: fromPromise(() => fetch('https://example.com')) },
};
`
	dir := t.TempDir()
	writeModules(t, dir, map[string]string{
		"m.impl.ts": src,
		"m.json":    `{"id": "m", "initial": "a", "states": {"a": {"invoke": {"src": "load"}}}}`,
	})
	rep, err := (&xstate.Loader{Modules: &Host{}}).Check([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Files) != 1 || rep.Files[0].Failed {
		t.Fatalf("report %v, want m.json ok", rep.Lines())
	}
	line, col := posOf(t, src, "fetch(")
	want := fmt.Sprintf("m.impl.ts:%d:%d: warning: `fetch` is not available", line, col)
	if got := strings.Join(rep.Lines(), "\n"); !strings.Contains(got, want) {
		t.Errorf("check printed\n%s\nwant a line with %q", got, want)
	}
}
