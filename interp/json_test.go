package interp

import (
	"encoding/json"
	"math"
	"testing"
)

// TestAppendJSONMatchesMarshal checks the fast encoder byte for byte
// against encoding/json.
func TestAppendJSONMatchesMarshal(t *testing.T) {
	values := []any{
		nil, true, false, "", "plain", "quote\" back\\slash", "<b>&amp;</b>", "tab\tnew\nline\x01", "é ünïcode ✓", "bad \xff utf8", "\u2028 sep",
		0.0, 1.0, -1.5, 3.14159, 1e20, 1e21, 1e-6, 1e-7, 123456789012, math.MaxFloat64, math.SmallestNonzeroFloat64, -0.000001234,
		42, int64(-7),
		map[string]any{}, map[string]any{"b": 1.0, "a": []any{"x", nil, map[string]any{"z": false}}, "<": "&"},
		[]any{}, []any{1.0, "two", []any{3.0}},
		[]string{"a", "b"}, []string{},
		map[string]any(nil), []any(nil), []string(nil),
		json.RawMessage(`{"raw":true}`),
		struct {
			A int    `json:"a"`
			B string `json:"b,omitempty"`
		}{A: 1},
	}
	for _, v := range values {
		want, werr := json.Marshal(v)
		got, gerr := AppendJSON(nil, v)
		if (werr != nil) != (gerr != nil) || string(got) != string(want) {
			t.Errorf("AppendJSON(%#v) = %s, %v; json.Marshal gives %s, %v", v, got, gerr, want, werr)
		}
	}
	if _, err := AppendJSON(nil, math.NaN()); err == nil {
		t.Error("NaN: no error")
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
