package gate

import (
	"github.com/mark3labs/mcp-go/mcp"

	"stategate/interp"
)

// appendResult appends the JSON of a tools/call response whose result is
// what the gate makes (text content, structured content already encoded),
// faster than mcp-go's reflective MarshalJSON; it reports false, having
// appended nothing, for any other message, which is then left to
// encoding/json.
func appendResult(dst []byte, msg mcp.JSONRPCMessage) ([]byte, bool) {
	resp, ok := msg.(mcp.JSONRPCResponse)
	if !ok {
		return dst, false
	}
	var res *mcp.CallToolResult
	switch r := resp.Result.(type) {
	case *mcp.CallToolResult:
		res = r
	case mcp.CallToolResult:
		res = &r
	}
	if res == nil || res.Meta != nil || res.ResultType != "" || len(res.InputRequests) > 0 || res.RequestState != "" || res.StructuredContent != nil {
		return dst, false
	}
	for _, c := range res.Content {
		if t, ok := c.(mcp.TextContent); !ok || t.Annotations != nil || t.Meta != nil || t.Type != "text" {
			return dst, false
		}
	}
	b, err := interp.AppendJSON(dst, resp.ID.Value())
	if err != nil {
		return dst, false
	}
	id := string(b[len(dst):])
	b = append(dst, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":{"content":[`...)
	for i, c := range res.Content {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"text","text":`...)
		b, _ = interp.AppendJSON(b, c.(mcp.TextContent).Text)
		b = append(b, '}')
	}
	b = append(b, ']')
	if res.IsError {
		b = append(b, `,"isError":true`...)
	}
	if len(res.RawStructuredContent) > 0 {
		b = append(b, `,"structuredContent":`...)
		b = append(b, res.RawStructuredContent...)
	}
	return append(b, "}}\n"...), true
}
