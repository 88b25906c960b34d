package js

import (
	"context"
	"errors"
	"runtime"
	"runtime/debug"
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

// TestModuleKeepsNothingAcrossEvents checks that a module that keeps a
// little more in a module variable at every event cannot grow: every event
// sees the module as it was after load (the variable is put back), in the
// same runtime.
func TestModuleKeepsNothingAcrossEvents(t *testing.T) {
	l := &xstate.Loader{Modules: &Host{Memory: testMemory}}
	m, _, err := l.LoadModule(jsFile("memory.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	mod := m.Impl.Host.(*jsModule)
	a := interp.NewActor(m, interp.ActorOptions{})
	a.Start()
	for i := 1; i <= 30; i++ {
		a.Send(interp.Event{Type: "KEEP"})
		s := a.Snapshot()
		if s.Status != interp.StatusActive {
			t.Fatalf("event %d: %v %v", i, s.Status, s.Err())
		}
		if kept := s.Context.(map[string]any)["kept"]; kept != 1.0 {
			t.Fatalf("event %d: the module kept %v strings of 4 MiB, want 1: what the event before kept", i, kept)
		}
	}
	mod.mu.Lock()
	defer mod.mu.Unlock()
	if len(mod.all) != 1 {
		t.Errorf("%d runtimes made, want the one, reused", len(mod.all))
	}
}

// busyProcess runs, until the test ends, what a busy server does beside
// JavaScript: a goroutine that keeps a live heap of live bytes (so that the
// collector lets the heap grow well past it before it collects) and turns
// it over at 256 MiB a second, making garbage. (A goroutine that allocates
// as fast as it can, on two cores beside a call that does too, runs the
// collector so far behind that the heap's figures say nothing of the call:
// see the Memory section of the README.)
func busyProcess(t *testing.T, live int) {
	t.Helper()
	stop := make(chan struct{})
	done := make(chan struct{})
	full := make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		const chunk = 1 << 20
		ring := make([][]byte, live/chunk)
		tick := time.NewTicker(4 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			if i > len(ring) {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
			b := make([]byte, chunk)
			b[0] = byte(i)
			ring[i%len(ring)] = b
			if i == len(ring) {
				close(full)
			}
		}
	}()
	<-full // its live heap made: from now on, it only makes garbage
	runtime.GC()
}

// TestMemoryBudgetInBusyProcess checks the budget in a process that
// allocates heavily beside the calls, as a busy server does: calls that
// make garbage, four times the budget of it, are not interrupted (what
// counts is the growth of the live heap a collection finds, not what was
// allocated), and calls that take memory without end still are, for the
// memory budget (the time limit, a minute, would say otherwise). What
// other goroutines keep while a call runs would count as the call's: the
// busy goroutine here keeps a live heap of constant size.
func TestMemoryBudgetInBusyProcess(t *testing.T) {
	// Twice the other tests' budget: what the busy goroutine allocates
	// while a collection marks counts as live for that collection, a few
	// tens of megabytes on a loaded machine (see the README).
	const budget = 2 * testMemory
	busyProcess(t, budget)
	l := &xstate.Loader{Modules: &Host{Memory: budget, Timeout: time.Minute}}
	m, _, err := l.LoadModule(jsFile("memory.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		a := interp.NewActor(m, interp.ActorOptions{})
		a.Start()
		a.Send(interp.Event{Type: "CHURN"})
		if s := a.Snapshot(); s.Status != interp.StatusActive || s.Value() != "done" {
			t.Fatalf("CHURN %d: %v %v %v; want it done, its garbage not counted", i, s.Status, s.Value(), s.Err())
		}
	}
	for _, ev := range []string{"STRINGS", "OBJECTS", "ASSIGN"} {
		a := interp.NewActor(m, interp.ActorOptions{})
		a.Start()
		start := time.Now()
		a.Send(interp.Event{Type: ev})
		s := a.Snapshot()
		if s.Status != interp.StatusError || !errors.Is(s.Err(), ErrMemory) {
			t.Fatalf("%s: status %v, error %v; want the memory budget exceeded", ev, s.Status, s.Err())
		}
		t.Logf("%s stopped after %v: %v", ev, time.Since(start).Round(time.Millisecond), s.Err())
		// The call after it does not pay for the garbage it left.
		b := interp.NewActor(m, interp.ActorOptions{})
		b.Start()
		b.Send(interp.Event{Type: "SMALL"})
		if s := b.Snapshot(); s.Status != interp.StatusActive || s.Value() != "done" {
			t.Fatalf("SMALL after %s: %v %v %v", ev, s.Status, s.Value(), s.Err())
		}
	}
}

// TestGarbageAtStartNotCounted checks that a call that takes nothing is
// not interrupted for the garbage the heap held when it began (another
// call's, another goroutine's), however much: here, with collections off,
// eight budgets of it.
func TestGarbageAtStartNotCounted(t *testing.T) {
	l := &xstate.Loader{Modules: &Host{Memory: testMemory, Timeout: time.Minute}}
	m, _, err := l.LoadModule(jsFile("memory.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	runtime.GC()
	garbage := make([][]byte, 0, 8*testMemory>>20)
	for range cap(garbage) {
		garbage = append(garbage, make([]byte, 1<<20))
	}
	garbage = nil
	a := interp.NewActor(m, interp.ActorOptions{})
	a.Start()
	a.Send(interp.Event{Type: "WAIT"})
	if s := a.Snapshot(); s.Status != interp.StatusActive || s.Value() != "done" {
		t.Fatalf("WAIT: %v %v %v; want it done", s.Status, s.Value(), s.Err())
	}
}
