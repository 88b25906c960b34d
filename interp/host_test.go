package interp_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stategate/stategate/interp"
)

// box is a value that belongs to a testThread, as a JavaScript object
// belongs to its runtime: Seal turns it into a plain number.
type box struct {
	t   *testThread
	n   float64
	bad bool // Seal refuses it
}

// testHost is a Host written in Go: it records what it lends and gets
// back.
type testHost struct {
	ctxs     []context.Context // the context of each Acquire
	released int
	threads  []*testThread
}

type testThread struct {
	h        *testHost
	released bool
}

func (h *testHost) Acquire(ctx context.Context) interp.Thread {
	h.ctxs = append(h.ctxs, ctx)
	t := &testThread{h: h}
	h.threads = append(h.threads, t)
	return t
}

func (t *testThread) Release() {
	if t.released {
		panic("released twice")
	}
	t.released = true
	t.h.released++
}

// Seal replaces the boxes of a context (or a box) by their numbers.
func (t *testThread) Seal(v any) (any, error) {
	if t.released {
		return nil, errors.New("sealed after its release")
	}
	unbox := func(x any) (any, error) {
		b, ok := x.(box)
		if !ok {
			return x, nil
		}
		if b.t != t {
			return nil, errors.New("a box of another thread")
		}
		if b.bad {
			return nil, errors.New("cannot keep this box")
		}
		return b.n, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return unbox(v)
	}
	out := make(map[string]any, len(m))
	for k, x := range m {
		var err error
		if out[k], err = unbox(x); err != nil {
			return v, err
		}
	}
	return out, nil
}

// hostMachine is a machine whose guard and assigns run in h's threads: the
// guard checks that it got one, the assigns leave boxes in the context.
func hostMachine(t *testing.T, h *testHost) *interp.Machine {
	thread := func(a interp.Args) (*testThread, error) {
		tt, ok := a.Thread.(*testThread)
		if !ok || tt.h != h || tt.released {
			return nil, fmt.Errorf("the step's thread is %#v", a.Thread)
		}
		return tt, nil
	}
	return mustJSON(t, `{"id":"m","initial":"a","context":{"n":0},"states":{
  "a":{"on":{"GO":{"guard":"inThread","target":"b","actions":"put"}}},
  "b":{"on":{"BAD":{"actions":"putBad"}}}}}`).Provide(interp.Implementations{
		Host: h,
		Guards: map[string]interp.Guard{"inThread": &interp.FuncGuard{Name: "inThread", Fn: func(a interp.Args, _ any) (bool, error) {
			_, err := thread(a)
			return err == nil, err
		}}},
		Actions: map[string]interp.Action{
			"put": &interp.AssignAction{Fn: func(a interp.Args, _ any) (map[string]any, error) {
				tt, err := thread(a)
				return map[string]any{"n": box{t: tt, n: 7}}, err
			}},
			"putBad": &interp.AssignAction{Fn: func(a interp.Args, _ any) (map[string]any, error) {
				tt, err := thread(a)
				return map[string]any{"n": box{t: tt, bad: true}}, err
			}},
		},
	})
}

type ctxKey struct{}

// TestHostThreads checks the hooks a Host gets: a thread per step,
// acquired with the actor's context, given to the step's code, sealed
// before it is released, and released once.
func TestHostThreads(t *testing.T) {
	h := &testHost{}
	ctx := context.WithValue(context.Background(), ctxKey{}, "the actor's")
	a := interp.NewActor(hostMachine(t, h), interp.ActorOptions{Context: ctx})
	a.Start()
	a.Send(interp.Event{Type: "GO"})
	s := a.Snapshot()
	if s.Status != interp.StatusActive || !reflect.DeepEqual(s.Value(), "b") {
		t.Fatalf("after GO: %v %v %v", s.Value(), s.Status, s.Err())
	}
	if got := s.Context; !reflect.DeepEqual(got, map[string]any{"n": 7.0}) {
		t.Errorf("context %#v: the box was not sealed", got)
	}
	if len(h.ctxs) == 0 || h.released != len(h.ctxs) {
		t.Fatalf("%d threads acquired, %d released", len(h.ctxs), h.released)
	}
	for i, c := range h.ctxs {
		if c.Value(ctxKey{}) != "the actor's" {
			t.Errorf("acquire %d: not the actor's context", i)
		}
	}

	// Can runs the guard in a thread of its own, given back at once.
	n := len(h.ctxs)
	if ok, err := interp.NewActor(hostMachine(t, h), interp.ActorOptions{}).Snapshot().Can(interp.Event{Type: "GO"}); !ok || err != nil {
		t.Fatalf("can: %v, %v", ok, err)
	}
	if len(h.ctxs) == n || h.released != len(h.ctxs) {
		t.Fatalf("%d threads acquired, %d released", len(h.ctxs), h.released)
	}
	for _, c := range h.ctxs[n:] {
		if c == nil || c.Done() != nil {
			t.Error("an actor with no context: its threads' context is not context.Background()")
		}
	}
}

// TestHostSealFails checks that a value the thread cannot seal fails the
// step with the thread's error, and the actor keeps the snapshot from
// before the event.
func TestHostSealFails(t *testing.T) {
	h := &testHost{}
	a := interp.NewActor(hostMachine(t, h), interp.ActorOptions{})
	a.Start()
	a.Send(interp.Event{Type: "GO"})
	a.Send(interp.Event{Type: "BAD"})
	s := a.Snapshot()
	if s.Status != interp.StatusError || s.Err() == nil || !strings.Contains(s.Err().Error(), "cannot keep this box") {
		t.Fatalf("status %v, error %v; want the seal's error", s.Status, s.Err())
	}
	if !reflect.DeepEqual(s.Value(), "b") || !reflect.DeepEqual(s.Context, map[string]any{"n": 7.0}) {
		t.Errorf("snapshot %v %v; want the one from before BAD", s.Value(), s.Context)
	}
	if h.released != len(h.ctxs) {
		t.Errorf("%d threads acquired, %d released", len(h.ctxs), h.released)
	}
}
