package jsonenc

import (
	"encoding/json"
	"math"
	"testing"
)

// TestAppendMatchesMarshal checks the encoder byte for byte against
// encoding/json.
func TestAppendMatchesMarshal(t *testing.T) {
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
		got, gerr := Append(nil, v)
		if (werr != nil) != (gerr != nil) || string(got) != string(want) {
			t.Errorf("Append(%#v) = %s, %v; json.Marshal gives %s, %v", v, got, gerr, want, werr)
		}
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := Append(nil, f); err == nil {
			t.Errorf("%v: no error", f)
		}
	}
}
