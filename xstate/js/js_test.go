package js

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/xstate"
)

func jsFile(name string) string { return filepath.Join("testdata", "js", name) }

// startModule loads a module of testdata/js with l and starts an actor of
// its machine.
func startModule(t *testing.T, l *xstate.Loader, name string) *interp.Actor {
	t.Helper()
	m, _, err := l.LoadModule(jsFile(name))
	if err != nil {
		t.Fatal(err)
	}
	a := interp.NewActor(m, interp.ActorOptions{})
	a.Start()
	return a
}

func TestInterruptRunawayGuard(t *testing.T) {
	l := &xstate.Loader{Modules: &Host{Timeout: 100 * time.Millisecond}}
	m, _, err := l.LoadModule(jsFile("loop.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	a := interp.NewActor(m, interp.ActorOptions{})
	a.Start()
	start := time.Now()
	a.Send(interp.Event{Type: "SPIN"})
	s := a.Snapshot()
	if s.Status != interp.StatusError || !errors.Is(s.Err(), ErrInterrupted) {
		t.Fatalf("status %v, error %v; want an interrupted guard", s.Status, s.Err())
	}
	for _, want := range []string{"guard 'forever'", "in state node 'spinner.idle'"} {
		if !strings.Contains(s.Err().Error(), want) {
			t.Errorf("error %q does not name %s", s.Err(), want)
		}
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("the interrupt took %v", time.Since(start))
	}
	// The module's runtimes still work after an interrupt.
	b := interp.NewActor(m, interp.ActorOptions{})
	b.Start()
	if ok, err := b.Snapshot().Can(interp.Event{Type: "RECURSE"}); !ok || err != nil {
		t.Fatalf("Can(RECURSE) = %v, %v after an interrupt", ok, err)
	}
}

// TestInterruptRunawayAssign checks that an interrupted assign names the
// property whose function ran away.
func TestInterruptRunawayAssign(t *testing.T) {
	a := startModule(t, &xstate.Loader{Modules: &Host{Timeout: 100 * time.Millisecond}}, "loop.mjs")
	a.Send(interp.Event{Type: "SPIN_ASSIGN"})
	s := a.Snapshot()
	if s.Status != interp.StatusError || !errors.Is(s.Err(), ErrInterrupted) || !strings.Contains(s.Err().Error(), "assign of 'total'") {
		t.Fatalf("status %v, error %v; want an interrupted assign of 'total'", s.Status, s.Err())
	}
}

func TestDeepRecursionIsAnError(t *testing.T) {
	a := startModule(t, &xstate.Loader{Modules: &Host{}}, "loop.mjs")
	a.Send(interp.Event{Type: "RECURSE"})
	s := a.Snapshot()
	if s.Status != interp.StatusError || !strings.Contains(s.Err().Error(), "Maximum call stack size exceeded") {
		t.Fatalf("status %v, error %v", s.Status, s.Err())
	}
}

func TestForbiddenImports(t *testing.T) {
	for file, want := range map[string]string{
		"forbidden.ts":       `forbidden.ts:2:30: cannot import "node:fs"`,
		"package-import.mjs": `package-import.mjs:2:15: cannot import "lodash"`,
		"xstate-graph.mjs":   `xstate-graph.mjs:2:33: cannot import "xstate/graph"`,
	} {
		_, _, err := (&xstate.Loader{Modules: &Host{}}).LoadModule(jsFile(file))
		if !errors.Is(err, xstate.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", file, err, want)
		}
	}
}

// An event mapped to null fails the module, as XState's createMachine
// throws on it; one mapped to undefined is the forbidden transition.
func TestNullTransitionIsAnError(t *testing.T) {
	_, _, err := (&xstate.Loader{Modules: &Host{}}).LoadModule(jsFile("null-transition.mjs"))
	want := `state a: on "GO": a transition cannot be null`
	if !errors.Is(err, xstate.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if strings.Contains(err.Error(), "FINE") {
		t.Fatalf("undefined reported too: %v", err)
	}
}

func TestSyntaxErrorNamesFileAndLine(t *testing.T) {
	_, _, err := (&xstate.Loader{Modules: &Host{}}).LoadModule(jsFile("syntax.ts"))
	if !errors.Is(err, xstate.ErrInvalid) {
		t.Fatalf("err = %v", err)
	}
	var le *xstate.LoadError
	if !errors.As(err, &le) || le.Diags[0].Line != 10 || le.Diags[0].File != jsFile("syntax.ts") {
		t.Fatalf("diagnostics %+v", err)
	}
	// Named by an absolute path, the module is named so in the message too
	// (esbuild's own paths are relative to the working folder).
	abs, _ := filepath.Abs(jsFile("syntax.ts"))
	_, _, err = (&xstate.Loader{Modules: &Host{}}).LoadModule(abs)
	if !errors.As(err, &le) || le.Diags[0].File != abs {
		t.Fatalf("diagnostics of %s: %+v", abs, err)
	}
}

func TestRelativeImports(t *testing.T) {
	a := startModule(t, &xstate.Loader{Modules: &Host{}}, "uses-helper.ts")
	a.Send(interp.Event{Type: "PAY", Data: map[string]any{"amount": 40.0}})
	if v := a.Snapshot().Value(); v != "open" {
		t.Fatalf("small payment went to %v", v)
	}
	a.Send(interp.Event{Type: "PAY", Data: map[string]any{"amount": 400.0}})
	s := a.Snapshot()
	if s.Value() != "review" || s.Context.(map[string]any)["last"] != 400.0 {
		t.Fatalf("value %v context %v", s.Value(), s.Context)
	}
}

func TestModuleMustExportOneMachine(t *testing.T) {
	_, _, err := (&xstate.Loader{Modules: &Host{}}).LoadModule(jsFile("two-machines.mjs"))
	if err == nil || !strings.Contains(err.Error(), "exactly one machine") {
		t.Fatalf("err = %v", err)
	}
}

func TestMissingImplementations(t *testing.T) {
	rep, err := (&xstate.Loader{Modules: &Host{}}).Check([]string{jsFile("missing.mjs")})
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Join(rep.Lines(), "\n")
	if !rep.Failed() {
		t.Fatalf("a machine with missing guards passed check:\n%s", out)
	}
	for _, want := range []string{
		`state a: guard "unknownGuard" has no implementation`,
		`state a: actor "fetcher" has no implementation`,
		`state a: delay "patience" has no implementation`,
		`warning: state a: action "unknownAction" has no implementation`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}
	// The Go table fills the gaps, and check passes.
	reg := xstate.NewRegistry().
		Guard("unknownGuard", func(interp.Args, any) (bool, error) { return true, nil }).
		Action("unknownAction", func(interp.Args, any) error { return nil }).
		DelayMs("patience", 500).
		Actor("fetcher", &interp.PromiseLogic{Start: func(_ *interp.Actor, _ any, settle func(any, error)) error {
			settle("ok", nil)
			return nil
		}})
	rep, err = (&xstate.Loader{Registry: reg, Modules: &Host{}}).Check([]string{jsFile("missing.mjs")})
	if err != nil || rep.Failed() {
		t.Fatalf("with the registry: %v\n%s", err, strings.Join(rep.Lines(), "\n"))
	}
}

func TestJSOwnImplementationsComeFirst(t *testing.T) {
	reg := xstate.NewRegistry().Guard("isLarge", func(interp.Args, any) (bool, error) { return false, nil })
	a := startModule(t, &xstate.Loader{Registry: reg, Modules: &Host{}}, "uses-helper.ts")
	a.Send(interp.Event{Type: "PAY", Data: map[string]any{"amount": 400.0}})
	if v := a.Snapshot().Value(); v != "review" {
		t.Fatalf("the registry's guard overrode the module's: went to %v", v)
	}
}

// TestRegistryGetsPlainValues checks that a Registry's function, run in
// the step of a module whose code left JavaScript values in the context
// and made its params, gets them as Go values (xstate.PlainValues), and
// that the module's code still sees its own.
func TestRegistryGetsPlainValues(t *testing.T) {
	var gotCtx map[string]any
	var gotParams any
	reg := xstate.NewRegistry().Action("check", func(a interp.Args, params any) error {
		ctx, _ := a.Context.(map[string]any)
		gotCtx = maps.Clone(ctx) // as it is now: the step's end seals the context in place
		gotParams = params
		return nil
	})
	a := startModule(t, &xstate.Loader{Registry: reg, Modules: &Host{}}, "registry-plain.mjs")
	a.Send(interp.Event{Type: "GO", Data: map[string]any{"by": "ann"}})
	if s := a.Snapshot(); s.Value() != "b" || s.Err() != nil {
		t.Fatalf("after GO: %v, %v", s.Value(), s.Err())
	}
	want := map[string]any{"items": []any{1.0, 2.0}, "meta": map[string]any{"by": "ann"}}
	if !reflect.DeepEqual(gotCtx, want) {
		t.Errorf("the registry's action got the context %#v, want %#v", gotCtx, want)
	}
	if !reflect.DeepEqual(gotParams, map[string]any{"n": 2.0}) {
		t.Errorf("the registry's action got the params %#v", gotParams)
	}
	if got := a.Snapshot().Context; !reflect.DeepEqual(got, want) {
		t.Errorf("context after the step %#v, want %#v", got, want)
	}
}

func TestSelf(t *testing.T) {
	a := startModule(t, &xstate.Loader{Modules: &Host{}}, "self.mjs")
	a.Send(interp.Event{Type: "GO"})
	s := a.Snapshot()
	if s.Status != interp.StatusActive || s.Err() != nil {
		t.Fatalf("status %v, error %v", s.Status, s.Err())
	}
	// As the oracle gives them: a root actor's id is "x:0", and JSON shows
	// an actor ref as XState's toJSON does. (XState's own self has many
	// more keys.)
	want := map[string]any{"id": "x:0", "json": `{"xstate$$type":1,"id":"x:0"}`, "keys": "id,send", "ref": map[string]any{"id": "x:0", "xstate$$type": 1}}
	if got, _ := json.Marshal(s.Context); string(got) != string(must(json.Marshal(want))) {
		t.Errorf("context %s, want %s", got, must(json.Marshal(want)))
	}
	if v, _ := json.Marshal(s.Value()); string(v) != `"c"` {
		t.Errorf("value %s, want \"c\" (self.send)", v)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestContextChangedByCodeStaysOutOfTheSnapshot(t *testing.T) {
	a := startModule(t, &xstate.Loader{Modules: &Host{}}, "mutate-context.mjs")
	a.Send(interp.Event{Type: "GO"})
	got, err := json.Marshal(a.Snapshot().Context)
	if err != nil {
		t.Fatal(err)
	}
	// Later code of the step sees the change, as it would in XState; the
	// snapshot keeps the context the machine's assigns made.
	if want := `{"a":1,"b":"x","seen":[99,false,true]}`; string(got) != want {
		t.Fatalf("context %s, want %s", got, want)
	}
}

// TestProbeNotesPayloadReads checks that a guard reading the payload of a
// probed event is seen, both on the dynamic event objects and on the plain
// ones a module that may lock objects gets (the word "freeze" below).
func TestProbeNotesPayloadReads(t *testing.T) {
	for name, prelude := range map[string]string{
		"dynamic objects": "",
		"plain objects":   "// this module may Object.freeze what it gets\n",
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "m.mjs")
			src := prelude + `import { createMachine } from 'xstate';
export default createMachine({
  id: 'm', initial: 'a', context: { limit: 10 },
  states: { a: { on: {
    PAY: { guard: ({ context, event }) => event.amount <= context.limit, target: 'b' },
    CLOSE: { guard: ({ context }) => context.limit > 100, target: 'b' },
  } }, b: {} },
});`
			if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			m, _, err := (&xstate.Loader{Modules: &Host{}}).LoadModule(file)
			if err != nil {
				t.Fatal(err)
			}
			if mod, ok := m.Impl.Host.(*jsModule); !ok || mod.plainObjects != (prelude != "") {
				t.Fatalf("module host %T: plain objects = %v", m.Impl.Host, ok && mod.plainObjects)
			}
			a := interp.NewActor(m, interp.ActorOptions{})
			a.Start()
			for typ, wantRead := range map[string]bool{"PAY": true, "CLOSE": false} {
				ev, probe := interp.ProbeEvent(typ)
				ok, err := a.Snapshot().Can(ev)
				if err != nil || ok {
					t.Errorf("%s: Can = %v, %v; want false (no payload, or a limit too low)", typ, ok, err)
				}
				if probe.Read() != wantRead {
					t.Errorf("%s: payload read = %v, want %v", typ, probe.Read(), wantRead)
				}
			}
		})
	}
}

// TestTransitionRunsJSCode steps a JavaScript machine with the pure
// Machine.Transition: its code runs in a runtime lent for the step, the
// snapshot given is not changed, and an error leaves the state as it was.
func TestTransitionRunsJSCode(t *testing.T) {
	m, _, err := (&xstate.Loader{Modules: &Host{}}).LoadModule(jsFile("counter.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	s0, _, err := m.Initial(nil)
	if err != nil {
		t.Fatal(err)
	}
	s1, _, err := m.Transition(s0, interp.Event{Type: "INC", Data: map[string]any{"by": 5.0}})
	if err != nil {
		t.Fatal(err)
	}
	s2, _, err := m.Transition(s1, interp.Event{Type: "INC"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s    *interp.Snapshot
		want float64
	}{{s0, 0}, {s1, 5}, {s2, 6}} {
		if n := c.s.Context.(map[string]any)["n"]; n != c.want {
			t.Errorf("n = %v, want %v", n, c.want)
		}
	}
	s3, _, err := m.Transition(s2, interp.Event{Type: "FAIL"})
	if err == nil || !strings.Contains(err.Error(), "counter broke") || s3 != nil {
		t.Fatalf("FAIL: %v, %v; want the action's error and no snapshot", s3, err)
	}
	if s2.Context.(map[string]any)["n"] != 6.0 || s2.Status != interp.StatusActive {
		t.Errorf("the snapshot before the error: %v %v", s2.Status, s2.Context)
	}
}

// TestCheckSkipsHelperModules checks a folder holding a machine and the
// helper module it imports: the helper is skipped, not failed, unless it
// is named itself. The machine's sources include the helper.
func TestCheckSkipsHelperModules(t *testing.T) {
	dir := t.TempDir()
	helper := filepath.Join(dir, "names.ts")
	machine := filepath.Join(dir, "door.ts")
	for f, src := range map[string]string{
		helper:  `export const EXTRA = 'KNOCK';`,
		machine: "import { createMachine } from 'xstate';\nimport { EXTRA } from './names';\nexport default createMachine({ id: 'door', initial: 'shut', states: { shut: { on: { [EXTRA]: 'shut' } } } });",
	} {
		if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := (&xstate.Loader{Modules: &Host{}}).Check([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed() || len(rep.Files) != 2 || rep.Files[1].Skipped == "" || rep.Files[1].File != helper {
		t.Fatalf("folder: %v", rep.Lines())
	}
	if rep, _ := (&xstate.Loader{Modules: &Host{}}).Check([]string{helper}); !rep.Failed() || !strings.Contains(strings.Join(rep.Lines(), "\n"), "exports no machine") {
		t.Fatalf("the helper named itself: %v", rep.Lines())
	}
	m, _, err := (&xstate.Loader{Modules: &Host{}}).Load(machine)
	if err != nil {
		t.Fatal(err)
	}
	abs := func(f string) string { a, _ := filepath.Abs(f); return a }
	if got := xstate.Sources(machine, m); !slices.Equal(got, []string{abs(machine), abs(helper)}) {
		t.Fatalf("sources %v", got)
	}
}

// recordLog is a slog handler that keeps its records.
type recordLog struct{ recs *[]slog.Record }

func (h recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (h recordLog) Handle(_ context.Context, r slog.Record) error {
	*h.recs = append(*h.recs, r)
	return nil
}
func (h recordLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordLog) WithGroup(string) slog.Handler      { return h }

// TestConsole runs a machine whose entry action uses the console: what it
// writes goes to the loader's Console logger, at the matching levels, and
// without one the action still runs.
func TestConsole(t *testing.T) {
	var recs []slog.Record
	a := startModule(t, &xstate.Loader{Modules: &Host{Console: slog.New(recordLog{&recs})}}, "console-all.mjs")
	if a.Snapshot().Status != interp.StatusActive {
		t.Fatalf("status %v: %v", a.Snapshot().Status, a.Snapshot().Err())
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.Level.String()+" "+r.Message)
	}
	want := []string{`INFO hello {"a":1} [2] 3 undefined`, "INFO info", "WARN warn", "ERROR error", "DEBUG debug"}
	if !slices.Equal(got, want) {
		t.Fatalf("console records %q, want %q", got, want)
	}
	if b := startModule(t, &xstate.Loader{Modules: &Host{}}, "console-all.mjs"); b.Snapshot().Status != interp.StatusActive {
		t.Fatalf("without a Console logger: status %v: %v", b.Snapshot().Status, b.Snapshot().Err())
	}
}

// TestCheckImplementationsModule checks an implementations module named
// by itself (as a shell glob names it): it is checked with the JSON machine
// beside it, once, and without one it is an error that names the machine
// it needs.
func TestCheckImplementationsModule(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	machine := write("door.json", `{"id":"door","initial":"shut","states":{"shut":{"on":{"OPEN":{"guard":"unlocked","target":"open"}}},"open":{}}}`)
	impl := write("door.impl.ts", `export default { guards: { unlocked: () => true } };`)
	lonely := write("window.impl.ts", `export default { guards: {} };`)

	l := &xstate.Loader{Modules: &Host{}}
	rep, err := l.Check([]string{impl, machine})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed() || len(rep.Files) != 1 || rep.Files[0].File != machine {
		t.Fatalf("report %q", rep.Lines())
	}
	rep, err = l.Check([]string{lonely})
	if err != nil {
		t.Fatal(err)
	}
	if out := strings.Join(rep.Lines(), "\n"); !rep.Failed() || !strings.Contains(out, "needs its machine beside it: window.json") {
		t.Fatalf("report %q", out)
	}
}
