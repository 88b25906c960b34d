package gate

import (
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
