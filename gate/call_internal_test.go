package gate

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
)

func TestErrorResultsAreBrief(t *testing.T) {
	huge := strings.Repeat("é", 40000) // what a 70 KB key quoted in an error would be
	res := errorResult("ERROR", "ERROR: "+huge, map[string]any{"message": huge, "state": "draft"})
	sc := res.StructuredContent.(map[string]any)
	for what, s := range map[string]string{"text": res.Content[0].(mcp.TextContent).Text, "message": sc["message"].(string)} {
		if len(s) > maxErrorText+64 || !utf8.ValidString(s) || !strings.Contains(s, "bytes more") {
			t.Errorf("%s: %d bytes, valid UTF-8 %v", what, len(s), utf8.ValidString(s))
		}
	}
	if sc["state"] != "draft" {
		t.Errorf("a short field changed: %v", sc["state"])
	}
}

func TestJSONSize(t *testing.T) {
	for _, v := range []any{
		map[string]any{"a": "x", "b": []any{1.0, true, nil, "yz"}},
		map[string]any{},
		strings.Repeat("s", 3000),
		[]any{map[string]any{"k": map[string]any{"deep": "v"}}},
	} {
		data, _ := json.Marshal(v)
		if got := jsonSize(v, 1<<30); got < len(data) || got > 2*len(data)+48 {
			t.Errorf("jsonSize(%s) = %d, JSON has %d bytes", data, got, len(data))
		}
	}
	big := map[string]any{"a": strings.Repeat("x", MaxArguments)}
	if jsonSize(big, MaxArguments) <= MaxArguments {
		t.Error("an argument over the limit is not seen")
	}
}
