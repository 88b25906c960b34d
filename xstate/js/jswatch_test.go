package js

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/xstate"
)

// testMemory is the memory budget of the tests that exceed it: small, so
// that the heap stays small, yet well above what the test binary holds.
const testMemory = 48 << 20

// TestMemoryBudget checks that a call into JavaScript that takes memory
// without end is interrupted past the budget, with an error that names the
// function and says the memory budget was exceeded, and that the actor
// goes to status error as for a thrown exception.
func TestMemoryBudget(t *testing.T) {
	l := &xstate.Loader{Modules: &Host{Memory: testMemory, Timeout: time.Minute}}
	m, _, err := l.LoadModule(jsFile("memory.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ event, names string }{
		{"STRINGS", "guard 'doubling'"},
		{"OBJECTS", "hoard"},
		{"ASSIGN", "assign of 'n'"},
	} {
		t.Run(tc.event, func(t *testing.T) {
			a := interp.NewActor(m, interp.ActorOptions{})
			a.Start()
			start := time.Now()
			a.Send(interp.Event{Type: tc.event})
			s := a.Snapshot()
			if s.Status != interp.StatusError || !errors.Is(s.Err(), ErrMemory) {
				t.Fatalf("status %v, error %v; want the memory budget exceeded", s.Status, s.Err())
			}
			for _, want := range []string{tc.names, "memory budget exceeded", "48 MiB"} {
				if !strings.Contains(s.Err().Error(), want) {
					t.Errorf("error %q does not say %q", s.Err(), want)
				}
			}
			if v := s.Value(); v != "idle" {
				t.Errorf("value %v, want the state before the event", v)
			}
			t.Logf("stopped after %v: %v", time.Since(start).Round(time.Millisecond), s.Err())
		})
	}
	// The module still runs: an interrupted runtime is dropped, others made.
	a := interp.NewActor(m, interp.ActorOptions{})
	a.Start()
	a.Send(interp.Event{Type: "SMALL"})
	if s := a.Snapshot(); s.Value() != "done" || s.Status != interp.StatusActive {
		t.Fatalf("after the interrupts: %v %v %v", s.Value(), s.Status, s.Err())
	}
}

// TestMemoryBudgetAtLoad checks that a module whose top-level code takes
// memory without end fails to load with an error naming the file and the
// memory budget.
func TestMemoryBudgetAtLoad(t *testing.T) {
	_, _, err := (&xstate.Loader{Modules: &Host{Memory: testMemory, Timeout: time.Minute}}).LoadModule(jsFile("memory-toplevel.mjs"))
	if !errors.Is(err, ErrMemory) || !errors.Is(err, xstate.ErrInvalid) {
		t.Fatalf("err = %v; want a load error for the memory budget", err)
	}
	for _, want := range []string{"memory-toplevel.mjs", "top-level code", "memory budget exceeded"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestStepContextInterruptsJS checks that a step's context bounds the
// JavaScript it runs: an eventless loop whose guard is slow stops at the
// deadline, and a call in progress is interrupted when the context ends,
// long before the time limit of one call.
func TestStepContextInterruptsJS(t *testing.T) {
	m, _, err := (&xstate.Loader{Modules: &Host{Timeout: time.Minute}}).LoadModule(jsFile("memory.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, event string
		ctx         func() (context.Context, context.CancelFunc)
		want        error
	}{
		{"slow eventless loop", "SLOW", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 100*time.Millisecond)
		}, context.DeadlineExceeded},
		{"call running at the deadline", "FOREVER", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 100*time.Millisecond)
		}, context.DeadlineExceeded},
		{"call running when cancelled", "FOREVER", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			a := interp.NewActor(m, interp.ActorOptions{Context: ctx})
			a.Start()
			start := time.Now()
			a.Send(interp.Event{Type: tc.event})
			took := time.Since(start)
			s := a.Snapshot()
			if s.Status != interp.StatusError || !errors.Is(s.Err(), interp.ErrStopped) || !errors.Is(s.Err(), tc.want) {
				t.Fatalf("status %v, error %v; want stopped by %v", s.Status, s.Err(), tc.want)
			}
			if s.Value() != "idle" {
				t.Errorf("value %v, want the state before the event", s.Value())
			}
			if took > 20*time.Second {
				t.Errorf("stopped after %v", took)
			}
			t.Logf("stopped after %v: %v", took.Round(time.Millisecond), s.Err())
		})
	}
}

// TestMemoryKeptAcrossCalls checks that a module that keeps a little more
// in a module variable at every call, each call within its budget, does
// not grow without end: past the budget, the runtimes that hold it are
// dropped (and made afresh).
func TestMemoryKeptAcrossCalls(t *testing.T) {
	l := &xstate.Loader{Modules: &Host{Memory: 16 << 20}}
	m, _, err := l.LoadModule(jsFile("memory.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	a := interp.NewActor(m, interp.ActorOptions{})
	a.Start()
	most, dropped := 0.0, false
	for i := 1; i <= 60; i++ {
		a.Send(interp.Event{Type: "KEEP"})
		s := a.Snapshot()
		if s.Status != interp.StatusActive {
			t.Fatalf("call %d: %v %v", i, s.Status, s.Err())
		}
		kept := s.Context.(map[string]any)["kept"].(float64)
		most = max(most, kept)
		dropped = dropped || kept < float64(i)
		time.Sleep(time.Millisecond) // as calls come, not all at once
	}
	if !dropped || most > 20 {
		t.Fatalf("the module kept up to %v strings of 4 MiB (dropped: %v); want it bounded near the budget of 16 MiB", most, dropped)
	}
	t.Logf("kept up to %v strings of 4 MiB", most)
}
