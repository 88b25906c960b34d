package interp_test

import (
	"encoding/json"
	"fmt"

	"stategate/interp"
	"stategate/xstate"
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
