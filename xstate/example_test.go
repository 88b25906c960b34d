package xstate_test

import (
	"fmt"

	"stategate/xstate"
)

func ExampleParseJSON() {
	_, _, err := xstate.ParseJSON("door.json", []byte(`{
  "id": "door",
  "initial": "closed",
  "states": {
    "closed": { "on": { "OPEN": { "target": "open", "cond": "hasKey" } } },
    "open": { "on": { "CLOSE": "shut" } }
  }
}`))
	fmt.Println(err)
	// Output:
	// door.json:5: state closed: on "OPEN": "cond" is not an XState v5 transition key: use `guard` (XState v5)
	// door.json:6: state open: transition on event "CLOSE": child state 'shut' does not exist on 'door'
}
