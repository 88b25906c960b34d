package js_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/xstate"
	"github.com/stategate/stategate/xstate/js"
)

// A Host is what a Loader loads JavaScript and TypeScript machines with;
// a Loader without one loads JSON machines only.
func ExampleHost() {
	l := &xstate.Loader{Modules: &js.Host{Timeout: time.Second}}
	m, _, err := l.Load("testdata/js/counter.mjs")
	if err != nil {
		panic(err)
	}
	a := interp.NewActor(m, interp.ActorOptions{})
	a.Start()
	a.Send(interp.Event{Type: "INC", Data: map[string]any{"by": 2.0}})
	a.Send(interp.Event{Type: "INC"})
	fmt.Println(a.Snapshot().Context)

	_, _, err = (&xstate.Loader{}).Load("testdata/js/counter.mjs")
	fmt.Println(errors.Is(err, xstate.ErrNoModules))
	// Output:
	// map[n:3]
	// true
}
