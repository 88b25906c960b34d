package xstate

import (
	"path/filepath"
	"testing"

	"stategate/interp"
)

// BenchmarkJSStep times the bridge on a small module: a step with a guard
// and an assign (each one JavaScript call), can() with a guard, and an
// actor's life with no step.
func BenchmarkJSStep(b *testing.B) {
	m, _, err := (&Loader{}).LoadModule(filepath.Join("testdata", "js", "bench-step.mjs"))
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
