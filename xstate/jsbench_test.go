package xstate

import (
	"testing"

	"stategate/interp"
)

func BenchmarkJSStep(b *testing.B) {
	m, _, err := (&Loader{}).LoadModule("/tmp/jsb/m.mjs")
	if err != nil {
		b.Fatal(err)
	}
	a := interp.NewActor(m, interp.ActorOptions{})
	a.Start()
	b.Run("assign", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a.Send(interp.Event{Type: "INC"})
		}
	})
	b.Run("can", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a.Snapshot().Can(interp.Event{Type: "NOOP"})
		}
	})
	b.Run("start", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			x := interp.NewActor(m, interp.ActorOptions{})
			x.Start()
			x.Stop()
		}
	})
}
