package workflow_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
)

// TestDelete deletes an instance, on a store this process alone writes
// and on a replica's: its record, trail and place in the index are gone,
// its handle names an instance as it starts, the other instance stays,
// and a subscriber is told of the deletion.
func TestDelete(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   func() store.Store
	}{
		{"memory", func() store.Store { return store.NewMemory() }},
		{"replica", func() store.Store { return store.NewMemory().Replica("a") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st()
			x := instances(t, workflow.InstancesOptions{Store: st}, doorWorkflow(t))
			ctx := context.Background()
			for _, h := range []string{"gone", "kept"} {
				if _, err := x.Send(ctx, "door", h, interp.Event{Type: "OPEN"}); err != nil {
					t.Fatal(err)
				}
			}
			ch := changes(t, x)
			if err := x.Delete(ctx, "door", "gone", "deleted by a test"); err != nil {
				t.Fatal(err)
			}
			if c := await(t, ch, "the deletion"); c.Workflow != "door" || c.Handle != "gone" || c.Version != 0 || !c.Deleted || !c.Moved {
				t.Fatalf("told %+v", c)
			}
			gone := store.Key{Machine: "door", Handle: "gone"}
			if _, _, err := st.Load(ctx, gone); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the store still has it: %v", err)
			}
			if trail, err := st.Audit(ctx, gone, 0); err != nil || len(trail) != 0 {
				t.Fatalf("its trail: %v %v", trail, err)
			}
			if keys, err := st.Recent(ctx, "door", 10); err != nil || len(keys) != 1 || keys[0].Handle != "kept" {
				t.Fatalf("Recent: %v %v", keys, err)
			}
			if n, err := st.Count(ctx, "door"); err != nil || n != 1 {
				t.Fatalf("Count: %d %v", n, err)
			}
			if s, err := x.Snapshot(ctx, "door", "gone"); err != nil || s.Version != 0 || s.Value != "closed" {
				t.Fatalf("the handle after the deletion: %+v %v", s, err)
			}
			if s, err := x.Snapshot(ctx, "door", "kept"); err != nil || s.Version != 1 || s.Value != "open" {
				t.Fatalf("the other instance: %+v %v", s, err)
			}
			if err := x.Delete(ctx, "door", "gone", ""); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("a second deletion: %v", err)
			}
			if err := x.Delete(ctx, "nope", "gone", ""); !errors.Is(err, workflow.ErrUnknownWorkflow) {
				t.Fatalf("a workflow not served: %v", err)
			}
			// The handle makes a new instance, from version 1.
			if s, err := x.Send(ctx, "door", "gone", interp.Event{Type: "OPEN"}); err != nil || s.Version != 1 {
				t.Fatalf("after the deletion, an event: %+v %v", s, err)
			}
		})
	}
}

// TestDeleteRefuses: an instance with a call waiting for an operator's
// approval, or a call of a bound tool that nothing settled, is not
// deleted, and the error says why; settled, it is.
func TestDeleteRefuses(t *testing.T) {
	w := doorWorkflow(t)
	st := store.NewMemory()
	x := instances(t, workflow.InstancesOptions{Store: st}, w)
	ctx := context.Background()
	caller := store.Principal{Sub: "agent", Auth: "test"}
	hold := func(handle string, f func(*workflow.Hold) (*workflow.Instance, error)) *workflow.Instance {
		t.Helper()
		h, err := x.Hold(ctx, w, handle)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release()
		in, err := f(h)
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	pending := hold("pending", func(h *workflow.Hold) (*workflow.Instance, error) {
		return h.Pend(ctx, store.Pending{Tool: "door_open", Event: map[string]any{"type": "OPEN"}, Principal: caller}, store.AuditEntry{Tool: "door_open", Principal: &caller})
	})
	intent := hold("doubt", func(h *workflow.Hold) (*workflow.Instance, error) {
		return h.Save(ctx, store.AuditEntry{Tool: "door_open", Intent: &store.Intent{Event: "OPEN"}})
	})
	for _, tc := range []struct {
		handle string
		want   error
		says   []string
	}{
		{"pending", workflow.ErrPending, []string{"door_open", "agent", "approve or decline"}},
		{"doubt", workflow.ErrInDoubt, []string{"door_open", "version 1", "--force"}},
	} {
		err := x.Delete(ctx, "door", tc.handle, "")
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.handle, err, tc.want)
		}
		for _, s := range tc.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not say %q", tc.handle, err, s)
			}
		}
		if _, _, err := st.Load(ctx, store.Key{Machine: "door", Handle: tc.handle}); err != nil {
			t.Fatalf("%s was deleted: %v", tc.handle, err)
		}
	}
	// Settled, both go.
	if _, err := x.Decline(ctx, "door", "pending", pending.Pending.ID, store.Principal{Sub: "kim"}, ""); err != nil {
		t.Fatal(err)
	}
	hold("doubt", func(h *workflow.Hold) (*workflow.Instance, error) {
		in, _, err := h.Apply(ctx, interp.Event{Type: "OPEN"}, store.AuditEntry{Tool: "door_open", Settles: intent.Version}, nil)
		return in, err
	})
	for _, h := range []string{"pending", "doubt"} {
		if err := x.Delete(ctx, "door", h, ""); err != nil {
			t.Fatalf("%s, settled: %v", h, err)
		}
	}
}

// TestDeleteMakesRoom: a workflow at its cap creates an instance again
// once one is deleted.
func TestDeleteMakesRoom(t *testing.T) {
	x := instances(t, workflow.InstancesOptions{MaxInstances: 2, StartRate: -1}, doorWorkflow(t))
	ctx := context.Background()
	for _, h := range []string{"d0", "d1"} {
		if _, err := x.Send(ctx, "door", h, interp.Event{Type: "OPEN"}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := x.Send(ctx, "door", "d2", interp.Event{Type: "OPEN"})
	wantLimit(t, err, "--max-instances")
	if err := x.Delete(ctx, "door", "d0", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Send(ctx, "door", "d2", interp.Event{Type: "OPEN"}); err != nil {
		t.Fatalf("after a deletion: %v", err)
	}
}

// TestDeleteReachesReplicas: a deletion on one replica makes the other
// forget its copy (it reads the handle as it starts) and tells its
// subscribers.
func TestDeleteReachesReplicas(t *testing.T) {
	mem := store.NewMemory()
	ctx := context.Background()
	a, _ := replica(t, mem, "a", workflow.InstancesOptions{}, doorWorkflow(t))
	b, _ := replica(t, mem, "b", workflow.InstancesOptions{}, doorWorkflow(t))
	if _, err := a.Send(ctx, "door", "d1", interp.Event{Type: "OPEN"}); err != nil {
		t.Fatal(err)
	}
	seen := changes(t, b)
	if s, err := b.Snapshot(ctx, "door", "d1"); err != nil || s.Version != 1 {
		t.Fatalf("b reads %+v %v", s, err)
	}
	if err := a.Delete(ctx, "door", "d1", "deleted by a test"); err != nil {
		t.Fatal(err)
	}
	for {
		c := await(t, seen, "the deletion, told to b")
		if c.Deleted {
			if c.Handle != "d1" || c.Version != 0 || !c.Moved {
				t.Fatalf("b was told %+v", c)
			}
			break
		}
	}
	// Load, not Current: what b had cached is gone.
	s, err := b.Snapshot(ctx, "door", "d1")
	if err != nil || s.Version != 0 || s.Value != "closed" {
		t.Fatalf("b reads %+v %v after the deletion", s, err)
	}
}
