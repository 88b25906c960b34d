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

// catastrophic is the string the patterns of regexp.mjs backtrack on for
// minutes (each character more doubles it).
var catastrophic = map[string]any{"s": strings.Repeat("a", 30) + "b"}

// stopsLongBefore is what the tests below allow a bounded match before it
// counts as unbounded: far more than their limits, on a loaded machine,
// and far less than the minutes the patterns take.
const stopsLongBefore = 30 * time.Second

// TestRegExpBoundedByTimeLimit checks that a regular expression that
// backtracks without end, in a guard or an action, through every method
// that matches, is interrupted at the time limit as other code is, with an
// error that names the function, even in a try block.
func TestRegExpBoundedByTimeLimit(t *testing.T) {
	m, _, err := (&xstate.Loader{Modules: &Host{Timeout: 300 * time.Millisecond}}).LoadModule(jsFile("regexp.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []string{"TEST", "EXEC", "MATCH", "REPLACE", "SPLIT", "SEARCH", "MATCH_ALL", "CAUGHT"} {
		t.Run(ev, func(t *testing.T) {
			a := interp.NewActor(m, interp.ActorOptions{})
			a.Start()
			start := time.Now()
			a.Send(interp.Event{Type: ev, Data: catastrophic})
			took := time.Since(start)
			s := a.Snapshot()
			if s.Status != interp.StatusError || !errors.Is(s.Err(), ErrInterrupted) || !strings.Contains(s.Err().Error(), "ran longer than 300ms") {
				t.Fatalf("status %v, error %v; want the time limit", s.Status, s.Err())
			}
			if ev == "TEST" && !strings.Contains(s.Err().Error(), "backtracks") {
				t.Errorf("error %v does not name the guard", s.Err())
			}
			if s.Value() != "idle" {
				t.Errorf("value %v, want the state before the event", s.Value())
			}
			if took > stopsLongBefore {
				t.Errorf("stopped after %v", took)
			}
			t.Logf("stopped after %v: %v", took.Round(time.Millisecond), s.Err())
		})
	}
	// A pattern that Go's regexp package can match needs no bound.
	a := interp.NewActor(m, interp.ActorOptions{})
	a.Start()
	a.Send(interp.Event{Type: "LINEAR", Data: catastrophic})
	if s := a.Snapshot(); s.Status != interp.StatusActive || s.Value() != "idle" {
		t.Errorf("LINEAR: %v %v %v", s.Status, s.Value(), s.Err())
	}
}

// TestRegExpStoppedByContext checks that a match in progress stops when
// its step's context ends, long before the time limit of one call.
func TestRegExpStoppedByContext(t *testing.T) {
	m, _, err := (&xstate.Loader{Modules: &Host{Timeout: time.Hour}}).LoadModule(jsFile("regexp.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
		{"past its deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 100*time.Millisecond)
		}, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			a := interp.NewActor(m, interp.ActorOptions{Context: ctx})
			a.Start()
			start := time.Now()
			a.Send(interp.Event{Type: "TEST", Data: catastrophic})
			took := time.Since(start)
			s := a.Snapshot()
			if s.Status != interp.StatusError || !errors.Is(s.Err(), interp.ErrStopped) || !errors.Is(s.Err(), tc.want) {
				t.Fatalf("status %v, error %v; want stopped by %v", s.Status, s.Err(), tc.want)
			}
			if took > stopsLongBefore {
				t.Errorf("stopped after %v", took)
			}
			t.Logf("stopped after %v: %v", took.Round(time.Millisecond), s.Err())
		})
	}
}

// TestRegExpAtTopLevelBounded checks that a module whose top-level code
// backtracks without end fails to load at the time limit, with an error
// that names the file, and that a load is abandoned when its context ends.
func TestRegExpAtTopLevelBounded(t *testing.T) {
	start := time.Now()
	_, _, err := (&xstate.Loader{Modules: &Host{Timeout: 300 * time.Millisecond}}).LoadModule(jsFile("regexp-toplevel.mjs"))
	took := time.Since(start)
	if !errors.Is(err, xstate.ErrInvalid) || !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v; want a load error for the time limit", err)
	}
	for _, want := range []string{"regexp-toplevel.mjs", "top-level code", "ran longer than 300ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if took > stopsLongBefore {
		t.Errorf("failed after %v", took)
	}
	t.Logf("failed after %v: %v", took.Round(time.Millisecond), err)

	// Through the Loader, whose Modules (a Host) are xstate.ContextModules.
	l := &xstate.Loader{Modules: &Host{Timeout: time.Hour}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(50*time.Millisecond, cancel)
	start = time.Now()
	_, _, err = l.LoadContext(ctx, jsFile("regexp-toplevel.mjs"))
	took = time.Since(start)
	if !errors.Is(err, interp.ErrStopped) || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "regexp-toplevel.mjs") {
		t.Fatalf("err = %v; want the load stopped by its context", err)
	}
	if took > stopsLongBefore {
		t.Errorf("stopped after %v", took)
	}
	t.Logf("stopped after %v: %v", took.Round(time.Millisecond), err)
}
