package js

import (
	"errors"
	"strings"
	"testing"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/xstate"
)

// tenants loads tenants.mjs; its instances share the module's runtimes (one
// runtime, as the events here come one at a time).
func tenants(t *testing.T) (*interp.Machine, *jsModule) {
	t.Helper()
	m, _, err := (&xstate.Loader{Modules: &Host{}}).LoadModule(jsFile("tenants.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	return m, m.Impl.Host.(*jsModule)
}

func instance(m *interp.Machine) *interp.Actor {
	a := interp.NewActor(m, interp.ActorOptions{})
	a.Start()
	return a
}

// TestInstancesDoNotSeeEachOther checks that what one instance's event
// changes in JavaScript (the built-ins, the module's variables, what it
// made at load, an event object the runtime kept) is not seen by the next
// event, of another instance, in the same runtime.
func TestInstancesDoNotSeeEachOther(t *testing.T) {
	for _, tc := range []struct {
		name string
		// first is the first instance's event; fails is whether it fails
		// (writing to what is frozen throws).
		first interp.Event
		fails bool
		// second is the second instance's event, whose guard passes only
		// if it sees what the first changed (the state it would go to).
		second interp.Event
		leak   string
		// then: the second event fails as the first did; dropped: the
		// runtime cannot be put back (a WeakSet's entry), and is dropped.
		then, dropped bool
	}{
		{"Object.prototype polluted", interp.Event{Type: "POLLUTE"}, true, interp.Event{Type: "ADMIN"}, "admin", false, false},
		{"a deep merge of __proto__", interp.Event{Type: "MERGE", Data: map[string]any{"json": `{"__proto__": {"isAdmin": true}}`}}, true,
			interp.Event{Type: "ADMIN"}, "admin", false, false},
		{"a module variable", interp.Event{Type: "REMEMBER", Data: map[string]any{"user": "alice"}}, false,
			interp.Event{Type: "SAME_USER", Data: map[string]any{"user": "alice"}}, "same", false, false},
		{"a Map made at load", interp.Event{Type: "REMEMBER", Data: map[string]any{"user": "alice"}}, false,
			interp.Event{Type: "SEEN_USER", Data: map[string]any{"user": "alice"}}, "same", false, false},
		{"an object made at load", interp.Event{Type: "RAISE_LIMIT"}, true, interp.Event{Type: "LIMIT"}, "raised", false, false},
		{"an event object kept by the runtime", interp.Event{Type: "PROBE"}, false, interp.Event{Type: "PROBE"}, "marked", false, false},
		{"a WeakSet made at load, of an object the runtime keeps", interp.Event{Type: "TAG"}, false, interp.Event{Type: "TAG"}, "marked", false, true},
		{"static params", interp.Event{Type: "BUMP"}, true, interp.Event{Type: "BUMP"}, "", true, false},
		{"what a bound function made at load keeps", interp.Event{Type: "SCRIBBLE"}, true, interp.Event{Type: "NOTE"}, "marked", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, mod := tenants(t)
			a := instance(m)
			a.Send(tc.first)
			s := a.Snapshot()
			if failed := s.Status == interp.StatusError; failed != tc.fails {
				t.Fatalf("the first instance's %s: status %v, error %v; want failed %v", tc.first.Type, s.Status, s.Err(), tc.fails)
			}
			if tc.fails && !strings.Contains(s.Err().Error(), "TypeError") && !strings.Contains(s.Err().Error(), "not extensible") &&
				!strings.Contains(s.Err().Error(), "read only") {
				t.Errorf("the first instance's error %v; want writing to what is frozen refused", s.Err())
			}
			b := instance(m)
			b.Send(tc.second)
			if v := b.Snapshot().Value(); v == tc.leak {
				t.Fatalf("the second instance went to %v: it saw the first's change", v)
			}
			if s := b.Snapshot(); (s.Status == interp.StatusError) != tc.then || s.Value() != "idle" {
				t.Errorf("the second instance: %v %v %v", s.Status, s.Value(), s.Err())
			}
			mod.mu.Lock()
			pooled := len(mod.idle)
			mod.mu.Unlock()
			if want := map[bool]int{false: 1, true: 0}[tc.dropped]; pooled != want {
				t.Errorf("%d runtimes in the pool, want %d", pooled, want)
			}
		})
	}
}

// TestChangesLastTheEvent checks that within one event, what an action
// changes in a module variable is there for a guard after it, as in
// XState; only the next event sees the module as it was after load.
func TestChangesLastTheEvent(t *testing.T) {
	m, _ := tenants(t)
	a := instance(m)
	a.Send(interp.Event{Type: "REMEMBER_AND_CHECK", Data: map[string]any{"user": "bob"}})
	if s := a.Snapshot(); s.Value() != "same" || s.Status != interp.StatusActive {
		t.Fatalf("%v %v %v; want the raised SAME_USER to see the action's change", s.Value(), s.Status, s.Err())
	}
	b := instance(m)
	b.Send(interp.Event{Type: "SAME_USER", Data: map[string]any{"user": "bob"}})
	if v := b.Snapshot().Value(); v != "idle" {
		t.Fatalf("the next event went to %v: it saw the earlier event's change", v)
	}
}

// TestNoHostGlobals checks that machine code cannot name the host's
// helpers: no global of the host's (the shim's API, the module's exports,
// the spread helpers, goja's GoError) is there.
func TestNoHostGlobals(t *testing.T) {
	m, _ := tenants(t)
	a := instance(m)
	a.Send(interp.Event{Type: "GLOBALS"})
	if s := a.Snapshot(); s.Value() != "clean" {
		t.Fatalf("%v %v %v; want no host global visible", s.Value(), s.Status, s.Err())
	}
}

// TestOverridesAfterFreezing checks that code that sets a property an
// object inherits from a frozen prototype (an Error subclass's name) works.
func TestOverridesAfterFreezing(t *testing.T) {
	m, _ := tenants(t)
	a := instance(m)
	a.Send(interp.Event{Type: "ERROR_NAME"})
	s := a.Snapshot()
	if got := s.Context.(map[string]any)["found"]; got != "DomainError: no true" {
		t.Fatalf("found %v (%v %v)", got, s.Status, s.Err())
	}
}

// TestBuiltinsFrozenAtLoad checks that a module that changes a built-in
// as it loads fails to load, with an error that names the file.
func TestBuiltinsFrozenAtLoad(t *testing.T) {
	_, _, err := (&xstate.Loader{Modules: &Host{}}).LoadModule(jsFile("changes-builtins.mjs"))
	if !errors.Is(err, xstate.ErrInvalid) || !strings.Contains(err.Error(), "changes-builtins.mjs") || !strings.Contains(err.Error(), "not extensible") {
		t.Fatalf("err = %v; want a load error, naming the file, for changing a built-in", err)
	}
}

// TestEngineFailureIsAnError checks that a panic of the JavaScript engine
// itself (goja's, on `arguments` in an arrow function of a function
// declared in a block) fails the call, as an error, rather than the
// process, and that the runtime is not used again.
func TestEngineFailureIsAnError(t *testing.T) {
	rt := sandboxRuntime(t)
	_, err := eval(rt, "function args() { return (() => arguments.length)(); } args(1, 2);")
	if !errors.Is(err, ErrEngine) {
		t.Fatalf("err = %v; want the engine's failure", err)
	}
	rt.mod.mu.Lock()
	defer rt.mod.mu.Unlock()
	if !rt.interrupted {
		t.Error("the runtime would be used again")
	}
}
