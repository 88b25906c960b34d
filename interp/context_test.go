package interp_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/interp"
)

// spinJSON loops on an eventless transition while its guard holds: a
// macrostep that settles only at MaxMicrosteps (ErrLoop).
const spinJSON = `{"id":"spin","initial":"idle","context":{"n":0},"states":{
  "idle":{"on":{"GO":"a"}},
  "a":{"always":{"guard":"slow","target":"b"}},
  "b":{"always":{"guard":"slow","target":"a"}}}}`

// parentJSON invokes, on GO, a spinner that starts spinning.
const parentJSON = `{"id":"parent","initial":"idle","states":{
  "idle":{"on":{"GO":"run"}},
  "run":{"invoke":{"id":"kid","src":"spinner","onError":"failed"}},
  "failed":{}}}`

// spinner returns the spin machine with a guard that calls f and holds.
func spinner(t *testing.T, f func()) *interp.Machine {
	t.Helper()
	return mustJSON(t, spinJSON).Provide(interp.Implementations{Guards: map[string]interp.Guard{
		"slow": &interp.FuncGuard{Name: "slow", Fn: func(interp.Args, any) (bool, error) {
			f()
			return true, nil
		}},
	}})
}

// TestContextStopsMacrostep checks that a macrostep stops between
// microsteps once the actor's context ends, with an error that says why,
// and that the actor keeps the snapshot from before the event.
func TestContextStopsMacrostep(t *testing.T) {
	for _, tc := range []struct {
		name string
		// guard is what the slow guard does; ctx is the actor's context
		// (its cancel function is given to the guard's maker).
		setup func(t *testing.T) (ctx context.Context, guard func())
		want  error
	}{
		{
			name: "deadline",
			setup: func(t *testing.T) (context.Context, func()) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
				t.Cleanup(cancel)
				return ctx, func() { time.Sleep(time.Millisecond) }
			},
			want: context.DeadlineExceeded,
		},
		{
			name: "cancelled while a guard runs",
			setup: func(t *testing.T) (context.Context, func()) {
				ctx, cancel := context.WithCancel(context.Background())
				t.Cleanup(cancel)
				calls := 0
				return ctx, func() {
					if calls++; calls == 3 {
						cancel() // as a client that goes away
					}
				}
			},
			want: context.Canceled,
		},
		{
			name: "ended before the event",
			setup: func(t *testing.T) (context.Context, func()) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx, func() { t.Error("the guard ran after the context ended") }
			},
			want: context.Canceled,
		},
		{
			name: "cause",
			setup: func(t *testing.T) (context.Context, func()) {
				ctx, cancel := context.WithCancelCause(context.Background())
				t.Cleanup(func() { cancel(nil) })
				return ctx, func() { cancel(errSlow) }
			},
			want: errSlow,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, guard := tc.setup(t)
			a := interp.NewActor(spinner(t, guard), interp.ActorOptions{Context: ctx})
			a.Start()
			start := time.Now()
			a.Send(interp.Event{Type: "GO"})
			s := a.Snapshot()
			if s.Status != interp.StatusError || !errors.Is(s.Err(), interp.ErrStopped) || !errors.Is(s.Err(), tc.want) {
				t.Fatalf("status %v, error %v; want a step stopped by %v", s.Status, s.Err(), tc.want)
			}
			if v := valueJSON(t, s); v != `"idle"` {
				t.Errorf("value %s, want the state from before the event", v)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("the step ran %v", d)
			}
		})
	}
}

var errSlow = errors.New("the event took too long")

// TestContextReachesChildren checks that a child machine's steps are
// bound by its parent's context: the child fails, and its parent's
// handler of that runs no further (the context has ended for it too).
func TestContextReachesChildren(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	child := mustJSON(t, strings.Replace(spinJSON, `"initial":"idle"`, `"initial":"a"`, 1)).Provide(interp.Implementations{Guards: map[string]interp.Guard{
		"slow": &interp.FuncGuard{Name: "slow", Fn: func(interp.Args, any) (bool, error) {
			time.Sleep(time.Millisecond)
			return true, nil
		}},
	}})
	m := mustJSON(t, parentJSON).Provide(interp.Implementations{Actors: map[string]interp.ActorLogic{
		"spinner": &interp.MachineLogic{Machine: child},
	}})
	a := interp.NewActor(m, interp.ActorOptions{Context: ctx})
	a.Start()
	a.Send(interp.Event{Type: "GO"})
	s := a.Snapshot()
	if s.Status != interp.StatusError || !errors.Is(s.Err(), context.DeadlineExceeded) {
		t.Fatalf("status %v, error %v; want the parent stopped by the deadline", s.Status, s.Err())
	}
	if v := valueJSON(t, s); v != `"idle"` {
		t.Errorf("value %s", v)
	}
}

// TestNoContextNoStop checks that an actor without a context is not
// bounded by one: the loop ends with ErrLoop, as before.
func TestNoContextNoStop(t *testing.T) {
	a := interp.NewActor(spinner(t, func() {}), interp.ActorOptions{})
	a.Start()
	a.Send(interp.Event{Type: "GO"})
	if s := a.Snapshot(); !errors.Is(s.Err(), interp.ErrLoop) {
		t.Fatalf("error %v, want ErrLoop", s.Err())
	}
}
