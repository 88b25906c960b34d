package xstate_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/xstate"
	"github.com/stategate/stategate/xstate/js"
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
	// door.json:5:53: state closed: on "OPEN": "cond" is not an XState v5 transition key: use `guard` (XState v5)
	// door.json:6:23: state open: transition on event "CLOSE": child state 'shut' does not exist on 'door'
}

// A JSON machine whose guard, actions and delay are Go functions from a
// Registry: no JavaScript runs.
func ExampleRegistry() {
	reg := xstate.NewRegistry().
		Guard("withinLimit", func(a interp.Args, params any) (bool, error) {
			limit := params.(map[string]any)["limit"].(float64)
			amount, _ := a.Event.Data["amount"].(float64)
			return amount > 0 && amount <= limit, nil
		}).
		Assign("setAmount", func(a interp.Args, _ any) (map[string]any, error) {
			return map[string]any{"amount": a.Event.Data["amount"]}, nil
		}).
		Assign("capture", func(a interp.Args, _ any) (map[string]any, error) {
			return map[string]any{"captured": a.Context.(map[string]any)["amount"]}, nil
		}).
		DelayMs("authWindow", 60_000)
	m, _, err := (&xstate.Loader{Registry: reg}).Load("testdata/gotable/payment.json")
	if err != nil {
		panic(err)
	}
	a := interp.NewActor(m, interp.ActorOptions{})
	a.Start()
	a.Send(interp.Event{Type: "AUTHORIZE", Data: map[string]any{"amount": 250.0}})
	a.Send(interp.Event{Type: "CAPTURE"})
	s := a.Snapshot()
	fmt.Println(s.Value(), s.Status, s.Context, s.Output())
	// Output: captured done map[amount:250 captured:250] map[status:closed]
}

// A Loader reads machine files only inside its Root: a module that
// imports a file outside it fails to load, and the error a client may be
// shown (PublicError) quotes nothing of the files.
func ExampleLoader_root() {
	base, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(base)
	machines := filepath.Join(base, "machines")
	_ = os.Mkdir(machines, 0o755)
	_ = os.WriteFile(filepath.Join(base, "creds.json"), []byte(`{"password": "hunter2"}`), 0o644)
	_ = os.WriteFile(filepath.Join(machines, "leak.mjs"), []byte(`import { createMachine } from 'xstate';
import creds from '../creds.json';
export default createMachine({ id: 'leak', context: { creds } });
`), 0o644)
	l := &xstate.Loader{Root: machines, Modules: &js.Host{Memory: 64 << 20}}
	_, _, err := l.Load(filepath.Join(machines, "leak.mjs"))
	fmt.Println(strings.Contains(err.Error(), "outside the machines folder"), strings.Contains(xstate.PublicError(err), "hunter2"))
	// Output:
	// true false
}
