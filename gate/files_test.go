//go:build unix

package gate_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
	"github.com/stategate/stategate/xstate/js"
)

// logBuffer is a log that tests read.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// count counts the log lines that hold every one of parts.
func (b *logBuffer) count(parts ...string) int {
	n := 0
	for _, line := range strings.Split(b.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// library serves a folder (not watched: the tests reload it) with a
// loader, and logs to a buffer.
func library(t *testing.T, dir string, l *xstate.Loader) (*workflow.Library, *mcptest.Client, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	g := gate.New(gate.Options{Store: store.NewMemory(), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	lib := workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Loader: l, Logger: slog.New(slog.NewTextHandler(logs, nil)), Serve: g.Reloaded})
	if err := lib.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := g.HTTPHandler(gate.HTTPOptions{})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)
	return lib, connect(t, srv.URL+"/mcp"), logs
}

// reload reloads the folder, and fails the test if that does not end.
func reload(t *testing.T, lib *workflow.Library) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- lib.Reload(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the reload does not end")
	}
}

// TestReloadSkipsIrregularFiles checks that a FIFO or a link to a device
// named as a machine file neither blocks the start nor a later reload:
// each is skipped with a warning, logged once; the other machines are
// served.
func TestReloadSkipsIrregularFiles(t *testing.T) {
	dir := t.TempDir()
	atomicSave(t, filepath.Join(dir, "lamp.json"), lampV1)
	if err := syscall.Mkfifo(filepath.Join(dir, "x.json"), 0o644); err != nil {
		t.Skipf("cannot make a FIFO: %v", err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.json")); err != nil {
		t.Fatal(err)
	}
	lib, c, logs := library(t, dir, &xstate.Loader{Modules: &js.Host{}})
	if _, ok := c.Tools()["lamp_on"]; !ok {
		t.Fatal("lamp not served")
	}
	// A FIFO made while serving stops nothing: a new machine still comes.
	if err := syscall.Mkfifo(filepath.Join(dir, "y.mjs"), 0o644); err != nil {
		t.Fatal(err)
	}
	atomicSave(t, filepath.Join(dir, "fan.json"), `{"id":"fan","initial":"off","states":{"off":{"on":{"SPIN":"off"}}}}`)
	reload(t, lib)
	reload(t, lib)
	if _, ok := c.Tools()["fan_spin"]; !ok {
		t.Fatal("fan not served after a FIFO was made")
	}
	for _, f := range []string{"x.json", "y.mjs", "zero.json"} {
		if n := logs.count("not a regular file", f); n != 1 {
			t.Errorf("%s: warned %d times, want once:\n%s", f, n, logs)
		}
	}
}

// TestHostileFilesKeepTheServer drops files that took the process down
// into a served folder: a module whose top-level code takes memory
// without end, and one nested deeper than the parsers take. Each is
// rejected, saying why, and the server keeps serving.
func TestHostileFilesKeepTheServer(t *testing.T) {
	dir := t.TempDir()
	atomicSave(t, filepath.Join(dir, "lamp.json"), lampV1)
	lib, c, _ := library(t, dir, &xstate.Loader{Modules: &js.Host{Memory: 32 << 20}})
	atomicSave(t, filepath.Join(dir, "hog.mjs"), "let s = 'x';\nfor (;;) s = s + s;\n")
	atomicSave(t, filepath.Join(dir, "deep.mjs"), "export default "+strings.Repeat("!", 2_000_000)+"1;\n")
	reload(t, lib)
	errs := lib.Errors()
	for file, want := range map[string]string{"hog.mjs": "memory budget exceeded", "deep.mjs": "nests too deeply"} {
		if err := errs[filepath.Join(dir, file)]; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", file, err, want)
		}
	}
	if _, sc, isErr := c.Call("lamp_on", nil); isErr || sc["state"] != "on" {
		t.Fatalf("lamp after the hostile files: %v %v", isErr, sc)
	}
}

// TestReloadMessages checks the log of reloads: a machine added is
// logged; a rejected file's warnings once per version of it; and a copy
// of a JSON machine, whose implementations module is not there under the
// copy's name, is rejected for its machine id, saying what a copy needs.
func TestReloadMessages(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"invoice.json", "invoice.impl.ts"} {
		data, err := os.ReadFile(filepath.Join("..", "machines", f))
		if err != nil {
			t.Fatal(err)
		}
		atomicSave(t, filepath.Join(dir, f), string(data))
	}
	old := time.Now().Add(-time.Hour)
	_ = os.Chtimes(filepath.Join(dir, "invoice.json"), old, old)
	lib, c, logs := library(t, dir, &xstate.Loader{Modules: &js.Host{}})
	if logs.count("machine added") != 0 {
		t.Errorf("machines logged as added at start:\n%s", logs)
	}
	atomicSave(t, filepath.Join(dir, "lamp.json"), lampV1)
	// Rejected (its guard has no implementation) with a warning (intial).
	broken := `{"id":"broken","intial":"x","initial":"a","states":{"a":{"on":{"GO":{"guard":"nope","target":"a"}}}}}`
	atomicSave(t, filepath.Join(dir, "broken.json"), broken)
	data, _ := os.ReadFile(filepath.Join(dir, "invoice.json"))
	copyFile := filepath.Join(dir, "invoice-copy.json")
	atomicSave(t, copyFile, string(data))
	for range 3 {
		reload(t, lib)
	}
	if n := logs.count("machine added", "lamp.json"); n != 1 {
		t.Errorf("lamp added: logged %d times, want once:\n%s", n, logs)
	}
	if n := logs.count("intial"); n != 1 {
		t.Errorf("the rejected file's warning: logged %d times over three reloads, want once:\n%s", n, logs)
	}
	err := lib.Errors()[copyFile]
	if err == nil || !strings.Contains(err.Error(), `machine id "invoice" is already served from`) || !strings.Contains(err.Error(), "invoice-copy.impl.ts") || strings.Contains(err.Error(), "no implementation") {
		t.Errorf("the copy: %v", err)
	}
	if n := logs.count("rejected", "invoice-copy.json"); n != 1 {
		t.Errorf("the copy's rejection: logged %d times, want once:\n%s", n, logs)
	}
	// A new version of the rejected file warns again.
	atomicSave(t, filepath.Join(dir, "broken.json"), strings.Replace(broken, `"a"`, `"b"`, -1))
	reload(t, lib)
	if n := logs.count("intial"); n != 2 {
		t.Errorf("the new version's warning: logged %d times in all, want twice", n)
	}
	if _, ok := c.Tools()["lamp_on"]; !ok {
		t.Fatal("lamp not served")
	}
}

// TestStatusQuotesNoFile checks that the status tool's fileError, which
// every client sees, names the file and the line of a broken machine file
// but quotes nothing of it (nor of a file it imports), while the server's
// log may.
func TestStatusQuotesNoFile(t *testing.T) {
	dir := t.TempDir()
	const good = `import { createMachine } from 'xstate';
export default createMachine({ id: 'door', initial: 'shut', states: { shut: { on: { OPEN: 'shut' } } } });
`
	door := filepath.Join(dir, "door.mjs")
	atomicSave(t, door, good)
	atomicSave(t, filepath.Join(dir, "creds.json"), "{\"password\": \"hunter2\" hunter3}\n")
	lib, c, logs := library(t, dir, &xstate.Loader{Modules: &js.Host{}})
	for _, broken := range []string{
		"import { createMachine } from 'xstate';\nconst secret = 'hunter2' hunter3;\n",
		"import { createMachine } from 'xstate';\nimport creds from './creds.json';\nexport default createMachine({ id: 'door', context: { creds } });\n",
		"import { createMachine } from 'xstate';\nimport creds from '/etc/passwd';\n",
	} {
		atomicSave(t, door, broken)
		reload(t, lib)
		_, sc, _ := c.Call("door_status", nil)
		fe, _ := sc["fileError"].(string)
		if fe == "" || strings.Contains(fe, "hunter") || strings.Contains(fe, "root:") {
			t.Errorf("fileError %q", fe)
		}
		if strings.Contains(fe, dir) {
			t.Errorf("fileError %q does not name the file relative to the machines folder", fe)
		}
		t.Logf("fileError: %s", fe)
	}
	if !strings.Contains(logs.String(), "hunter3") {
		t.Errorf("the log does not show the line for the file's author:\n%s", logs)
	}
}
