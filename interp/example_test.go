package interp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/xstate"
)

const trafficLight = `{
  "id": "light",
  "initial": "green",
  "states": {
    "green":  { "on": { "TIMER": "yellow" } },
    "yellow": { "on": { "TIMER": "red" } },
    "red":    { "after": { "5000": "green" }, "on": { "EMERGENCY": "#light.blinking" } },
    "blinking": { "type": "final" }
  }
}`

func ExampleNewActor() {
	m, _, err := xstate.ParseJSON("light.json", []byte(trafficLight))
	if err != nil {
		panic(err)
	}
	clock := interp.NewSimClock()
	a := interp.NewActor(m, interp.ActorOptions{Clock: clock})
	a.Start()
	a.Send(interp.Event{Type: "TIMER"})
	a.Send(interp.Event{Type: "TIMER"})
	fmt.Println(a.Snapshot().Value())
	clock.Advance(5000) // the `after` timer fires
	fmt.Println(a.Snapshot().Value())
	// Output:
	// red
	// green
}

func ExampleSnapshot_Can() {
	m, _, _ := xstate.ParseJSON("light.json", []byte(trafficLight))
	s := interp.NewActor(m, interp.ActorOptions{}).Snapshot()
	for _, t := range m.EventTypes {
		ok, _ := s.Can(interp.Event{Type: t})
		fmt.Println(t, ok)
	}
	// Output:
	// EMERGENCY false
	// TIMER true
}

func ExampleMachine_Restore() {
	m, _, _ := xstate.ParseJSON("light.json", []byte(trafficLight))
	a := interp.NewActor(m, interp.ActorOptions{})
	a.Start()
	a.Send(interp.Event{Type: "TIMER"})
	saved, _ := json.Marshal(a.Snapshot())
	fmt.Println(string(saved))

	// Later, perhaps in another process: no entry action runs again.
	var p interp.Persisted
	_ = json.Unmarshal(saved, &p)
	s, err := m.Restore(&p)
	if err != nil {
		panic(err)
	}
	b := interp.NewActor(m, interp.ActorOptions{Snapshot: s})
	b.Start()
	b.Send(interp.Event{Type: "TIMER"})
	fmt.Println(b.Snapshot().Value())
	// Output:
	// {"status":"active","value":"yellow","context":{},"historyValue":{},"children":{}}
	// red
}

// Machine.Transition is the pure form of a step, as XState's
// machine.transition: it returns the next snapshot and what the step asks
// for (here the timer the red light starts) without running an actor.
func ExampleMachine_Transition() {
	m, _, _ := xstate.ParseJSON("light.json", []byte(trafficLight))
	s, _, _ := m.Initial(nil)
	for range 2 {
		var effects []interp.Effect
		s, effects, _ = m.Transition(s, interp.Event{Type: "TIMER"})
		fmt.Println(s.Value())
		for _, e := range effects {
			if e.Kind == interp.EffectSchedule {
				fmt.Printf("in %v ms: %s\n", e.Delay, e.Event.Type)
			}
		}
	}
	// An event the state does not take leaves it as it is.
	s, _, _ = m.Transition(s, interp.Event{Type: "NOPE"})
	fmt.Println(s.Value())
	// Output:
	// yellow
	// red
	// in 5000 ms: xstate.after.5000.light.red
	// red
}

// ExampleActorOptions_context bounds an actor's work with a context: a
// step that does not settle before it ends stops, the actor keeping its
// state from before the event.
func ExampleActorOptions_context() {
	m, _, _ := xstate.ParseJSON("poll.json", []byte(`{"id": "poll", "initial": "idle", "states": {
	  "idle": { "on": { "GO": "check" } },
	  "check": { "always": { "guard": "notYet", "target": "wait" } },
	  "wait": { "always": { "guard": "notYet", "target": "check" } } }}`))
	m = m.Provide(interp.Implementations{Guards: map[string]interp.Guard{
		"notYet": &interp.FuncGuard{Name: "notYet", Fn: func(interp.Args, any) (bool, error) {
			time.Sleep(time.Millisecond) // a slow guard
			return true, nil
		}},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	a := interp.NewActor(m, interp.ActorOptions{Context: ctx})
	a.Start()
	a.Send(interp.Event{Type: "GO"})
	s := a.Snapshot()
	fmt.Println(s.Status, s.Value(), errors.Is(s.Err(), interp.ErrStopped), errors.Is(s.Err(), context.DeadlineExceeded))
	// Output:
	// error idle true true
}
