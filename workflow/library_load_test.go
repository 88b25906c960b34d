package workflow_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
)

// stuckModules are JS modules whose load never ends by itself: it says
// when it began, and ends when its context does.
type stuckModules struct{ began chan struct{} }

func (s stuckModules) LoadMachine(root *xstate.Root, file string, base interp.Implementations) (*interp.Machine, []xstate.Diagnostic, error) {
	return s.LoadMachineContext(context.Background(), root, file, base)
}

func (s stuckModules) LoadImplementations(root *xstate.Root, file string) (interp.Implementations, error) {
	return s.LoadImplementationsContext(context.Background(), root, file)
}

func (s stuckModules) LoadMachineContext(ctx context.Context, _ *xstate.Root, _ string, _ interp.Implementations) (*interp.Machine, []xstate.Diagnostic, error) {
	s.began <- struct{}{}
	<-ctx.Done()
	return nil, nil, ctx.Err()
}

func (s stuckModules) LoadImplementationsContext(ctx context.Context, _ *xstate.Root, _ string) (interp.Implementations, error) {
	<-ctx.Done()
	return interp.Implementations{}, ctx.Err()
}

// TestLibraryLoadHoldsNothing: while a file loads (here, a module whose
// load never ends by itself), what the library serves and its files'
// errors are read as they were; the load ends with the reload's context
// (a shutdown), and then nothing served changes.
func TestLibraryLoadHoldsNothing(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "lamp.json"), []byte(`{"id":"lamp","initial":"off","states":{"off":{"on":{"ON":"on"}},"on":{}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	mods := stuckModules{began: make(chan struct{}, 1)}
	lib := workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Loader: &xstate.Loader{Modules: mods}, Logger: quiet(), Serve: func(workflow.Reload) error { return nil }})
	if err := lib.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "slow.mjs"), []byte(`export default 1`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lib.Reload(ctx) }()
	select {
	case <-mods.began:
	case <-time.After(time.Minute):
		t.Fatal("the module's load never began")
	}
	// Read while the load runs: not held.
	if ws := lib.Workflows(); len(ws) != 1 || ws[0].ID != "lamp" {
		t.Errorf("Workflows while a file loads: %v", ws)
	}
	if errs := lib.Errors(); len(errs) != 0 {
		t.Errorf("Errors while a file loads: %v", errs)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the reload ended with %v, want its context's end", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the reload did not end with its context")
	}
	if ws := lib.Workflows(); len(ws) != 1 || ws[0].ID != "lamp" {
		t.Errorf("Workflows after the abandoned reload: %v", ws)
	}
}
