package interp

import (
	"encoding/json"
	"testing"
)

// TestValueJSON checks that a state value inside a context encodes as
// encoding/json encodes it (through its MarshalJSON).
func TestValueJSON(t *testing.T) {
	v := Value{obj: true, Keys: []ValuePair{{Key: "b", Value: Value{Leaf: "x"}}, {Key: "a", Value: Value{Leaf: "<y>"}}}}
	p := &Persisted{Status: "active", Value: v, Context: map[string]any{"v": v}}
	got, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	type plain Persisted // no MarshalJSON method
	want, err := json.Marshal((*plain)(p))
	if err != nil || string(got) != string(want) {
		t.Errorf("MarshalJSON = %s, %v; want %s", got, err, want)
	}
}

// TestPersistedMarshalJSON checks the persisted snapshot's encoder against
// encoding/json's encoding of the same fields.
func TestPersistedMarshalJSON(t *testing.T) {
	type plain Persisted // no MarshalJSON method
	v := Value{obj: true, Keys: []ValuePair{{Key: "b", Value: Value{Leaf: "x"}}, {Key: "a", Value: Value{Leaf: "<y>"}}}}
	for _, p := range []*Persisted{
		{Status: "active", Value: Value{Leaf: "draft"}, Context: map[string]any{"n": 1.0}, HistoryValue: map[string][]NodeRef{}, Children: map[string]PersistedChild{}},
		{Status: "done", Value: v, Context: nil, HistoryValue: map[string][]NodeRef{"m.h": {{"m.a"}, {"m.b"}}, "m.g": nil}, Output: map[string]any{"ok": true}},
		{Status: "error", Value: Value{Leaf: "s"}, Error: "boom"},
	} {
		want, err := json.Marshal((*plain)(p))
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.MarshalJSON()
		if err != nil || string(got) != string(want) {
			t.Errorf("MarshalJSON = %s, %v; want %s", got, err, want)
		}
	}
}
