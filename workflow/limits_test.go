package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
)

// wantLimit fails unless err is ErrLimit saying each of says.
func wantLimit(t *testing.T, err error, says ...string) {
	t.Helper()
	if !errors.Is(err, workflow.ErrLimit) {
		t.Fatalf("err = %v, want ErrLimit", err)
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q does not say %q", err, s)
		}
	}
}

// TestInstanceCap: a workflow stores at most MaxInstances instances: the
// save that would create another (the first of a new handle, however it
// comes: Send, a start, an intent) is refused with ErrLimit, naming the
// cap and its flag, and stores nothing; the instances stored go on, a
// reset is no creation, and a deletion makes room.
func TestInstanceCap(t *testing.T) {
	st := store.NewMemory()
	w := doorWorkflow(t)
	x := instances(t, workflow.InstancesOptions{Store: st, MaxInstances: 3, StartRate: -1}, w)
	ctx := context.Background()
	for i := range 3 {
		if _, err := x.Send(ctx, "door", fmt.Sprint("d", i), interp.Event{Type: "OPEN"}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := x.Send(ctx, "door", "d3", interp.Event{Type: "OPEN"})
	wantLimit(t, err, "door", "3 instances", "--max-instances")
	h, err := x.Hold(ctx, w, "d4")
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Save(ctx, store.AuditEntry{Tool: "start"})
	h.Release()
	wantLimit(t, err, "--max-instances")
	if err := x.CanCreate(ctx, w); !errors.Is(err, workflow.ErrLimit) {
		t.Fatalf("CanCreate: %v", err)
	}
	for _, k := range []string{"d3", "d4"} {
		if _, _, err := st.Load(ctx, store.Key{Machine: "door", Handle: k}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%s was stored: %v", k, err)
		}
	}
	if _, err := x.Send(ctx, "door", "d0", interp.Event{Type: "CLOSE"}); err != nil {
		t.Fatalf("a stored instance: %v", err)
	}
	if err := st.Delete(ctx, store.Key{Machine: "door", Handle: "d1"}); err != nil {
		t.Fatal(err)
	}
	if err := x.CanCreate(ctx, w); err != nil {
		t.Fatalf("CanCreate after a deletion: %v", err)
	}
	if _, err := x.Send(ctx, "door", "d3", interp.Event{Type: "OPEN"}); err != nil {
		t.Fatalf("after a deletion: %v", err)
	}
}

// TestInstanceCapConcurrent: creations at once never pass the cap.
func TestInstanceCapConcurrent(t *testing.T) {
	st := store.NewMemory()
	x := instances(t, workflow.InstancesOptions{Store: st, MaxInstances: 5, StartRate: -1}, doorWorkflow(t))
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	made, refused := 0, 0
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := x.Send(ctx, "door", fmt.Sprint("d", i), interp.Event{Type: "OPEN"})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				made++
			case errors.Is(err, workflow.ErrLimit):
				refused++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n, _ := st.Count(ctx, "door"); made != 5 || refused != 35 || n != 5 {
		t.Fatalf("%d made, %d refused, %d stored; want 5, 35, 5", made, refused, n)
	}
}

// TestStartRate: a workflow creates instances at StartRate a second, in
// bursts of StartBurst: one more is refused with ErrLimit, naming the
// rate and its flag, until the clock lets another in; the saves of
// instances stored are not counted.
func TestStartRate(t *testing.T) {
	clock := clockwork.NewFakeClock()
	st := store.NewMemory()
	x := instances(t, workflow.InstancesOptions{Store: st, Clock: clock, StartRate: 1, StartBurst: 2, MaxInstances: -1}, doorWorkflow(t))
	ctx := context.Background()
	for i := range 2 {
		if _, err := x.Send(ctx, "door", fmt.Sprint("d", i), interp.Event{Type: "OPEN"}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := x.Send(ctx, "door", "d2", interp.Event{Type: "OPEN"})
	wantLimit(t, err, "door", "1 instances a second", "--start-rate", "try again in 1s")
	for range 3 {
		if _, err := x.Send(ctx, "door", "d0", interp.Event{Type: "CLOSE"}); err != nil {
			t.Fatalf("an instance stored: %v", err)
		}
		if _, err := x.Send(ctx, "door", "d0", interp.Event{Type: "OPEN"}); err != nil {
			t.Fatalf("an instance stored: %v", err)
		}
	}
	clock.Advance(time.Second)
	if _, err := x.Send(ctx, "door", "d2", interp.Event{Type: "OPEN"}); err != nil {
		t.Fatalf("a second later: %v", err)
	}
	_, err = x.Send(ctx, "door", "d3", interp.Event{Type: "OPEN"})
	wantLimit(t, err, "--start-rate")
}
