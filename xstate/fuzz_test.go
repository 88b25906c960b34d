package xstate_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stategate/stategate/conformance"
	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/xstate"
)

// FuzzParseJSON checks that no input makes the config reader or the
// compiler panic, and that a machine that loads can start and take events.
func FuzzParseJSON(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "conformance", "*", "*.json"))
	own, _ := filepath.Glob(filepath.Join("..", "testdata", "conformance", "own", "*", "*.json"))
	for _, file := range append(files, own...) {
		if xstate.IsMachineFile(file) {
			if data, err := os.ReadFile(file); err == nil {
				f.Add(data)
			}
		}
	}
	f.Add([]byte(`{"initial":"a","states":{"a":{"type":"history"}}}`))
	f.Add([]byte(`{"type":"parallel","states":{"a":{"type":"final"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, _, err := xstate.ParseJSON("fuzz.json", data)
		if err != nil {
			if !errors.Is(err, xstate.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		c := &conformance.Case{Steps: []conformance.Step{{Advance: 1000}}}
		for _, ev := range m.EventTypes {
			c.Steps = append(c.Steps, conformance.Step{Send: []byte(`{}`), Event: interp.Event{Type: ev}})
		}
		c.Run(m)
		// What an actor persists restores, with its pending timers, in an
		// actor that starts and takes the events again.
		clock := interp.NewSimClock()
		a := interp.NewActor(m, interp.ActorOptions{Clock: clock})
		a.Start()
		for _, ev := range m.EventTypes {
			a.Send(interp.Event{Type: ev})
		}
		timers := a.PendingTimers()
		saved, err := json.Marshal(a.Snapshot())
		if err != nil {
			return // a context that is not JSON: the server refuses to save it
		}
		var p interp.Persisted
		if err := json.Unmarshal(saved, &p); err != nil {
			t.Fatalf("persisted snapshot %s does not read back: %v", saved, err)
		}
		s, err := m.Restore(&p)
		if err != nil {
			t.Fatalf("persisted snapshot %s does not restore: %v", saved, err)
		}
		b := interp.NewActor(m, interp.ActorOptions{Snapshot: s, Timers: timers, Clock: clock})
		b.Start()
		for _, ev := range m.EventTypes {
			b.Send(interp.Event{Type: ev})
		}
		clock.Advance(1000)
	})
}
