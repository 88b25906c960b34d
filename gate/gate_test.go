package gate_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
	"github.com/stategate/stategate/xstate/js"
)

func writeMachine(t *testing.T, name, src string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestBuiltinsYieldToEvents(t *testing.T) {
	f := writeMachine(t, "game.json", `{"id":"game","initial":"on","states":{"on":{"on":{"RESET":"on","STATUS":"on","Jump!":"on"}}}}`)
	m, _, err := workflow.Load(&xstate.Loader{Modules: &js.Host{}}, f, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range m.Tools {
		names = append(names, tl.Name)
	}
	if got := strings.Join(names, ","); got != "game_jump_,game_reset,game_status" {
		t.Fatalf("event tools %s", got)
	}
	if m.StatusTool != "game__status" || m.ResetTool != "game__reset" {
		t.Fatalf("built-ins %s %s", m.StatusTool, m.ResetTool)
	}
}

func TestToolNameClash(t *testing.T) {
	f := writeMachine(t, "m.json", `{"id":"m","initial":"a","states":{"a":{"on":{"A_B":"a","A-B":{"target":"a","meta":{"tool":{"name":"m_a_b"}}}}}}}`)
	_, _, err := workflow.Load(&xstate.Loader{Modules: &js.Host{}}, f, "")
	if err == nil || !strings.Contains(err.Error(), `"A-B"`) || !strings.Contains(err.Error(), `"A_B"`) {
		t.Fatalf("err = %v, want a clash naming both events", err)
	}
}

func TestMissingGuardIsRefused(t *testing.T) {
	f := writeMachine(t, "m.json", `{"id":"m","initial":"a","states":{"a":{"on":{"GO":{"guard":"ready","target":"a"}}}}}`)
	_, _, err := workflow.Load(&xstate.Loader{Modules: &js.Host{}}, f, "")
	if err == nil || !strings.Contains(err.Error(), `guard "ready" has no implementation`) {
		t.Fatalf("err = %v", err)
	}
}

func TestScriptErrorKeepsTheSnapshot(t *testing.T) {
	url, _ := setupWith(t, map[string]string{"fragile.mjs": `import { createMachine, assign } from 'xstate';
export default createMachine({ id: 'fragile', initial: 'a', context: { n: 0 }, states: {
  a: { on: { BUMP: { actions: assign({ n: ({ context }) => context.n + 1 }) },
             BREAK: { target: 'b', actions: () => { throw new Error('disk on fire'); } } } },
  b: {} } });`})
	c := connect(t, url)
	c.Call("fragile_bump", nil)
	text, sc, isErr := c.Call("fragile_break", nil)
	if !isErr || !strings.Contains(text, "disk on fire") || sc["error"] != "ERROR" {
		t.Fatalf("break: %v %q %v", isErr, text, sc)
	}
	_, sc, _ = c.Call("fragile_status", nil)
	if sc["state"] != "a" || sc["status"] != "active" || sc["context"].(map[string]any)["n"] != 1.0 {
		t.Fatalf("after a failed call: %v", sc)
	}
}

// TestMetaTool checks meta.tool's fields as a machine gives them: title
// and annotations reach the tool, and a field of the wrong type or an
// unknown one is an error naming the event, the state and the field.
func TestMetaTool(t *testing.T) {
	load := func(tool string) (*workflow.Workflow, error) {
		f := writeMachine(t, "m.json", `{"id":"m","initial":"a","states":{"a":{"on":{"GO":{"target":"a","meta":{"tool":`+tool+`}}}}}}`)
		m, _, err := workflow.Load(&xstate.Loader{Modules: &js.Host{}}, f, "")
		return m, err
	}
	m, err := load(`{"name":"m.go-now","title":"Go now","annotations":{"destructiveHint":true,"idempotentHint":false}}`)
	if err != nil {
		t.Fatal(err)
	}
	if tl := m.Tools[0]; tl.Name != "m.go-now" || tl.Title != "Go now" || len(tl.Hints) != 2 || !tl.Hints["destructiveHint"] || tl.Hints["idempotentHint"] {
		t.Fatalf("tool %+v", tl)
	}
	for tool, want := range map[string]string{
		`"go"`:                                   "event GO in state a: meta.tool must be an object",
		`{"name":5}`:                             "meta.tool.name must be a string",
		`{"name":"go now"}`:                      `meta.tool.name "go now" is not a tool name`,
		`{"titel":"Go"}`:                         "meta.tool.titel is not a field of meta.tool",
		`{"inputSchema":[]}`:                     "meta.tool.inputSchema must be an object",
		`{"annotations":{"destructive":true}}`:   "meta.tool.annotations.destructive is not a tool annotation",
		`{"annotations":{"readOnlyHint":"yes"}}`: "meta.tool.annotations.readOnlyHint must be true or false",
		`{"annotations":{"title":"Go"}}`:         "the title is meta.tool.title",
		`{"compactDescription":{"text":"Go."}}`:  "meta.tool.compactDescription must be a string",
		`{"inputSchema":{"type":"object","properties":{"type":{"type":"string"}}}}`: `the property "type" cannot be an argument`,
	} {
		if _, err := load(tool); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("meta.tool %s: err = %v, want %q", tool, err, want)
		}
	}
}

// TestPanicKeepsTheServer checks that a panic while a machine runs (here
// a Go action's; an engine bug would do the same) fails the call with an
// error, keeps the instance as it was, and leaves the server serving.
func TestPanicKeepsTheServer(t *testing.T) {
	dir := t.TempDir()
	src := `{"id":"m","initial":"a","context":{"n":0},"states":{"a":{"on":{
		"BOOM":{"target":"b","actions":"explode"},
		"INC":{"actions":"inc"}}},"b":{}}}`
	if err := os.WriteFile(filepath.Join(dir, "m.json"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := xstate.NewRegistry().
		Action("explode", func(interp.Args, any) error { panic("kaboom") }).
		Assign("inc", func(a interp.Args, _ any) (map[string]any, error) {
			return map[string]any{"n": a.Context.(map[string]any)["n"].(float64) + 1}, nil
		})
	g := gate.New(gate.Options{Store: store.NewMemory(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	lib := workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Loader: &xstate.Loader{Registry: reg, Modules: &js.Host{}}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Serve: g.Reloaded})
	if err := lib.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := g.HTTPHandler(gate.HTTPOptions{})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)
	c := connect(t, srv.URL+"/mcp")
	text, sc, isErr := c.Call("m_boom", nil)
	if !isErr || !strings.Contains(text, "kaboom") || !strings.Contains(text, "keeps its state a") || sc["error"] != "ERROR" {
		t.Fatalf("boom: %v %q %v", isErr, text, sc)
	}
	if text, _, isErr := c.Call("m_inc", nil); isErr {
		t.Fatalf("inc after the panic: %s", text)
	}
	if _, sc, _ := c.Call("m_status", nil); sc["state"] != "a" || sc["context"].(map[string]any)["n"] != 1.0 {
		t.Fatalf("status after the panic: %v", sc)
	}
}

// TestForbiddenTransitionHidesTheTool checks XState's forbidden transition
// (an event mapped to undefined in the active child state): the root
// handles PUBLISH, but while the document is locked the tool is not
// listed and a call is refused without moving; once unlocked it is listed
// and taken by the root's handler.
func TestForbiddenTransitionHidesTheTool(t *testing.T) {
	url, _ := setupWith(t, map[string]string{"doc.mjs": `import { createMachine } from 'xstate';
export default createMachine({ id: 'doc', initial: 'editing',
  on: { PUBLISH: '.published' },
  states: {
    editing: { initial: 'locked', states: {
      locked: { on: { PUBLISH: undefined, UNLOCK: 'unlocked' } },
      unlocked: {} } },
    published: { type: 'final' } } });`})
	c := connect(t, url)
	tools := c.Tools()
	if _, ok := tools["doc_publish"]; ok {
		t.Fatalf("doc_publish listed while PUBLISH is forbidden: %v", mcptest.Names(tools))
	}
	if _, ok := tools["doc_unlock"]; !ok {
		t.Fatalf("doc_unlock not listed: %v", mcptest.Names(tools))
	}
	text, sc, isErr := c.Call("doc_publish", nil)
	if !isErr || sc["error"] != "FORBIDDEN" || slices.Contains(anyStrings(sc["allowed"]), "doc_publish") {
		t.Fatalf("publish while locked: %v %q %v", isErr, text, sc)
	}
	if _, sc, _ := c.Call("doc_status", nil); !reflect.DeepEqual(sc["state"], map[string]any{"editing": "locked"}) {
		t.Fatalf("a forbidden call moved the document: %v", sc["state"])
	}
	if text, _, isErr := c.Call("doc_unlock", nil); isErr {
		t.Fatalf("unlock: %s", text)
	}
	if _, ok := c.Tools()["doc_publish"]; !ok {
		t.Fatalf("doc_publish not listed once unlocked: %v", mcptest.Names(c.Tools()))
	}
	if _, sc, isErr := c.Call("doc_publish", nil); isErr || sc["state"] != "published" || sc["status"] != "done" {
		t.Fatalf("publish once unlocked: %v %v", isErr, sc)
	}
}

// TestHandleKeyClashIsALoadError checks that a handle key of the name of
// a tool's argument (--handle-key amount, with the bundled invoice's
// invoice_add_line taking an amount) fails the machine's file when served,
// naming the tool and the argument, rather than replacing the argument;
// machines without such an argument are served.
func TestHandleKeyClashIsALoadError(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"invoice.json", "invoice.impl.ts", "db-migration.mjs"} {
		data, err := os.ReadFile(filepath.Join("..", "machines", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	g := gate.New(gate.Options{Store: store.NewMemory(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	lib := workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Loader: &xstate.Loader{Modules: &js.Host{}}, HandleKey: "amount", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Serve: g.Reloaded})
	if err := lib.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	err := lib.Errors()[filepath.Join(dir, "invoice.json")]
	if !errors.Is(err, workflow.ErrHandleKeyClash) || !strings.Contains(err.Error(), `tool invoice_add_line: inputSchema: handle key "amount" is also a property`) {
		t.Fatalf("invoice.json with --handle-key amount: err = %v", err)
	}
	var served []string
	for _, m := range g.Workflows() {
		served = append(served, m.ID)
	}
	if !slices.Equal(served, []string{"migration"}) {
		t.Fatalf("served %v, want only migration", served)
	}
}

// TestMigrationLogNamesTheStates checks that the log of a migration names
// the states as the status tool shows them: the instance in on moves to
// the initial state off of a version without on, and the log says
// from=on to=off (it said to={}, the pruned value).
func TestMigrationLogNamesTheStates(t *testing.T) {
	dir := t.TempDir()
	lamp := filepath.Join(dir, "lamp.json")
	write := func(src string) {
		if err := os.WriteFile(lamp, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"id":"lamp","initial":"off","states":{"off":{"on":{"ON":"on"}},"on":{"on":{"OFF":"off"}}}}`)
	logs := &logBuffer{}
	g := gate.New(gate.Options{Store: store.NewMemory(), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	lib := workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Loader: &xstate.Loader{Modules: &js.Host{}}, Logger: slog.New(slog.NewTextHandler(logs, nil)), Serve: g.Reloaded})
	if err := lib.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := g.HTTPHandler(gate.HTTPOptions{})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)
	c := connect(t, srv.URL+"/mcp")
	if _, sc, isErr := c.Call("lamp_on", nil); isErr || sc["state"] != "on" {
		t.Fatalf("on: %v %v", isErr, sc)
	}
	write(`{"id":"lamp","initial":"off","states":{"off":{"on":{"LIGHT":"lit"}},"lit":{}}}`)
	if err := lib.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, sc, _ := c.Call("lamp_status", nil)
	if sc["state"] != "off" || sc["migrated"] == nil {
		t.Fatalf("status after the migration: %v", sc)
	}
	var line string
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, "instance migrated") {
			line = l
		}
	}
	if !strings.Contains(line, " from=on to=off ") {
		t.Fatalf("migration log %q, want from=on to=off", line)
	}
}
