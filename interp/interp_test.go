package interp_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stategate/stategate/interp"
)

const playerJSON = `{
  "id": "player",
  "initial": "off",
  "context": {"volume": 3},
  "states": {
    "off": {"on": {"POWER": "on.hist"}},
    "on": {
      "initial": "radio",
      "on": {"POWER": "off"},
      "states": {
        "hist": {"type": "history", "history": "deep"},
        "radio": {"initial": "fm", "states": {"fm": {"on": {"AM": "am"}}, "am": {}}, "on": {"CD": "cd"}},
        "cd": {"type": "parallel", "states": {
          "disc": {"initial": "stopped", "states": {"stopped": {"on": {"PLAY": "playing"}}, "playing": {}}},
          "tray": {"initial": "closed", "states": {"closed": {"on": {"EJECT": "open"}}, "open": {}}}
        }}
      }
    }
  }
}`

func send(a *interp.Actor, types ...string) {
	for _, t := range types {
		a.Send(interp.Event{Type: t})
	}
}

func valueJSON(t *testing.T, s *interp.Snapshot) string {
	t.Helper()
	b, err := json.Marshal(s.Value())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPersistRestore(t *testing.T) {
	m := mustJSON(t, playerJSON)
	a := interp.NewActor(m, interp.ActorOptions{})
	a.Start()
	send(a, "POWER", "CD", "EJECT", "PLAY", "POWER")
	data, err := json.Marshal(a.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	var p interp.Persisted
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	restored, err := m.Restore(&p)
	if err != nil {
		t.Fatal(err)
	}
	b := interp.NewActor(m, interp.ActorOptions{Snapshot: restored})
	b.Start()
	for _, act := range []*interp.Actor{a, b} {
		send(act, "POWER")
	}
	got, want := valueJSON(t, b.Snapshot()), valueJSON(t, a.Snapshot())
	if got != want || want != `{"on":{"cd":{"disc":"playing","tray":"open"}}}` {
		t.Fatalf("restored actor went to %s, the original to %s", got, want)
	}
	if !reflect.DeepEqual(b.Snapshot().Context, a.Snapshot().Context) {
		t.Fatalf("context %v, want %v", b.Snapshot().Context, a.Snapshot().Context)
	}
	if !reflect.DeepEqual(b.Snapshot().HistoryValue(), a.Snapshot().HistoryValue()) {
		t.Fatalf("history %v, want %v", b.Snapshot().HistoryValue(), a.Snapshot().HistoryValue())
	}
}

func TestPersistedShape(t *testing.T) {
	m := mustJSON(t, playerJSON)
	a := interp.NewActor(m, interp.ActorOptions{})
	a.Start()
	send(a, "POWER", "AM", "POWER")
	var got map[string]any
	data, _ := json.Marshal(a.Snapshot())
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"status":       "active",
		"value":        "off",
		"context":      map[string]any{"volume": 3.0},
		"historyValue": map[string]any{"player.on.hist": []any{map[string]any{"id": "player.on.radio.am"}}},
		"children":     map[string]any{},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("persisted %s", data)
	}
}

func TestRestoreRunsNoEntryActions(t *testing.T) {
	calls := 0
	m := mustJSON(t, `{"id":"m","initial":"a","states":{"a":{"entry":"count","on":{"GO":"b"}},"b":{"entry":"count"}}}`)
	m = m.Provide(interp.Implementations{Actions: map[string]interp.Action{
		"count": &interp.FuncAction{Name: "count", Fn: func(interp.Args, any) error { calls++; return nil }},
	}})
	a := interp.NewActor(m, interp.ActorOptions{})
	a.Start()
	send(a, "GO")
	if calls != 2 {
		t.Fatalf("entry ran %d times, want 2", calls)
	}
	restored, err := m.Restore(a.Snapshot().Persist())
	if err != nil {
		t.Fatal(err)
	}
	b := interp.NewActor(m, interp.ActorOptions{Snapshot: restored})
	b.Start()
	if calls != 2 {
		t.Fatalf("restoring ran entry actions: %d calls", calls)
	}
	if v := valueJSON(t, b.Snapshot()); v != `"b"` {
		t.Fatalf("restored to %s", v)
	}
}

func TestRestoreErrors(t *testing.T) {
	m := mustJSON(t, playerJSON)
	for _, tc := range []struct{ name, value, status string }{
		{"unknown state", `"nowhere"`, "active"},
		{"unknown child", `{"on":{"tape":"x"}}`, "active"},
		{"bad status", `"off"`, "sleeping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p interp.Persisted
			if err := json.Unmarshal([]byte(`{"status":"`+tc.status+`","value":`+tc.value+`}`), &p); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Restore(&p); !errors.Is(err, interp.ErrRestore) {
				t.Fatalf("err = %v, want ErrRestore", err)
			}
		})
	}
}

func TestRestoreFillsInitialStates(t *testing.T) {
	m := mustJSON(t, playerJSON)
	var p interp.Persisted
	if err := json.Unmarshal([]byte(`{"status":"active","value":{"on":"cd"},"context":{}}`), &p); err != nil {
		t.Fatal(err)
	}
	s, err := m.Restore(&p)
	if err != nil {
		t.Fatal(err)
	}
	if v := valueJSON(t, s); v != `{"on":{"cd":{"disc":"stopped","tray":"closed"}}}` {
		t.Fatalf("value %s", v)
	}
}

func TestCan(t *testing.T) {
	m := mustJSON(t, `{"id":"m","initial":"a","states":{"a":{"on":{"GO":"b","NOOP":{},"ACT":{"actions":"x"},"NO":{"guard":"never","target":"b"}}},"b":{}}}`)
	m = m.Provide(interp.Implementations{Guards: map[string]interp.Guard{
		"never": &interp.FuncGuard{Name: "never", Fn: func(interp.Args, any) (bool, error) { return false, nil }},
	}})
	s := interp.NewActor(m, interp.ActorOptions{}).Snapshot()
	for ev, want := range map[string]bool{"GO": true, "NOOP": false, "ACT": true, "NO": false, "OTHER": false} {
		got, err := s.Can(interp.Event{Type: ev})
		if err != nil || got != want {
			t.Errorf("Can(%s) = %v, %v; want %v", ev, got, err, want)
		}
	}
}

func TestMissingGuardMessage(t *testing.T) {
	m := mustJSON(t, `{"id":"vault","initial":"locked","states":{"locked":{"on":{"PEEK":{"guard":"isOwner","target":"open"}}},"open":{}}}`)
	a := interp.NewActor(m, interp.ActorOptions{})
	a.Start()
	send(a, "PEEK")
	s := a.Snapshot()
	want := "Unable to evaluate guard 'isOwner' in transition for event 'PEEK' in state node 'vault.locked':\nGuard 'isOwner' is not implemented.'."
	if s.Status != interp.StatusError || s.Err() == nil || s.Err().Error() != want {
		t.Fatalf("status %v, error %v", s.Status, s.Err())
	}
	if !errors.Is(s.Err(), interp.ErrNotImplemented) {
		t.Fatalf("error does not wrap ErrNotImplemented")
	}
	if v := valueJSON(t, s); v != `"locked"` {
		t.Fatalf("an error moved the machine to %s", v)
	}
}

func TestDefinitionErrors(t *testing.T) {
	for _, tc := range []struct{ name, def, want string }{
		{"missing target", `{"id":"m","initial":"a","states":{"a":{"on":{"GO":"nowhere"}}}}`, `state a: transition on event "GO": child state 'nowhere' does not exist on 'm'`},
		{"missing initial", `{"id":"m","states":{"a":{},"b":{}}}`, `state (root): no initial state specified`},
		{"bad initial", `{"id":"m","initial":"c","states":{"a":{}}}`, `initial state "c" not found`},
		{"root target", `{"id":"m","initial":"a","on":{"X":"a"},"states":{"a":{}}}`, `did you mean ".a"?`},
		{"duplicate id", `{"id":"m","initial":"a","states":{"a":{"id":"x"},"b":{"id":"x"}}}`, `duplicate state id "x"`},
		{"unknown id", `{"id":"m","initial":"a","states":{"a":{"on":{"GO":"#zzz"}}}}`, `'#zzz' does not exist`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := interp.New(defOf(t, tc.def))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, interp.ErrDefinition) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestSimClockOrder(t *testing.T) {
	c := interp.NewSimClock()
	var got []string
	c.SetTimeout(func() { got = append(got, "b200") }, 200)
	c.SetTimeout(func() { got = append(got, "a100") }, 100)
	c.SetTimeout(func() { got = append(got, "c100") }, 100)
	c.Advance(99)
	if len(got) != 0 {
		t.Fatalf("fired early: %v", got)
	}
	c.Advance(101)
	if strings.Join(got, ",") != "a100,c100,b200" {
		t.Fatalf("fired %v", got)
	}
	// A timer set while timers fire counts from the new time.
	got = nil
	c.SetTimeout(func() {
		got = append(got, "first")
		c.SetTimeout(func() { got = append(got, "second") }, 10)
	}, 10)
	c.Advance(50)
	if strings.Join(got, ",") != "first" || c.Pending() != 1 {
		t.Fatalf("fired %v, %d pending", got, c.Pending())
	}
	c.Advance(10)
	if strings.Join(got, ",") != "first,second" {
		t.Fatalf("fired %v", got)
	}
}

func TestActorIgnoresEventsAfterDone(t *testing.T) {
	m := mustJSON(t, `{"id":"m","initial":"a","output":{"ok":true},"states":{"a":{"on":{"END":"z"}},"z":{"type":"final"}}}`)
	a := interp.NewActor(m, interp.ActorOptions{})
	a.Start()
	send(a, "END", "END")
	s := a.Snapshot()
	if s.Status != interp.StatusDone || !reflect.DeepEqual(s.Output(), map[string]any{"ok": true}) {
		t.Fatalf("status %v output %v", s.Status, s.Output())
	}
}

func TestPruneRemovedStates(t *testing.T) {
	m := mustJSON(t, playerJSON)
	for _, tc := range []struct{ in, want string }{
		{`"off"`, `"off"`},
		{`"gone"`, `"off"`},
		{`{"on":"tape"}`, `{"on":{"radio":"fm"}}`},
		{`{"on":{"radio":"lw"}}`, `{"on":{"radio":"fm"}}`},
		{`{"on":{"cd":{"disc":"playing","tray":"ajar"}}}`, `{"on":{"cd":{"disc":"playing","tray":"closed"}}}`},
	} {
		var p interp.Persisted
		if err := json.Unmarshal([]byte(`{"status":"active","value":`+tc.in+`}`), &p); err != nil {
			t.Fatal(err)
		}
		p.Value, _ = m.Prune(p.Value)
		s, err := m.Restore(&p)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if got := valueJSON(t, s); got != tc.want {
			t.Errorf("%s pruned to %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestSelfSendingWithoutEndIsAnError checks that an actor whose actions
// send it events without end (XState hangs) stops with ErrLoop once it has
// processed MaxMailboxEvents events for one Send, and that a machine that
// sends to itself a bounded number of times is left alone.
func TestSelfSendingWithoutEndIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int // sends per Send; -1: without end
		want  interp.Status
	}{
		{"bounded", 1000, interp.StatusActive},
		{"without end", -1, interp.StatusError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mustJSON(t, `{"id":"m","initial":"a","states":{"a":{"on":{"PING":{"actions":"again"}}}}}`)
			sent := 0
			m = m.Provide(interp.Implementations{Actions: map[string]interp.Action{
				"again": &interp.FuncAction{Name: "again", Fn: func(a interp.Args, _ any) error {
					if tc.limit < 0 || sent < tc.limit {
						sent++
						a.Self.Send(interp.Event{Type: "PING"})
					}
					return nil
				}},
			}})
			a := interp.NewActor(m, interp.ActorOptions{})
			a.Start()
			send(a, "PING")
			s := a.Snapshot()
			if s.Status != tc.want {
				t.Fatalf("status %v (error %v) after %d sends, want %v", s.Status, s.Err(), sent, tc.want)
			}
			// The event sent, then MaxMailboxEvents from the mailbox, each
			// sending one more.
			if tc.want == interp.StatusError && (!errors.Is(s.Err(), interp.ErrLoop) || sent != interp.MaxMailboxEvents+1) {
				t.Fatalf("error %v after %d sends, want ErrLoop after %d", s.Err(), sent, interp.MaxMailboxEvents+1)
			}
		})
	}
}
