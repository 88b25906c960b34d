package gate_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/internal/watch"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
	"github.com/stategate/stategate/xstate/js"
)

const lampV1 = `{"id":"lamp","initial":"off","states":{"off":{"on":{"ON":"on"}},"on":{"on":{"OFF":"off"}}}}`

// serveDir serves a folder with a watching library.
func serveDir(t *testing.T, dir string) (url string, lib *workflow.Library) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	g := gate.New(gate.Options{Store: store.NewMemory(), Logger: log})
	lib = workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Loader: &xstate.Loader{Modules: &js.Host{}}, Logger: log, Serve: g.Reloaded})
	w, err := watch.NewTree(dir, 0, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := lib.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, func() { _ = lib.Reload(ctx) })
	}()
	t.Cleanup(func() { cancel(); <-done; w.Close() })
	srv := httptest.NewServer(g.HTTPHandler(gate.HTTPOptions{}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", lib
}

// awaitReload waits, reload by reload, until the library's file errors
// satisfy ok.
func awaitReload(t *testing.T, lib *workflow.Library, what string, ok func(map[string]error) bool) {
	t.Helper()
	reloaded := make(chan struct{}, 1)
	defer lib.Subscribe(func() {
		select {
		case reloaded <- struct{}{}:
		default:
		}
	})()
	deadline := time.After(mcptest.Wait)
	for !ok(lib.Errors()) {
		select {
		case <-reloaded:
		case <-deadline:
			t.Fatalf("no reload brought %s: %v", what, lib.Errors())
		}
	}
}

// atomicSave writes a file as editors do: a temporary file renamed over.
func atomicSave(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// serveLamp serves a folder holding lampV1, watched, and connects to it.
func serveLamp(t *testing.T) (dir, lamp string, c *mcptest.Client, lib *workflow.Library) {
	t.Helper()
	dir = t.TempDir()
	lamp = filepath.Join(dir, "lamp.json")
	if err := os.WriteFile(lamp, []byte(lampV1), 0o644); err != nil {
		t.Fatal(err)
	}
	url, lib := serveDir(t, dir)
	return dir, lamp, connect(t, url), lib
}

func TestHotReload(t *testing.T) {
	dir, lamp, c, lib := serveLamp(t)
	if _, ok := c.Tools()["lamp_on"]; !ok {
		t.Fatal("lamp_on not listed")
	}

	// An atomic save that adds an event: the tool appears.
	c.Drain()
	start := time.Now()
	atomicSave(t, lamp, strings.Replace(lampV1, `{"ON":"on"}`, `{"ON":"on","DIM":"on"}`, 1))
	c.AwaitChanged()
	t.Logf("atomic save to list_changed: %v", time.Since(start))
	c.AwaitTools("lamp_dim", func(m map[string]mcp.Tool) bool { _, ok := m["lamp_dim"]; return ok })

	// A save that changes no tool tells nobody.
	c.Drain()
	atomicSave(t, lamp, strings.Replace(lampV1, `{"ON":"on"}`, `{ "ON": "on", "DIM": "on" }`, 1))
	c.NoChange()

	// An in-place write (no rename) is picked up too.
	if err := os.WriteFile(lamp, []byte(strings.Replace(lampV1, `{"ON":"on"}`, `{"ON":"on","DIM":"on","BLINK":"on"}`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	c.AwaitTools("lamp_blink", func(m map[string]mcp.Tool) bool { _, ok := m["lamp_blink"]; return ok })
	atomicSave(t, lamp, strings.Replace(lampV1, `{"ON":"on"}`, `{"ON":"on","DIM":"on"}`, 1))
	c.AwaitTools("no lamp_blink", func(m map[string]mcp.Tool) bool { _, ok := m["lamp_blink"]; return !ok })

	// A broken file keeps the last good version serving; status says why.
	if err := os.WriteFile(lamp, []byte(`{"id":"lamp","initial":"off","states":{"off":{"on":{"ON":"nowhere"}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	awaitReload(t, lib, "the broken file's error", func(errs map[string]error) bool {
		return errs[lamp] != nil && strings.Contains(errs[lamp].Error(), "nowhere")
	})
	if _, sc, _ := c.Call("lamp_status", nil); !strings.Contains(fmt.Sprint(sc["fileError"]), "nowhere") {
		t.Fatalf("status does not report the broken file: %v", sc)
	}
	if _, ok := c.Tools()["lamp_dim"]; !ok {
		t.Fatal("the broken file took the last good version away")
	}

	// A new subfolder with a machine: its tools appear.
	sub := filepath.Join(dir, "more")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	atomicSave(t, filepath.Join(sub, "fan.json"), `{"id":"fan","initial":"off","states":{"off":{"on":{"SPIN":"off"}}}}`)
	c.AwaitTools("fan_spin", func(m map[string]mcp.Tool) bool { _, ok := m["fan_spin"]; return ok })

	// A rename keeps serving it; a delete takes its tools away.
	if err := os.Rename(filepath.Join(sub, "fan.json"), filepath.Join(sub, "fan2.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(sub, "fan2.json")); err != nil {
		t.Fatal(err)
	}
	c.AwaitTools("no fan_spin", func(m map[string]mcp.Tool) bool { _, ok := m["fan_spin"]; return !ok })
}

func TestReloadMigratesRemovedStates(t *testing.T) {
	_, lamp, c, _ := serveLamp(t)
	c.Call("lamp_on", nil)
	// The new version has no state "on": the instance moves to the
	// initial state, and keeps working.
	atomicSave(t, lamp, `{"id":"lamp","initial":"off","states":{"off":{"on":{"LIGHT":"lit"}},"lit":{"on":{"OFF":"off"}}}}`)
	sc := c.AwaitState("lamp_status", "off")
	if m, _ := sc["migrated"].(map[string]any); m == nil || m["from"] != "on" || m["to"] != "off" {
		t.Fatalf("status does not report the migration: %v", sc)
	}
	if _, sc, isErr := c.Call("lamp_light", nil); isErr || sc["state"] != "lit" {
		t.Fatalf("light: %v %v", isErr, sc)
	}
	// The migration is in the audit trail, with the next transition.
	_, sc, _ = c.Call("lamp_status", nil)
	recent, _ := sc["recent"].([]any)
	last, _ := recent[len(recent)-1].(map[string]any)
	if m, _ := last["migrated"].(map[string]any); last["tool"] != "lamp_light" || m == nil || m["from"] != "on" {
		t.Fatalf("audit trail: %v", recent)
	}
}

// TestHelperModuleReloadsItsMachine serves a machine that imports a helper
// module from its folder: the helper, which exports no machine, is not
// taken for a broken machine, and editing it reloads the machine.
func TestHelperModuleReloadsItsMachine(t *testing.T) {
	dir := t.TempDir()
	helper := filepath.Join(dir, "names.ts")
	atomicSave(t, helper, `export const EXTRA: string = 'KNOCK';`)
	atomicSave(t, filepath.Join(dir, "door.ts"), `import { createMachine } from 'xstate';
import { EXTRA } from './names';
export default createMachine({ id: 'door', initial: 'shut', states: {
  shut: { on: { OPEN: 'open', [EXTRA]: 'shut' } }, open: { on: { CLOSE: 'shut' } } } });`)
	url, _ := serveDir(t, dir)
	c := connect(t, url)
	if _, ok := c.Tools()["door_knock"]; !ok {
		t.Fatalf("door_knock not listed: %v", mcptest.Names(c.Tools()))
	}
	if _, sc, _ := c.Call("door_status", nil); sc["fileError"] != nil {
		t.Fatalf("a file error with a helper module beside the machine: %v", sc["fileError"])
	}
	atomicSave(t, helper, `export const EXTRA: string = 'RING';`)
	c.AwaitTools("door_ring", func(m map[string]mcp.Tool) bool {
		_, ring := m["door_ring"]
		_, knock := m["door_knock"]
		return ring && !knock
	})
}

// TestImportedConfigIsPartOfItsMachine serves a folder where a module
// builds its machine from a JSON config beside it: the config is not
// served as a second machine with the same id (whose tools would clash),
// and editing it reloads the module's machine.
func TestImportedConfigIsPartOfItsMachine(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "door.json")
	const v1 = `{"id":"door","initial":"shut","states":{"shut":{"on":{"OPEN":{"target":"open","actions":"count"}}},"open":{"on":{"CLOSE":"shut"}}}}`
	atomicSave(t, config, v1)
	atomicSave(t, filepath.Join(dir, "door.ts"), `import { setup, assign } from 'xstate';
import config from './door.json';
export default setup({ actions: { count: assign({ n: ({ context }) => (context.n ?? 0) + 1 }) } })
  .createMachine({ ...(config as any), context: { n: 0 } });`)
	url, _ := serveDir(t, dir)
	c := connect(t, url)
	_, sc, isErr := c.Call("door_open", nil)
	if ctx, _ := sc["context"].(map[string]any); isErr || sc["state"] != "open" || ctx["n"] != 1.0 {
		t.Fatalf("open (the module's machine, with its action): %v %v", isErr, sc)
	}
	atomicSave(t, config, strings.Replace(v1, `"CLOSE":"shut"`, `"CLOSE":"shut","SLAM":"shut"`, 1))
	c.AwaitTools("door_slam", func(m map[string]mcp.Tool) bool { _, ok := m["door_slam"]; return ok })
}

// TestCopiedMachineDoesNotStopTheOthers drops a copy of a served machine
// file (same machine id, one more event) into the folder: the original
// keeps serving, the copy is rejected, and other changes still apply.
func TestCopiedMachineDoesNotStopTheOthers(t *testing.T) {
	dir, lamp, c, _ := serveLamp(t)
	c.Call("lamp_on", nil)
	atomicSave(t, filepath.Join(dir, "lamp-copy.json"), strings.Replace(lampV1, `{"ON":"on"}`, `{"ON":"on","DIM":"on"}`, 1))
	atomicSave(t, filepath.Join(dir, "fan.json"), `{"id":"fan","initial":"off","states":{"off":{"on":{"SPIN":"off"}}}}`)
	c.AwaitTools("fan_spin", func(m map[string]mcp.Tool) bool { _, ok := m["fan_spin"]; return ok })
	if _, ok := c.Tools()["lamp_dim"]; ok {
		t.Fatal("the copy's tools are served")
	}
	if _, sc, isErr := c.Call("lamp_off", nil); isErr || sc["state"] != "off" {
		t.Fatalf("the original: %v %v", isErr, sc)
	}
	// Editing the original still reloads it.
	atomicSave(t, lamp, strings.Replace(lampV1, `{"ON":"on"}`, `{"ON":"on","BLINK":"on"}`, 1))
	c.AwaitTools("lamp_blink", func(m map[string]mcp.Tool) bool { _, ok := m["lamp_blink"]; return ok })
}

// TestCopiedMachineAtStart starts on a folder holding a machine file and a
// newer copy of it: the server starts, serving the older file.
func TestCopiedMachineAtStart(t *testing.T) {
	dir := t.TempDir()
	lamp, lampCopy := filepath.Join(dir, "lamp.json"), filepath.Join(dir, "a-copy.json")
	atomicSave(t, lamp, lampV1)
	atomicSave(t, lampCopy, strings.Replace(lampV1, `{"ON":"on"}`, `{"ON":"on","DIM":"on"}`, 1))
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(lamp, old, old); err != nil {
		t.Fatal(err)
	}
	url, _ := serveDir(t, dir)
	c := connect(t, url)
	tools := c.Tools()
	if _, ok := tools["lamp_on"]; !ok {
		t.Fatalf("lamp not served: %v", mcptest.Names(tools))
	}
	if _, ok := tools["lamp_dim"]; ok {
		t.Fatalf("the newer copy is served: %v", mcptest.Names(tools))
	}
}
