package workflow_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// door is a machine with a timer: open closes itself after 30 minutes.
const door = `{"id":"door","initial":"closed","context":{"opened":0},"states":{
  "closed":{"on":{"OPEN":{"target":"open","actions":"count"}}},
  "open":{"on":{"CLOSE":"closed"},"after":{"1800000":"closed"}}}}`

func doorWorkflow(t *testing.T) *workflow.Workflow {
	t.Helper()
	reg := xstate.NewRegistry().Assign("count", func(a interp.Args, _ any) (map[string]any, error) {
		return map[string]any{"opened": a.Context.(map[string]any)["opened"].(float64) + 1}, nil
	})
	m, _, err := (&xstate.Loader{Registry: reg}).Parse("door.json", []byte(door))
	if err != nil {
		t.Fatal(err)
	}
	w, err := workflow.New(m, workflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func instances(t *testing.T, o workflow.InstancesOptions, ws ...*workflow.Workflow) *workflow.Instances {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quiet()
	}
	x := workflow.NewInstances(o)
	if err := x.SetWorkflows(ws...); err != nil {
		t.Fatal(err)
	}
	return x
}

// changes subscribes to an Instances' changes, on a channel.
func changes(t *testing.T, x *workflow.Instances) <-chan workflow.Change {
	ch := make(chan workflow.Change, 100)
	t.Cleanup(x.Subscribe(func(_ context.Context, c workflow.Change) { ch <- c }))
	return ch
}

func await(t *testing.T, ch <-chan workflow.Change, what string) workflow.Change {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(time.Minute):
		t.Fatalf("no change: %s", what)
	}
	return workflow.Change{}
}

// TestTimersOnAFakeClock drives a timer with a fake clock: the instance's
// timer is due 30 minutes after the event on the clock, nothing fires
// before, and it fires once the clock gets there, stored with its audit
// entry, subscribers told. Nothing sleeps.
func TestTimersOnAFakeClock(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	st := store.NewMemory()
	x := instances(t, workflow.InstancesOptions{Store: st, Clock: clock}, doorWorkflow(t))
	ch := changes(t, x)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- x.RunTimers(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	s, err := x.Send(ctx, "door", "d1", interp.Event{Type: "OPEN"})
	if err != nil || s.Value != "open" || len(s.Timers) != 1 {
		t.Fatalf("open: %+v %v", s, err)
	}
	if due := s.Timers[0].Due; !due.Equal(clock.Now().Add(30 * time.Minute)) {
		t.Fatalf("the timer is due at %v, want 30 minutes after %v", due, clock.Now())
	}
	await(t, ch, "the open")
	// The scheduler waits for the timer on the clock.
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(29 * time.Minute)
	if s, _ := x.Snapshot(ctx, "door", "d1"); s.Value != "open" {
		t.Fatalf("fired early: %v", s.Value)
	}
	clock.Advance(time.Minute)
	c := await(t, ch, "the timer")
	if c.Workflow != "door" || c.Handle != "d1" || !c.Moved {
		t.Fatalf("change: %+v", c)
	}
	s, _ = x.Snapshot(ctx, "door", "d1")
	if s.Value != "closed" || len(s.Timers) != 0 {
		t.Fatalf("after the timer: %+v", s)
	}
	trail, _ := st.Audit(ctx, store.Key{Machine: "door", Handle: "d1"}, 0)
	last := trail[len(trail)-1]
	if last.Tool != workflow.TimerTool || !last.Time.Equal(clock.Now()) || last.From != "open" || last.To != "closed" {
		t.Fatalf("the timer's audit entry: %+v", last)
	}
}

// TestTimersLoadedAtStart: a timer stored by an earlier process that fell
// due while it was down fires at once when the timers run.
func TestTimersLoadedAtStart(t *testing.T) {
	clock := clockwork.NewFakeClock()
	st := store.NewMemory()
	w := doorWorkflow(t)
	first := instances(t, workflow.InstancesOptions{Store: st, Clock: clock}, w)
	if _, err := first.Send(context.Background(), "door", "d2", interp.Event{Type: "OPEN"}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour) // the server was down meanwhile
	x := instances(t, workflow.InstancesOptions{Store: st, Clock: clock}, w)
	ch := changes(t, x)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- x.RunTimers(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	await(t, ch, "the overdue timer")
	if s, _ := x.Snapshot(ctx, "door", "d2"); s.Value != "closed" {
		t.Fatalf("after the overdue timer: %v", s.Value)
	}
}

// TestHoldKeepsOtherEventsOut: while an instance is held, an event on it
// waits, and one on another instance does not; a waiter whose context
// ends gives up.
func TestHoldKeepsOtherEventsOut(t *testing.T) {
	w := doorWorkflow(t)
	x := instances(t, workflow.InstancesOptions{}, w)
	ctx := context.Background()
	h, err := x.Hold(ctx, w, "d1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.Send(ctx, "door", "other", interp.Event{Type: "OPEN"}); err != nil {
		t.Fatalf("another instance waited: %v", err)
	}
	short, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := x.Send(short, "door", "d1", interp.Event{Type: "OPEN"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a Send whose context ended while the instance was held: %v", err)
	}
	sent := make(chan error, 1)
	go func() {
		_, err := x.Send(ctx, "door", "d1", interp.Event{Type: "OPEN"})
		sent <- err
	}()
	in, err := h.Load(ctx)
	if err != nil || in.Snapshot.Value() != "closed" {
		t.Fatalf("held: %v %v", in, err)
	}
	select {
	case err := <-sent:
		t.Fatalf("the Send went through while the instance was held: %v", err)
	case <-time.After(50 * time.Millisecond): // an absence cannot be awaited
	}
	h.Release()
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}

// TestSaveAndApply: a hold's Save stores the instance as it is (an
// intent: subscribers hear of a change that did not move it), Apply runs
// an event (a move), a refused check changes nothing, and an event the
// machine does not take is ErrRejected.
func TestSaveAndApply(t *testing.T) {
	w := doorWorkflow(t)
	st := store.NewMemory()
	x := instances(t, workflow.InstancesOptions{Store: st}, w)
	ch := changes(t, x)
	ctx := context.Background()
	h, err := x.Hold(ctx, w, "d1")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	intent, err := h.Save(ctx, store.AuditEntry{Tool: "open_door", Intent: &store.Intent{Event: "OPEN"}})
	if err != nil || intent.Version != 1 {
		t.Fatalf("intent: %v %v", intent, err)
	}
	if c := await(t, ch, "the intent"); c.Moved || c.Version != 1 {
		t.Fatalf("the intent's change: %+v", c)
	}
	stop := errors.New("not now")
	if _, _, err := h.Apply(ctx, interp.Event{Type: "OPEN"}, store.AuditEntry{Tool: "t"}, func(*workflow.Instance) error { return stop }); err != stop {
		t.Fatalf("a refused check: %v", err)
	}
	if _, _, err := h.Apply(ctx, interp.Event{Type: "CLOSE"}, store.AuditEntry{Tool: "t"}, nil); !errors.Is(err, workflow.ErrRejected) {
		t.Fatalf("CLOSE while closed: %v", err)
	}
	saved, _, err := h.Apply(ctx, interp.Event{Type: "OPEN"}, store.AuditEntry{Tool: "open_door", Settles: intent.Version}, nil)
	if err != nil || saved.Version != 2 || saved.Snapshot.Value() != "open" {
		t.Fatalf("open: %v %v", saved, err)
	}
	if c := await(t, ch, "the open"); !c.Moved || c.Version != 2 {
		t.Fatalf("the open's change: %+v", c)
	}
	trail, _ := st.Audit(ctx, store.Key{Machine: "door", Handle: "d1"}, 0)
	if len(trail) != 2 || len(store.Unsettled(trail)) != 0 || trail[0].Intent.Run == "" {
		t.Fatalf("trail: %+v", trail)
	}
}

// TestNewRefusesBadMachines: a machine whose tools cannot be built is an
// error naming the workflow, never a panic.
func TestNewRefusesBadMachines(t *testing.T) {
	for name, src := range map[string]string{
		"two events, one tool": `{"id":"x","initial":"a","states":{"a":{"on":{"GO":{"target":"a","meta":{"tool":{"name":"go"}}},"RUN":{"target":"a","meta":{"tool":{"name":"go"}}}}}}}`,
		"bad meta.tool":        `{"id":"x","initial":"a","states":{"a":{"on":{"GO":{"target":"a","meta":{"tool":{"nmae":"go"}}}}}}}`,
		"bad input schema":     `{"id":"x","initial":"a","states":{"a":{"on":{"GO":{"target":"a","meta":{"tool":{"inputSchema":{"type":"string"}}}}}}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			m, _, err := (&xstate.Loader{}).Parse("x.json", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			w, err := workflow.New(m, workflow.Options{})
			if err == nil || w != nil || !strings.HasPrefix(err.Error(), "workflow x: ") {
				t.Fatalf("New: %v, %v", w, err)
			}
		})
	}
}

// TestLibraryServesEachReload: a reload hands its workflows and the files
// that fail to Serve, and tells the subscribers; a file that breaks keeps
// its last good version, with its error.
func TestLibraryServesEachReload(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("lamp.json", `{"id":"lamp","initial":"off","states":{"off":{"on":{"ON":"on"}},"on":{}}}`)
	var mu sync.Mutex
	var got []workflow.Reload
	lib := workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Logger: quiet(), Serve: func(r workflow.Reload) error {
		mu.Lock()
		got = append(got, r)
		mu.Unlock()
		return nil
	}})
	reloads := make(chan struct{}, 10)
	defer lib.Subscribe(func() { reloads <- struct{}{} })()
	ctx := context.Background()
	if err := lib.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	<-reloads
	write("lamp.json", `{"id":"lamp","initial":"off","states":{"off":{"on":{"ON":"nowhere"}}}}`)
	if err := lib.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	<-reloads
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || len(got[0].Workflows) != 1 || len(got[0].Failed) != 0 || got[0].Dir != dir {
		t.Fatalf("first reload: %+v", got)
	}
	second := got[1]
	if len(second.Workflows) != 1 || second.Workflows[0] != got[0].Workflows[0] {
		t.Fatalf("the broken file's last good version is not served: %+v", second)
	}
	if err := second.Failed[filepath.Join(dir, "lamp.json")]; err == nil || !strings.Contains(workflow.PublicError(dir, err), "lamp.json") {
		t.Fatalf("the broken file's error: %v", second.Failed)
	}
	if ws := lib.Workflows(); len(ws) != 1 || ws[0].ID != "lamp" {
		t.Fatalf("Workflows: %v", ws)
	}
}

// TestLibraryKnowsProjectFolders: the JSON files every XState project's
// folder has (package.json, tsconfig.json) are no machines: not served,
// and not errors; check says "not a machine".
func TestLibraryKnowsProjectFolders(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"package.json":  `{"name":"machines","version":"1.0.0","dependencies":{"xstate":"^5.33.3"}}`,
		"tsconfig.json": `{"compilerOptions":{"strict":true,"module":"esnext"}}`,
		"lamp.json":     `{"id":"lamp","initial":"off","states":{"off":{"on":{"ON":"on"}},"on":{}}}`,
		// A project's packages: never loaded (a package's code is no
		// machine, and a machine may import none).
		"node_modules/xstate/package.json":      `{"name":"xstate"}`,
		"node_modules/xstate/dist/xstate.js":    `module.exports = require('./actors');`,
		"node_modules/other/machine.json":       `{"id":"lamp","initial":"x","states":{"x":{}}}`,
		"node_modules/other/node_modules/a.mjs": `export default 1;`,
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var served workflow.Reload
	lib := workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Logger: quiet(), Serve: func(r workflow.Reload) error { served = r; return nil }})
	if err := lib.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(served.Workflows) != 1 || served.Workflows[0].ID != "lamp" || len(served.Failed) != 0 {
		t.Fatalf("served %v, failed %v", served.Workflows, served.Failed)
	}
	rep, err := workflow.Check(&xstate.Loader{}, []string{dir, filepath.Join(dir, "package.json")}, "")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Join(rep.Lines(), "\n")
	for _, f := range []string{"package.json", "tsconfig.json"} {
		if !strings.Contains(lines, f+": skipped (not a machine") {
			t.Errorf("check of %s:\n%s", f, lines)
		}
	}
	if rep.Failed() || !strings.Contains(lines, "lamp.json: ok") || strings.Contains(lines, "node_modules") {
		t.Errorf("check:\n%s", lines)
	}
}

// TestApprovals: a call put to an operator waits, stored with its
// instance, which takes no other event meanwhile; only an operator holding
// its role, and not its caller, settles it; an approval sends its event
// with the caller as principal and the operator as confirmation; a
// decline sends nothing; a new run on the store knows the waiting calls.
func TestApprovals(t *testing.T) {
	w := doorWorkflow(t)
	st := store.NewMemory()
	x := instances(t, workflow.InstancesOptions{Store: st}, w)
	ctx := context.Background()
	caller := store.Principal{Sub: "agent", Auth: "test"}
	pend := func(handle string) string {
		t.Helper()
		h, err := x.Hold(ctx, w, handle)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release()
		in, err := h.Pend(ctx, store.Pending{Tool: "door_open", Event: map[string]any{"type": "OPEN", "principal": map[string]any{"sub": "agent"}}, Principal: caller, Roles: []string{"keyholder"}, Confirm: "Open the door?"},
			store.AuditEntry{Tool: "door_open", Principal: &caller})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Pend(ctx, store.Pending{Tool: "door_open"}, store.AuditEntry{}); !errors.Is(err, workflow.ErrPending) {
			t.Fatalf("a second call put to an operator: %v", err)
		}
		return in.Pending.ID
	}
	id := pend("d1")
	if _, err := x.Send(ctx, "door", "d1", interp.Event{Type: "OPEN"}); !errors.Is(err, workflow.ErrPending) {
		t.Fatalf("an event while a call waits: %v", err)
	}
	if a, _ := x.Approvals(ctx); len(a) != 1 || a[0].Handle != "d1" || a[0].ID != id || a[0].Confirm != "Open the door?" {
		t.Fatalf("approvals: %+v", a)
	}
	if _, err := x.Approve(ctx, "door", "d1", id, store.Principal{Sub: "eve", Roles: []string{"visitor"}}, ""); !errors.Is(err, workflow.ErrNotApprover) {
		t.Errorf("an approval without the role: %v", err)
	}
	if _, err := x.Approve(ctx, "door", "d1", id, store.Principal{Sub: "agent", Roles: []string{"keyholder"}, Auth: "test"}, ""); !errors.Is(err, workflow.ErrNotApprover) {
		t.Errorf("the caller approving its own call: %v", err)
	}
	if _, err := x.Approve(ctx, "door", "d1", "nope", store.Principal{Sub: "kim", Roles: []string{"keyholder"}}, ""); !errors.Is(err, workflow.ErrNoPending) {
		t.Errorf("an approval of another call: %v", err)
	}
	// Another run on the store knows the waiting calls.
	pend("d2")
	y := instances(t, workflow.InstancesOptions{Store: st}, w)
	if a, err := y.Approvals(ctx); err != nil || len(a) != 2 || a[0].Handle != "d1" || a[1].Handle != "d2" {
		t.Fatalf("the other run's approvals: %+v %v", a, err)
	}
	s, err := y.Approve(ctx, "door", "d1", id, store.Principal{Sub: "kim", Roles: []string{"keyholder"}}, "ok")
	if err != nil || s.Value != "open" || s.Pending != nil {
		t.Fatalf("approved: %+v %v", s, err)
	}
	trail, _ := st.Audit(ctx, store.Key{Machine: "door", Handle: "d1"}, 0)
	last := trail[len(trail)-1]
	if last.Principal == nil || last.Principal.Sub != "agent" || last.Confirmed == nil || last.Confirmed.By.Sub != "kim" || last.Confirmed.Via != "operator" || last.Confirmed.Comment != "ok" || last.To != "open" {
		t.Fatalf("the approval's entry: %+v", last)
	}
	// A decline sends nothing.
	left, _ := y.Approvals(ctx)
	s, err = y.Decline(ctx, "door", "d2", left[0].ID, store.Principal{Sub: "kim", Roles: []string{"keyholder"}}, "not now")
	if left, _ = y.Approvals(ctx); err != nil || s.Value != "closed" || s.Pending != nil || len(left) != 0 {
		t.Fatalf("declined: %+v %v (approvals %v)", s, err, left)
	}
	if _, err := y.Send(ctx, "door", "d2", interp.Event{Type: "OPEN"}); err != nil {
		t.Errorf("after the decline, an event: %v", err)
	}
}
