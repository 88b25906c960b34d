package gate

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
)

// checkMessage checks that a message from a client is one JSON-RPC 2.0
// message as MCP allows it, before mcp-go reads it (which takes a wrong
// shape for a parse error, an object for an id, and invalid UTF-8 for
// U+FFFD). It returns nil for a message to hand on, else the error to
// answer with; stdio and HTTP answer alike.
//
//   - not UTF-8, or not JSON: -32700 (parse error), id null;
//   - a batch (an array): -32600, id null: MCP has had no batches since
//     2025-06-18, and the gate takes none in any revision;
//   - not an object, "jsonrpc" other than "2.0", an id that is not a string
//     or a number (MCP forbids null), a method that is not a string, a
//     message with neither a method nor a result or error: -32600, with the
//     id when it is a valid one;
//   - params that are not an object: -32602.
func checkMessage(raw []byte) *mcp.JSONRPCError {
	if !utf8.Valid(raw) {
		return rpcError(nil, mcp.PARSE_ERROR, "Parse error: the message is not valid UTF-8")
	}
	if !json.Valid(raw) {
		return rpcError(nil, mcp.PARSE_ERROR, "Parse error: the message is not valid JSON")
	}
	b := bytes.TrimLeft(raw, " \t\r\n")
	if len(b) > 0 && b[0] == '[' {
		return rpcError(nil, mcp.INVALID_REQUEST, "Invalid Request: JSON-RPC batches are not supported; send one message at a time")
	}
	var m map[string]json.RawMessage
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &m) != nil {
		return rpcError(nil, mcp.INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
	}
	var id any
	rawID, hasID := m["id"]
	if hasID {
		switch first(rawID) {
		case '"':
			var s string
			_ = json.Unmarshal(rawID, &s)
			id = s
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			id = json.Number(rawID)
		default:
			return rpcError(nil, mcp.INVALID_REQUEST, "Invalid Request: id must be a string or a number")
		}
	}
	if v, ok := m["jsonrpc"]; !ok || string(bytes.TrimSpace(v)) != `"2.0"` {
		return rpcError(id, mcp.INVALID_REQUEST, `Invalid Request: "jsonrpc" must be "2.0"`)
	}
	rawMethod, hasMethod := m["method"]
	if hasMethod && first(rawMethod) != '"' {
		return rpcError(id, mcp.INVALID_REQUEST, "Invalid Request: method must be a string")
	}
	_, hasResult := m["result"]
	_, hasError := m["error"]
	switch {
	case hasMethod && (hasResult || hasError):
		return rpcError(id, mcp.INVALID_REQUEST, "Invalid Request: a message has a method or a result, not both")
	case !hasMethod && !(hasResult || hasError):
		return rpcError(id, mcp.INVALID_REQUEST, "Invalid Request: a message needs a method (a request or notification) or a result or error (a response)")
	case !hasMethod && !hasID:
		return rpcError(nil, mcp.INVALID_REQUEST, "Invalid Request: a response needs the id of the request it answers")
	}
	if p, ok := m["params"]; ok && hasMethod && first(p) != '{' {
		return rpcError(id, mcp.INVALID_PARAMS, "Invalid params: params must be an object")
	}
	return nil
}

// first returns the first byte of a JSON value, 0 for none.
func first(v json.RawMessage) byte {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

func rpcError(id any, code int, msg string) *mcp.JSONRPCError {
	e := mcp.NewJSONRPCError(mcp.NewRequestId(id), code, msg, nil)
	return &e
}
