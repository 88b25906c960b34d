package workflow_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
)

// counter counts its INC events, in any state.
const counter = `{"id":"counter","initial":"on","context":{"n":0},"states":{"on":{"on":{"INC":{"actions":"inc"}}}}}`

func counterWorkflow(t *testing.T) *workflow.Workflow {
	t.Helper()
	reg := xstate.NewRegistry().Assign("inc", func(a interp.Args, _ any) (map[string]any, error) {
		return map[string]any{"n": a.Context.(map[string]any)["n"].(float64) + 1}, nil
	})
	m, _, err := (&xstate.Loader{Registry: reg}).Parse("counter.json", []byte(counter))
	if err != nil {
		t.Fatal(err)
	}
	w, err := workflow.New(m, workflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// replica makes the instances of one replica (run) on a Memory shared by
// replicas.
func replica(t *testing.T, mem *store.Memory, run string, o workflow.InstancesOptions, ws ...*workflow.Workflow) (*workflow.Instances, *store.MemoryReplica) {
	t.Helper()
	r := mem.Replica(run)
	o.Store = r
	return instances(t, o, ws...), r
}

// TestReplicasSeeEachOther: a change one replica makes reaches the other
// through the feed (its subscribers are told, and what it had cached is
// read again), and a write on the other, whose cache is stale, is
// checked against the store first: no update is lost, none is done twice.
func TestReplicasSeeEachOther(t *testing.T) {
	mem := store.NewMemory()
	ctx := context.Background()
	a, _ := replica(t, mem, "a", workflow.InstancesOptions{}, doorWorkflow(t), counterWorkflow(t))
	b, _ := replica(t, mem, "b", workflow.InstancesOptions{}, doorWorkflow(t), counterWorkflow(t))
	if s, err := b.Snapshot(ctx, "door", "d1"); err != nil || s.Value != "closed" {
		t.Fatalf("b reads the door: %+v %v", s, err)
	}
	// An instance read as it starts, not stored yet, is made by its
	// first event.
	if _, err := b.Snapshot(ctx, "door", "d2"); err != nil {
		t.Fatal(err)
	}
	if s, err := b.Send(ctx, "door", "d2", interp.Event{Type: "OPEN"}); err != nil || s.Version != 1 {
		t.Fatalf("b's first event of d2: %+v %v", s, err)
	}
	seen := changes(t, b)
	if _, err := a.Send(ctx, "door", "d1", interp.Event{Type: "OPEN"}); err != nil {
		t.Fatal(err)
	}
	c := await(t, seen, "a's open, told to b")
	if c.Workflow != "door" || c.Handle != "d1" || c.Version != 1 || !c.Moved {
		t.Fatalf("b was told %+v", c)
	}
	if s, _ := b.Snapshot(ctx, "door", "d1"); s.Value != "open" || s.Version != 1 {
		t.Fatalf("b reads %+v after a's open", s)
	}
	// Both replicas count on one instance at once.
	const each = 40
	var wg sync.WaitGroup
	errs := make(chan error, 2*each)
	for _, x := range []*workflow.Instances{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := x.Send(ctx, "counter", "c", interp.Event{Type: "INC"}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a count was refused: %v", err)
	}
	rec, v, err := mem.Load(ctx, store.Key{Machine: "counter", Handle: "c"})
	if err != nil || v != 2*each {
		t.Fatalf("counter at version %d, want %d: %v", v, 2*each, err)
	}
	for _, x := range []*workflow.Instances{a, b} {
		s, err := x.Send(ctx, "counter", "c", interp.Event{Type: "INC"})
		if err != nil {
			t.Fatal(err)
		}
		if n := s.Context.(map[string]any)["n"]; n != float64(2*each+1) && n != float64(2*each+2) {
			t.Fatalf("counted %v, want %d or %d (%s)", n, 2*each+1, 2*each+2, rec.Snapshot)
		}
	}
	if _, v, _ := mem.Load(ctx, store.Key{Machine: "counter", Handle: "c"}); v != 2*each+2 {
		t.Fatalf("counter at version %d, want %d", v, 2*each+2)
	}
}

// TestReplicasResync: after the feed was cut, every subscriber is told to
// read everything again, and what a replica cached is read from the store.
func TestReplicasResync(t *testing.T) {
	mem := store.NewMemory()
	ctx := context.Background()
	b, _ := replica(t, mem, "b", workflow.InstancesOptions{}, doorWorkflow(t))
	if _, err := b.Send(ctx, "door", "d1", interp.Event{Type: "OPEN"}); err != nil {
		t.Fatal(err)
	}
	seen := changes(t, b)
	// A change b is not told of (made under the feed, as a lost
	// notification would be): only a resync brings it.
	k := store.Key{Machine: "door", Handle: "d1"}
	rec, v, _ := mem.Load(ctx, k)
	// (Saved as b's own run: b ignores its own changes.)
	if _, err := mem.Replica("b").Save(ctx, k, store.Record{Snapshot: []byte(`{"status":"active","value":"closed","context":{"opened":7}}`), MachineVersion: rec.MachineVersion}, v); err != nil {
		t.Fatal(err)
	}
	if s, _ := b.Snapshot(ctx, "door", "d1"); s.Value != "open" {
		t.Fatalf("b should still have its cached instance: %+v", s)
	}
	// A read that must see every replica's last write checks the store.
	if in, err := b.Current(ctx, b.Workflow("door"), "d1"); err != nil || workflow.StateString(in.Snapshot) != "closed" {
		t.Fatalf("b.Current: %v", err)
	}
	mem.Resync()
	if c := await(t, seen, "the resync"); !c.Resync || c.Workflow != "" {
		t.Fatalf("b's subscriber was told %+v", c)
	}
	if s, _ := b.Snapshot(ctx, "door", "d1"); s.Value != "closed" || s.Context.(map[string]any)["opened"] != float64(7) {
		t.Fatalf("after the resync b reads %+v", s)
	}
}

// TestReplicasFireTimersOnce: both replicas run their timers; the one
// that armed a timer fires it on time, the other leaves it; once the
// armer is gone, the other fires the next one past the grace. Each
// arming fires once. Nothing sleeps: the clock is a fake.
func TestReplicasFireTimersOnce(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	mem := store.NewMemory()
	ctx := context.Background()
	o := workflow.InstancesOptions{Clock: clock, TimerGrace: 2 * time.Second}
	a, _ := replica(t, mem, "a", o, doorWorkflow(t))
	b, _ := replica(t, mem, "b", o, doorWorkflow(t))
	runA, stopA := context.WithCancel(ctx)
	runB, stopB := context.WithCancel(ctx)
	doneA, doneB := make(chan struct{}), make(chan struct{})
	go func() { a.RunTimers(runA); close(doneA) }()
	go func() { b.RunTimers(runB); close(doneB) }()
	t.Cleanup(func() { stopA(); stopB(); <-doneA; <-doneB })
	seenA, seenB := changes(t, a), changes(t, b)
	k := store.Key{Machine: "door", Handle: "d1"}
	timerEntries := func() int {
		trail, _ := mem.Audit(ctx, k, 0)
		n := 0
		for _, e := range trail {
			if e.Tool == workflow.TimerTool {
				n++
			}
		}
		return n
	}

	if _, err := a.Send(ctx, "door", "d1", interp.Event{Type: "OPEN"}); err != nil {
		t.Fatal(err)
	}
	await(t, seenA, "a's open")
	await(t, seenB, "a's open, told to b")
	// Each loop sleeps on the clock, with its heartbeat.
	if err := clock.BlockUntilContext(ctx, 4); err != nil {
		t.Fatal(err)
	}
	clock.Advance(30 * time.Minute)
	if c := await(t, seenA, "the timer, fired by a"); c.Version != 2 {
		t.Fatalf("a's change: %+v", c)
	}
	if c := await(t, seenB, "the timer, told to b"); c.Version != 2 {
		t.Fatalf("b's change: %+v", c)
	}
	if n := timerEntries(); n != 1 {
		t.Fatalf("%d timer entries, want 1", n)
	}

	// a stops (its run registered still: it died), after arming again.
	if _, err := a.Send(ctx, "door", "d1", interp.Event{Type: "OPEN"}); err != nil {
		t.Fatal(err)
	}
	await(t, seenA, "a's second open")
	await(t, seenB, "a's second open, told to b")
	stopA()
	<-doneA
	if err := clock.BlockUntilContext(ctx, 2); err != nil {
		t.Fatal(err)
	}
	clock.Advance(30 * time.Minute) // due: a's to fire, and a is gone
	if err := clock.BlockUntilContext(ctx, 2); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-seenB:
		t.Fatalf("b fired a's timer within its grace: %+v", c)
	default:
	}
	clock.Advance(2 * time.Second)
	if c := await(t, seenB, "the timer, fired by b past the grace"); c.Version != 4 {
		t.Fatalf("b's change: %+v", c)
	}
	if s, _ := b.Snapshot(ctx, "door", "d1"); s.Value != "closed" {
		t.Fatalf("after b fired: %+v", s)
	}
	if n := timerEntries(); n != 2 {
		t.Fatalf("%d timer entries, want 2", n)
	}
}

// TestReplicasHonourIntents: while a replica's bound call holds an
// instance (its intent open, its run alive), another replica's event
// waits for it and comes after; past its event deadline it is ErrBusy,
// nothing changed; once the holder's run is over, its intent is in doubt
// and the instance goes on.
func TestReplicasHonourIntents(t *testing.T) {
	mem := store.NewMemory()
	ctx := context.Background()
	a, ra := replica(t, mem, "a", workflow.InstancesOptions{}, doorWorkflow(t))
	b, _ := replica(t, mem, "b", workflow.InstancesOptions{}, doorWorkflow(t))
	door := a.Workflow("door")
	k := store.Key{Machine: "door", Handle: "d1"}

	h, err := a.Hold(ctx, door, "d1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Save(ctx, store.AuditEntry{Tool: "pay", Intent: &store.Intent{Event: "OPEN"}}); err != nil {
		t.Fatal(err)
	}
	sent := make(chan error, 1)
	go func() {
		_, err := b.Send(ctx, "door", "d1", interp.Event{Type: "OPEN"})
		sent <- err
	}()
	select {
	case err := <-sent:
		t.Fatalf("b's event did not wait for a's call: %v", err)
	case <-time.After(100 * time.Millisecond): // (a false pass at worst)
	}
	intent := uint64(1)
	if _, _, err := h.Apply(ctx, interp.Event{Type: "OPEN"}, store.AuditEntry{Tool: "pay", Settles: intent}, nil); err != nil {
		t.Fatal(err)
	}
	h.Release()
	// b's OPEN comes after a's: the door is open, and b's is refused.
	if err := <-sent; !errors.Is(err, workflow.ErrRejected) {
		t.Fatalf("b's event after a's: %v", err)
	}
	trail, _ := mem.Audit(ctx, k, 0)
	if len(trail) != 2 || trail[0].Intent == nil || trail[1].Settles != 1 {
		t.Fatalf("trail: %+v", trail)
	}

	// A call that does not end: b is told BUSY at its deadline.
	quick, _ := replica(t, mem, "c", workflow.InstancesOptions{EventTimeout: 50 * time.Millisecond}, doorWorkflow(t))
	h, err = a.Hold(ctx, door, "d1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Save(ctx, store.AuditEntry{Tool: "pay", Intent: &store.Intent{Event: "CLOSE"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := quick.Send(ctx, "door", "d1", interp.Event{Type: "CLOSE"}); !errors.Is(err, workflow.ErrBusy) {
		t.Fatalf("an event on an instance another replica's call holds: %v", err)
	}
	if _, v, _ := mem.Load(ctx, k); v != 3 {
		t.Fatalf("the instance moved: version %d", v)
	}
	if doubt, err := quick.InDoubt(ctx, "door", "d1"); err != nil || len(doubt) != 0 {
		t.Fatalf("a call under way is not in doubt: %+v %v", doubt, err)
	}
	// a dies during its call: its intent is in doubt, and b goes on.
	h.Release()
	if err := ra.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err := b.Send(ctx, "door", "d1", interp.Event{Type: "CLOSE"}); err != nil || s.Value != "closed" {
		t.Fatalf("after a died: %+v %v", s, err)
	}
	if doubt, err := b.InDoubt(ctx, "door", "d1"); err != nil || len(doubt) != 1 || doubt[0].Version != 3 {
		t.Fatalf("in doubt after a died: %+v %v", doubt, err)
	}
}

// countingReplica counts the loads and lists of a replica's store.
type countingReplica struct {
	*store.MemoryReplica
	mu           sync.Mutex
	loads, lists int
}

func (c *countingReplica) Load(ctx context.Context, k store.Key) (store.Record, uint64, error) {
	c.mu.Lock()
	c.loads++
	c.mu.Unlock()
	return c.MemoryReplica.Load(ctx, k)
}

func (c *countingReplica) List(ctx context.Context) ([]store.Key, error) {
	c.mu.Lock()
	c.lists++
	c.mu.Unlock()
	return c.MemoryReplica.List(ctx)
}

// TestReplicasApprovals: a call waiting for approval on one replica is
// listed by the other, which reads only the instances waiting, and
// approved there.
func TestReplicasApprovals(t *testing.T) {
	mem := store.NewMemory()
	ctx := context.Background()
	a, _ := replica(t, mem, "a", workflow.InstancesOptions{}, doorWorkflow(t))
	for i := range 50 {
		if _, err := a.Send(ctx, "door", "other"+string(rune('a'+i%26))+string(rune('a'+i/26)), interp.Event{Type: "OPEN"}); err != nil {
			t.Fatal(err)
		}
	}
	h, err := a.Hold(ctx, a.Workflow("door"), "d1")
	if err != nil {
		t.Fatal(err)
	}
	ev := interp.Event{Type: "OPEN"}
	if _, err := h.Pend(ctx, store.Pending{Tool: "door_open", Event: ev.Object(), Principal: store.Principal{Sub: "alice"}}, store.AuditEntry{Tool: "door_open"}); err != nil {
		t.Fatal(err)
	}
	h.Release()
	cr := &countingReplica{MemoryReplica: mem.Replica("b")}
	b := instances(t, workflow.InstancesOptions{Store: cr}, doorWorkflow(t))
	list, err := b.Approvals(ctx)
	if err != nil || len(list) != 1 || list[0].Handle != "d1" || list[0].Principal.Sub != "alice" {
		t.Fatalf("b's approvals: %+v %v", list, err)
	}
	if cr.lists != 0 || cr.loads != 1 {
		t.Fatalf("b read %d lists and %d instances for one waiting call", cr.lists, cr.loads)
	}
	seenA := changes(t, a)
	if _, err := b.Approve(ctx, "door", "d1", list[0].ID, store.Principal{Sub: "bob"}, "ok"); err != nil {
		t.Fatal(err)
	}
	await(t, seenA, "b's approval, told to a")
	if list, err := a.Approvals(ctx); err != nil || len(list) != 0 {
		t.Fatalf("a's approvals after b approved: %+v %v", list, err)
	}
	if s, _ := a.Snapshot(ctx, "door", "d1"); s.Value != "open" {
		t.Fatalf("a reads %+v after b's approval", s)
	}
}
