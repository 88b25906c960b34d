package conformance

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stategate/stategate/interp"
)

// TestPersistedChildren runs the cases of testdata/persist: events, a
// persisted snapshot, a restore in a new actor, more events. The persisted
// snapshot and the restored actor's state must be what the real XState
// gave (recorded by testdata/persist/record.mjs).
func TestPersistedChildren(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "persist", "*.persist.json"))
	if len(files) == 0 {
		t.Fatal("no cases")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".persist.json"), func(t *testing.T) {
			var c struct {
				Machine       string
				Input         any
				Before, After []map[string]any
			}
			var want struct {
				Persisted any
				After     struct {
					Value, Context any
					Status         string
					Children       []string
				}
			}
			readJSON(t, file, &c)
			readJSON(t, strings.TrimSuffix(file, ".persist.json")+".want.json", &want)
			m, _, err := withJS().Load(filepath.Join(filepath.Dir(file), c.Machine))
			if err != nil {
				t.Fatal(err)
			}
			send := func(a *interp.Actor, evs []map[string]any) {
				for _, e := range evs {
					ev, _ := interp.EventFromObject(e)
					a.Send(ev)
				}
			}
			a := interp.NewActor(m, interp.ActorOptions{Input: c.Input})
			a.Start()
			send(a, c.Before)
			data, err := json.Marshal(a.Snapshot())
			if err != nil {
				t.Fatal(err)
			}
			a.Stop()
			var got any
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatal(err)
			}
			// XState leaves out syncSnapshot of spawned children unless
			// it was given; stategate writes false.
			dropFalseSync(got)
			dropFalseSync(want.Persisted)
			if !reflect.DeepEqual(got, want.Persisted) {
				w, _ := json.Marshal(want.Persisted)
				t.Fatalf("persisted:\n got %s\nwant %s", data, w)
			}
			var p interp.Persisted
			if err := json.Unmarshal(data, &p); err != nil {
				t.Fatal(err)
			}
			s, err := m.Restore(&p)
			if err != nil {
				t.Fatal(err)
			}
			b := interp.NewActor(m, interp.ActorOptions{Snapshot: s, Input: c.Input})
			b.Start()
			send(b, c.After)
			after := b.Snapshot()
			if v := plainJSON(t, after.Value()); !reflect.DeepEqual(v, want.After.Value) {
				t.Errorf("value after the restore: %v, want %v", v, want.After.Value)
			}
			if v := plainJSON(t, after.Context); !reflect.DeepEqual(v, want.After.Context) {
				t.Errorf("context after the restore: %v, want %v", v, want.After.Context)
			}
			if after.Status.String() != want.After.Status {
				t.Errorf("status after the restore: %v, want %v", after.Status, want.After.Status)
			}
			if ids := after.Children(); !reflect.DeepEqual(ids, want.After.Children) && len(ids)+len(want.After.Children) > 0 {
				t.Errorf("children after the restore: %v, want %v", ids, want.After.Children)
			}
		})
	}
}

func readJSON(t *testing.T, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// plainJSON is v as encoding/json reads it back.
func plainJSON(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// dropFalseSync removes "syncSnapshot": false from the children of a
// persisted snapshot, and of theirs.
func dropFalseSync(p any) {
	m, _ := p.(map[string]any)
	children, _ := m["children"].(map[string]any)
	for _, c := range children {
		if cm, ok := c.(map[string]any); ok {
			if cm["syncSnapshot"] == false {
				delete(cm, "syncSnapshot")
			}
			dropFalseSync(cm["snapshot"])
		}
	}
}

// TestChildTimersPersist persists a parent whose child machine waits on an
// after: the child's timer is among the parent's pending timers, with its
// path, and restored with the snapshot it fires in the child, whose done
// event moves the parent.
func TestChildTimersPersist(t *testing.T) {
	m, a := startedAt40(t, "child-timer.mjs")
	b, clock2, timers := restart(t, m, a, 40)
	if len(timers) != 1 || !slices.Equal(timers[0].Path, []string{"w"}) || timers[0].Due != 100 {
		t.Fatalf("pending timers %+v, want the child's, due at 100", timers)
	}
	clock2.Advance(59)
	if v := b.Snapshot().Value(); v != "running" {
		t.Fatalf("before the child's timer: %v", v)
	}
	clock2.Advance(1)
	if v := b.Snapshot().Value(); v != "finished" {
		t.Fatalf("after the child's timer: %v (context %v)", v, b.Snapshot().Context)
	}
	if r, _ := b.Snapshot().Context.(map[string]any)["result"].(map[string]any); r["waited"] != true {
		t.Fatalf("the child's output: %v", b.Snapshot().Context)
	}
}

// TestDelayedSendsPersist persists a delayed sendTo from a parent to its
// child, then the child's delayed sendParent: each is a pending timer with
// the actor it goes to, and restored it reaches that actor.
func TestDelayedSendsPersist(t *testing.T) {
	m, a := startedAt40(t, "relay-timers.mjs")
	a, clock, timers := restart(t, m, a, 40)
	if len(timers) != 1 || timers[0].To != "/w" || len(timers[0].Path) != 0 {
		t.Fatalf("after START: timers %+v, want the parent's send to /w", timers)
	}
	// The child gets PING as the clock reaches 120 (a simulated clock's
	// timers fire at the time it is moved to, as XState's do), and sends
	// PONG 50 ms later.
	clock.Advance(80)
	a, clock, timers = restart(t, m, a, 120)
	if len(timers) != 1 || timers[0].To != "/" || !slices.Equal(timers[0].Path, []string{"w"}) || timers[0].Due != 170 {
		t.Fatalf("after PING: timers %+v, want the child's send to the root, due at 170", timers)
	}
	clock.Advance(49)
	if v := a.Snapshot().Value(); v != "running" {
		t.Fatalf("before PONG: %v", v)
	}
	clock.Advance(1)
	if v := a.Snapshot().Value(); v != "ponged" {
		t.Fatalf("after PONG: %v", v)
	}
}

// restart persists a's snapshot and pending timers, stops it, and restores
// them in a new actor of m on a simulated clock at now, as a server does.
func restart(t *testing.T, m *interp.Machine, a *interp.Actor, now float64) (*interp.Actor, *interp.SimClock, []interp.PendingTimer) {
	t.Helper()
	timers := a.PendingTimers()
	data, err := json.Marshal(a.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	a.Stop()
	var p interp.Persisted
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	s, err := m.Restore(&p)
	if err != nil {
		t.Fatal(err)
	}
	clock := interp.NewSimClock()
	clock.Advance(now)
	b := interp.NewActor(m, interp.ActorOptions{Snapshot: s, Timers: timers, Clock: clock})
	b.Start()
	return b, clock, timers
}

// startedAt40 starts an actor of a module of testdata on a simulated
// clock, sends it START and moves the clock to 40 ms.
func startedAt40(t *testing.T, name string) (*interp.Machine, *interp.Actor) {
	t.Helper()
	m, _, err := withJS().LoadModule(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	clock := interp.NewSimClock()
	a := interp.NewActor(m, interp.ActorOptions{Clock: clock})
	a.Start()
	a.Send(interp.Event{Type: "START"})
	clock.Advance(40)
	return m, a
}
