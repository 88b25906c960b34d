package gate_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/store/badger"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
	"github.com/stategate/stategate/xstate/js"
)

const kettle = `{"id":"kettle","initial":"cold","states":{
  "cold":{"on":{"BOIL":"heating"}},
  "heating":{"after":{"150":"hot"},"on":{"CANCEL":"cold"}},
  "hot":{"after":{"60000":"cold"}}}}`

// serveStore serves a folder on a given store, with its timers running.
func serveStore(t *testing.T, dir string, st store.Store) (url string) {
	t.Helper()
	return serveLogged(t, dir, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// serveLogged is serveStore with the server's logs going to log.
func serveLogged(t *testing.T, dir string, st store.Store, log *slog.Logger) (url string) {
	t.Helper()
	return serveInstances(t, dir, workflow.NewInstances(workflow.InstancesOptions{Store: st, Logger: log}), log)
}

// serveInstances serves a folder with the given instances, their timers
// running.
func serveInstances(t *testing.T, dir string, inst *workflow.Instances, log *slog.Logger) (url string) {
	t.Helper()
	g := gate.New(gate.Options{Instances: inst, Logger: log})
	lib := workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Loader: &xstate.Loader{Modules: &js.Host{}}, Logger: log, Serve: g.Reloaded})
	if err := lib.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { g.RunTimers(ctx); close(done) }()
	srv := httptest.NewServer(g.HTTPHandler(gate.HTTPOptions{}))
	t.Cleanup(func() { srv.Close(); cancel(); <-done })
	return srv.URL + "/mcp"
}

func TestTimerFiresInARunningServer(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kettle.json"), []byte(kettle), 0o644); err != nil {
		t.Fatal(err)
	}
	c := connect(t, serveStore(t, dir, store.NewMemory()))
	_, sc, _ := c.Call("kettle_boil", nil)
	if sc["state"] != "heating" {
		t.Fatalf("boil: %v", sc)
	}
	sc = c.AwaitState("kettle_status", "hot") // the after timer moved the kettle
	if recent, _ := sc["recent"].([]any); len(recent) != 2 {
		t.Fatalf("audit trail: %v", sc["recent"])
	}
}

func TestOverdueTimerFiresAfterRestart(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kettle.json"), []byte(kettle), 0o644); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	open := func() *badger.Store {
		st, err := badger.Open(data, badger.Options{GCInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	clock := clockwork.NewFakeClock()
	st := open()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// A server with no timers running takes the call and goes down.
	g := gate.New(gate.Options{Instances: workflow.NewInstances(workflow.InstancesOptions{Store: st, Logger: log, Clock: clock}), Logger: log, SharedInstance: "k1"})
	lib := workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Loader: &xstate.Loader{Modules: &js.Host{}}, Logger: log, Serve: g.Reloaded})
	if err := lib.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.HTTPHandler(gate.HTTPOptions{}))
	c := connect(t, srv.URL+"/mcp")
	c.Call("kettle_boil", nil)
	c.Close()
	srv.Close()
	st.Close()
	clock.Advance(200 * time.Millisecond) // the 150 ms timer falls due while the server is down

	st = open()
	t.Cleanup(func() { st.Close() })
	inst := workflow.NewInstances(workflow.InstancesOptions{Store: st, Logger: log, Clock: clock})
	fired := make(chan workflow.Change, 10)
	inst.Subscribe(func(_ context.Context, c workflow.Change) { fired <- c })
	serveInstances(t, dir, inst, log)
	select {
	case c := <-fired:
		if c.Workflow != "kettle" || c.Handle != "k1" || !c.Moved {
			t.Fatalf("the change: %+v", c)
		}
	case <-time.After(mcptest.Wait):
		t.Fatal("the overdue timer did not fire")
	}
	rec, _, err := st.Load(context.Background(), store.Key{Machine: "kettle", Handle: "k1"})
	if err != nil || len(rec.Timers) != 1 || rec.Timers[0].Due.Sub(clock.Now().Add(time.Minute)).Abs() >= time.Millisecond {
		t.Fatalf("after the overdue timer, only hot's 60 s timer is left: %+v %v", rec.Timers, err)
	}
}

// TestHTTPRestartKeepsState restarts a server over HTTP on the same store:
// instances keep their state and context.
func TestHTTPRestartKeepsState(t *testing.T) {
	dir := t.TempDir()
	for f, src := range testMachines {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data := t.TempDir()
	open := func() *badger.Store { return openBadger(t, data) }
	st := open()
	log := quietLog()
	g := gate.New(gate.Options{Store: st, Logger: log})
	if err := workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Loader: &xstate.Loader{Modules: &js.Host{}}, Logger: log, Serve: g.Reloaded}).Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.HTTPHandler(gate.HTTPOptions{}))
	c := connect(t, srv.URL+"/mcp")
	c.Call("order_add", map[string]any{"order_id": "A1"})
	c.Call("order_add", map[string]any{"order_id": "A1"})
	c.Call("order_close", map[string]any{"order_id": "A1"})
	c.Close()
	srv.Close()
	st.Close()

	st = open()
	t.Cleanup(func() { st.Close() })
	c2 := connect(t, serveStore(t, dir, st))
	_, sc, _ := c2.Call("order_status", map[string]any{"order_id": "A1"})
	if sc["state"] != "closed" || sc["context"].(map[string]any)["items"] != 2.0 {
		t.Fatalf("after a restart: %v", sc)
	}
}

// logSignal is a slog handler that passes the timers' messages on to a
// channel.
type logSignal chan string

func (s logSignal) Enabled(context.Context, slog.Level) bool { return true }
func (s logSignal) Handle(_ context.Context, r slog.Record) error {
	if !strings.HasPrefix(r.Message, "timer") {
		return nil
	}
	select {
	case s <- r.Message:
	default: // nobody waits for more
	}
	return nil
}
func (s logSignal) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s logSignal) WithGroup(string) slog.Handler      { return s }

// TestTimerWhoseStepFails fires a delayed transition whose action throws:
// the instance keeps its state, and the timer is gone rather than fired
// again and again.
func TestTimerWhoseStepFails(t *testing.T) {
	src := `import { createMachine } from 'xstate';
export default createMachine({ id: 'fuse', initial: 'idle', states: {
  idle: { on: { ARM: 'armed' } },
  armed: { after: { 50: { target: 'blown', actions: () => { throw new Error('short circuit'); } } },
           on: { DISARM: 'idle' } },
  blown: {} } });`
	dir := filepath.Dir(writeMachine(t, "fuse.mjs", src))
	logs := make(logSignal, 16)
	c := connect(t, serveLogged(t, dir, store.NewMemory(), slog.New(logs)))
	if _, sc, _ := c.Call("fuse_arm", nil); sc["state"] != "armed" {
		t.Fatalf("arm: %v", sc)
	}
	failed := false
	for msg := range logs {
		if strings.HasPrefix(msg, "timer: the machine failed") {
			failed = true
		}
		if msg == "timer fired" {
			break
		}
	}
	if !failed {
		t.Fatal("the timer fired without its step failing")
	}
	_, sc, _ := c.Call("fuse_status", nil)
	if sc["state"] != "armed" || sc["status"] != "active" || sc["timers"] != nil {
		t.Fatalf("after the failed timer: %v", sc)
	}
	if _, sc, isErr := c.Call("fuse_disarm", nil); isErr || sc["state"] != "idle" {
		t.Fatalf("disarm: %v %v", isErr, sc)
	}
}

// TestChildMachineTimerFires serves a machine whose invoked child machine
// waits on an after: the child's timer is stored with the instance and
// fires after the call that started the child, moving the parent.
func TestChildMachineTimerFires(t *testing.T) {
	src := `import { createMachine, assign } from 'xstate';
const waiter = createMachine({ id: 'waiter', initial: 'waiting',
  states: { waiting: { after: { 150: 'done' } }, done: { type: 'final' } }, output: { waited: true } });
export default createMachine({ id: 'job', initial: 'idle', context: { result: null }, states: {
  idle: { on: { START: 'running' } },
  running: { invoke: { id: 'w', src: waiter, onDone: { target: 'finished', actions: assign({ result: ({ event }) => event.output }) } } },
  finished: { on: { ARCHIVE: 'idle' } } } });`
	dir := filepath.Dir(writeMachine(t, "job.mjs", src))
	c := connect(t, serveStore(t, dir, store.NewMemory()))
	if _, sc, _ := c.Call("job_start", nil); sc["state"] != "running" {
		t.Fatalf("start: %v", sc)
	}
	_, sc, _ := c.Call("job_status", nil)
	timers, _ := sc["timers"].([]any)
	if len(timers) != 1 {
		t.Fatalf("stored timers: %v", sc["timers"])
	}
	sc = c.AwaitState("job_status", "finished")
	if r, _ := sc["context"].(map[string]any)["result"].(map[string]any); r["waited"] != true {
		t.Fatalf("the child's output: %v", sc["context"])
	}
}

// TestDelayedSendToChildFires serves a machine that sends its invoked
// child a delayed event: the send is stored with the instance and reaches
// the child after the call, whose answer moves the parent.
func TestDelayedSendToChildFires(t *testing.T) {
	src := `import { createMachine, sendTo, sendParent } from 'xstate';
const echo = createMachine({ id: 'echo', on: { PING: { actions: sendParent({ type: 'PONG' }) } } });
export default createMachine({ id: 'probe', initial: 'idle', states: {
  idle: { on: { START: 'waiting' } },
  waiting: { entry: sendTo('w', { type: 'PING' }, { delay: 150 }), invoke: { id: 'w', src: echo }, on: { PONG: 'answered' } },
  answered: { on: { AGAIN: 'waiting' } } } });`
	dir := filepath.Dir(writeMachine(t, "probe.mjs", src))
	c := connect(t, serveStore(t, dir, store.NewMemory()))
	if _, sc, _ := c.Call("probe_start", nil); sc["state"] != "waiting" {
		t.Fatalf("start: %v", sc)
	}
	_, sc, _ := c.Call("probe_status", nil)
	if timers, _ := sc["timers"].([]any); len(timers) != 1 || timers[0].(map[string]any)["to"] != "/w" {
		t.Fatalf("stored timers: %v", sc["timers"])
	}
	c.AwaitState("probe_status", "answered")
}

// openBadger opens a Badger store in dir for a test.
func openBadger(t *testing.T, dir string) *badger.Store {
	t.Helper()
	st, err := badger.Open(dir, badger.Options{GCInterval: -1, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
