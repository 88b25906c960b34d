package workflow

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestJSONMeasure(t *testing.T) {
	for _, v := range []any{
		map[string]any{"a": "x", "b": []any{1.0, true, nil, "yz"}},
		map[string]any{},
		strings.Repeat("s", 3000),
		[]any{map[string]any{"k": map[string]any{"deep": "v"}}},
	} {
		data, _ := json.Marshal(v)
		if got, _ := jsonMeasure(v, 1<<30, 1<<30, 0); got < len(data) || got > 2*len(data)+48 {
			t.Errorf("jsonMeasure(%s) = %d, JSON has %d bytes", data, got, len(data))
		}
	}
	if err := CheckEventValue("x", map[string]any{"a": strings.Repeat("x", MaxEventSize)}); !errors.Is(err, ErrEventTooLarge) || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("a value over the size: %v", err)
	}
	var deep any = "bottom"
	for range MaxEventDepth + 1 {
		deep = []any{deep}
	}
	if err := CheckEventValue("x", deep); !errors.Is(err, ErrEventTooLarge) || !strings.Contains(err.Error(), "levels deep") {
		t.Errorf("a value nested too deep: %v", err)
	}
	var ok any = "bottom"
	for range MaxEventDepth - 1 {
		ok = map[string]any{"k": ok}
	}
	if err := CheckEventValue("x", ok); err != nil {
		t.Errorf("a value nested as deep as allowed: %v", err)
	}
}
