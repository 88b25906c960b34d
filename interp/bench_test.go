package interp_test

import (
	"testing"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/xstate"
)

func mustJSON(tb testing.TB, src string) *interp.Machine {
	tb.Helper()
	m, _, err := xstate.ParseJSON("test.json", []byte(src))
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

const toggleJSON = `{"id":"toggle","initial":"off","states":{"off":{"on":{"TOGGLE":"on"}},"on":{"on":{"TOGGLE":"off"}}}}`

// toggle starts an actor of the toggle machine.
func toggle(b *testing.B) *interp.Actor {
	a := interp.NewActor(mustJSON(b, toggleJSON), interp.ActorOptions{})
	a.Start()
	return a
}

// BenchmarkSend times one event that moves between two sibling states.
func BenchmarkSend(b *testing.B) {
	a := toggle(b)
	ev := interp.Event{Type: "TOGGLE"}
	b.ReportAllocs()
	for b.Loop() {
		a.Send(ev)
	}
}

// BenchmarkStart times creating and starting an actor.
func BenchmarkStart(b *testing.B) {
	m := mustJSON(b, toggleJSON)
	b.ReportAllocs()
	for b.Loop() {
		a := interp.NewActor(m, interp.ActorOptions{})
		a.Start()
	}
}

// BenchmarkCan times snapshot.can on an enabled event.
func BenchmarkCan(b *testing.B) {
	a := toggle(b)
	ev := interp.Event{Type: "TOGGLE"}
	b.ReportAllocs()
	for b.Loop() {
		if ok, _ := a.Snapshot().Can(ev); !ok {
			b.Fatal("not enabled")
		}
	}
}

func defOf(tb testing.TB, src string) *interp.MachineDef {
	tb.Helper()
	def, err := xstate.ParseDef("test.json", []byte(src))
	if err != nil {
		tb.Fatal(err)
	}
	return def
}
