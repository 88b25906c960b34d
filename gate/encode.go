package gate

import (
	"reflect"

	"github.com/mark3labs/mcp-go/mcp"

	"stategate/interp"
)

// appendMessage appends the JSON of a response the gate answers often (a
// tool call's result, a tool list) faster than mcp-go's reflective
// encoding; it reports false, having appended nothing, for any other
// message, which is then left to encoding/json.
func (g *Gate) appendMessage(dst []byte, msg mcp.JSONRPCMessage) ([]byte, bool) {
	if n, ok := msg.(mcp.JSONRPCNotification); ok {
		return appendNotification(dst, n)
	}
	if b, ok := appendResult(dst, msg); ok {
		return b, true
	}
	return g.appendToolList(dst, msg)
}

// appendNotification appends a notification without parameters (the
// gate's list_changed).
func appendNotification(dst []byte, n mcp.JSONRPCNotification) ([]byte, bool) {
	if n.JSONRPC != mcp.JSONRPC_VERSION || n.Params.Meta != nil || len(n.Params.AdditionalFields) > 0 {
		return dst, false
	}
	b := append(dst, `{"jsonrpc":"2.0","method":`...)
	b, err := interp.AppendJSON(b, n.Method)
	if err != nil {
		return dst, false
	}
	return append(b, "}\n"...), true
}

// appendToolList writes a tools/list response from the tools' encodings
// made when they were registered.
func (g *Gate) appendToolList(dst []byte, msg mcp.JSONRPCMessage) ([]byte, bool) {
	resp, res := resultOf[mcp.ListToolsResult](msg)
	if res == nil || !reflect.ValueOf(res.PaginatedResult).IsZero() {
		return dst, false
	}
	raws := make([][]byte, len(res.Tools))
	tools := g.served.Load().tools
	for i, t := range res.Tools {
		ref, ok := tools[t.Name]
		switch {
		case ok && t.Description == ref.full.Description:
			raws[i] = ref.fullJSON
		case ok && t.Description == ref.compact.Description:
			raws[i] = ref.compactJSON
		}
		if raws[i] == nil {
			return dst, false
		}
	}
	b, ok := appendHead(dst, resp.ID)
	if !ok {
		return dst, false
	}
	b = append(b, `{"tools":[`...)
	for i, raw := range raws {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, raw...)
	}
	return append(b, "]}}\n"...), true
}

// appendResult appends the JSON of a tools/call response whose result is
// what the gate makes (text content, structured content already encoded),
// faster than mcp-go's reflective MarshalJSON; it reports false, having
// appended nothing, for any other message, which is then left to
// encoding/json.
func appendResult(dst []byte, msg mcp.JSONRPCMessage) ([]byte, bool) {
	resp, res := resultOf[mcp.CallToolResult](msg)
	if res == nil || !reflect.ValueOf(res.Result).IsZero() || !reflect.ValueOf(res.MultiRoundTripResult).IsZero() || res.StructuredContent != nil {
		return dst, false
	}
	for _, c := range res.Content {
		if t, ok := c.(mcp.TextContent); !ok || t.Annotations != nil || t.Meta != nil || t.Type != "text" {
			return dst, false
		}
	}
	b, ok := appendHead(dst, resp.ID)
	if !ok {
		return dst, false
	}
	b = append(b, `{"content":[`...)
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

// resultOf returns a response and its result, when the message is a
// response whose result is a T (or *T); the result is nil otherwise.
func resultOf[T any](msg mcp.JSONRPCMessage) (mcp.JSONRPCResponse, *T) {
	resp, ok := msg.(mcp.JSONRPCResponse)
	if !ok {
		return resp, nil
	}
	switch r := resp.Result.(type) {
	case *T:
		return resp, r
	case T:
		return resp, &r
	}
	return resp, nil
}

// appendHead appends a response's start, up to its result:
// {"jsonrpc":"2.0","id":ID,"result":
func appendHead(dst []byte, id mcp.RequestId) ([]byte, bool) {
	b := append(dst, `{"jsonrpc":"2.0","id":`...)
	b, err := interp.AppendJSON(b, id.Value())
	if err != nil {
		return dst, false
	}
	return append(b, `,"result":`...), true
}
