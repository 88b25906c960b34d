package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store/postgres"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
)

// TestStateDeleteReachesReplicas: state delete and state prune on a
// PostgreSQL store while a server (a replica's instances) runs on it:
// the server hears of each deletion through the change feed, tells its
// subscribers, and forgets its copy (the handle reads as it starts).
func TestStateDeleteReachesReplicas(t *testing.T) {
	url := pg.Cluster(t).NewDatabase(t)
	ctx := context.Background()
	st, _, err := openPostgres(ctx, url, postgres.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m, _, err := (&xstate.Loader{}).Parse("door.json", []byte(`{"id":"door","initial":"closed","states":{"closed":{"on":{"OPEN":"open"}},"open":{"on":{"CLOSE":"closed"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	w, err := workflow.New(m, workflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x := workflow.NewInstances(workflow.InstancesOptions{Store: st, Logger: quiet()})
	if err := x.SetWorkflows(w); err != nil {
		t.Fatal(err)
	}
	deleted := make(chan string, 10)
	t.Cleanup(x.Subscribe(func(_ context.Context, c workflow.Change) {
		if c.Deleted {
			deleted <- c.Handle
		}
	}))
	for _, h := range []string{"d1", "d2"} {
		if _, err := x.Send(ctx, "door", h, interp.Event{Type: "OPEN"}); err != nil {
			t.Fatal(err)
		}
	}
	p := &stateCmd{Store: url}
	for _, step := range []struct {
		handle string
		cmd    interface {
			Run(*stateCmd, io.Writer) error
		}
		says string
	}{
		{"d1", &stateDeleteCmd{Machine: "door", Handle: "d1"}, "door d1 deleted (active, version 1"},
		{"d2", &statePruneCmd{Machine: "door", Idle: time.Nanosecond}, "door: 1 instance deleted"},
	} {
		if s, err := x.Snapshot(ctx, "door", step.handle); err != nil || s.Version != 1 || s.Value != "open" {
			t.Fatalf("the server reads %s: %+v %v", step.handle, s, err)
		}
		out, err := runState(p, step.cmd)
		if err != nil || !strings.Contains(out, step.says) {
			t.Fatalf("%T: %v %q", step.cmd, err, out)
		}
		select {
		case h := <-deleted:
			if h != step.handle {
				t.Fatalf("the server was told of %s's deletion, want %s", h, step.handle)
			}
		case <-time.After(time.Minute):
			t.Fatalf("the server was not told of %s's deletion", step.handle)
		}
		// Load, not Current: the server's cache forgot it.
		if s, err := x.Snapshot(ctx, "door", step.handle); err != nil || s.Version != 0 || s.Value != "closed" {
			t.Fatalf("the server reads %s after its deletion: %+v %v", step.handle, s, err)
		}
	}
	if n, err := st.Count(ctx, "door"); err != nil || n != 0 {
		t.Fatalf("%d doors stored, %v", n, err)
	}
}
