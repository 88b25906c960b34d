package gate

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
)

// envelope is a message's members as readEnvelope reads them, once; the
// params stay raw.
type envelope struct {
	JSONRPC json.RawMessage `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`

	// method is Method decoded ("" for a response).
	method string
}

// readEnvelope checks that a message from a client is one JSON-RPC 2.0
// message as MCP allows it, before mcp-go reads it (which takes a wrong
// shape for a parse error, an object for an id, and invalid UTF-8 for
// U+FFFD). It returns the message's members (read once) to hand on, else
// the error to answer with; stdio and HTTP answer alike.
//
//   - not UTF-8, or not JSON: -32700 (parse error), id null;
//   - a batch (an array): -32600, id null: MCP has had no batches since
//     2025-06-18, and the gate takes none in any revision;
//   - not an object, "jsonrpc" other than "2.0", an id that is not a string
//     or a number (MCP forbids null), a method that is not a string, a
//     message with neither a method nor a result or error: -32600, with the
//     id when it is a valid one;
//   - params that are not an object: -32602.
func readEnvelope(raw []byte) (*envelope, *mcp.JSONRPCError) {
	if !utf8.Valid(raw) {
		return nil, rpcError(nil, mcp.PARSE_ERROR, "Parse error: the message is not valid UTF-8")
	}
	b := bytes.TrimLeft(raw, " \t\r\n")
	var e envelope
	if err := json.Unmarshal(b, &e); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case !errors.As(err, &te) || !json.Valid(b):
			return nil, rpcError(nil, mcp.PARSE_ERROR, "Parse error: the message is not valid JSON")
		case len(b) > 0 && b[0] == '[':
			return nil, rpcError(nil, mcp.INVALID_REQUEST, "Invalid Request: JSON-RPC batches are not supported; send one message at a time")
		default:
			return nil, rpcError(nil, mcp.INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
		}
	}
	if len(b) == 0 || b[0] != '{' {
		return nil, rpcError(nil, mcp.INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
	}
	var id any
	hasID := e.ID != nil
	if hasID {
		switch first(e.ID) {
		case '"':
			var s string
			_ = json.Unmarshal(e.ID, &s)
			id = s
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			id = json.Number(e.ID)
		default:
			return nil, rpcError(nil, mcp.INVALID_REQUEST, "Invalid Request: id must be a string or a number")
		}
	}
	if string(bytes.TrimSpace(e.JSONRPC)) != `"2.0"` {
		return nil, rpcError(id, mcp.INVALID_REQUEST, `Invalid Request: "jsonrpc" must be "2.0"`)
	}
	hasMethod := e.Method != nil
	if hasMethod && first(e.Method) != '"' {
		return nil, rpcError(id, mcp.INVALID_REQUEST, "Invalid Request: method must be a string")
	}
	hasResult, hasError := e.Result != nil, e.Error != nil
	switch {
	case hasMethod && (hasResult || hasError):
		return nil, rpcError(id, mcp.INVALID_REQUEST, "Invalid Request: a message has a method or a result, not both")
	case !hasMethod && !(hasResult || hasError):
		return nil, rpcError(id, mcp.INVALID_REQUEST, "Invalid Request: a message needs a method (a request or notification) or a result or error (a response)")
	case !hasMethod && !hasID:
		return nil, rpcError(nil, mcp.INVALID_REQUEST, "Invalid Request: a response needs the id of the request it answers")
	}
	if e.Params != nil && hasMethod && first(e.Params) != '{' {
		return nil, rpcError(id, mcp.INVALID_PARAMS, "Invalid params: params must be an object")
	}
	if hasMethod {
		if err := json.Unmarshal(e.Method, &e.method); err != nil {
			return nil, rpcError(id, mcp.INVALID_REQUEST, "Invalid Request: method must be a string")
		}
	}
	return &e, nil
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

// protocolVersion is the protocol version the message's params name in
// their _meta (2026-07-28 puts it there), "" when none.
func (e *envelope) protocolVersion() string {
	if !bytes.Contains(e.Params, []byte(`"_meta"`)) {
		return ""
	}
	var p struct {
		Meta *mcp.Meta `json:"_meta"`
	}
	_ = json.Unmarshal(e.Params, &p)
	return p.Meta.ProtocolVersion()
}

// toolName is the name a tools/call's params give, "" when none.
func (e *envelope) toolName() string {
	var p struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(e.Params, &p)
	return p.Name
}

// checkModern checks that a request of revision 2026-07-28 over HTTP
// carries what that revision asks of every request, and names all that
// is missing at once: the Mcp-Protocol-Version, Mcp-Method and (for a
// method that names something) Mcp-Name headers, and in the params'
// _meta the protocol version (the same) and the client's capabilities
// (an object, {} for none). mcp-go checks them one at a time (and checks
// that they match the body).
func checkModern(h http.Header, env *envelope) *mcp.JSONRPCError {
	if env.method == "" {
		return nil // a response: mcp-go's to refuse
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(env.Params, &p)
	header := h.Get(mcp.HeaderProtocolVersion)
	var version string
	_ = json.Unmarshal(p.Meta[mcp.MetaKeyProtocolVersion], &version)
	var missing []string
	if header == "" {
		missing = append(missing, "the "+mcp.HeaderProtocolVersion+" header")
	}
	if h.Get(mcp.HeaderMethod) == "" {
		missing = append(missing, fmt.Sprintf("the %s header (%s)", mcp.HeaderMethod, env.method))
	}
	if mcp.MethodRequiresNameHeader(mcp.MCPMethod(env.method)) && h.Get(mcp.HeaderName) == "" {
		missing = append(missing, fmt.Sprintf("the %s header (the params' name, or uri)", mcp.HeaderName))
	}
	if version == "" {
		missing = append(missing, fmt.Sprintf("_meta[%q] in the params", mcp.MetaKeyProtocolVersion))
	}
	if caps := p.Meta[mcp.MetaKeyClientCapabilities]; len(caps) == 0 || first(caps) != '{' {
		missing = append(missing, fmt.Sprintf("_meta[%q] in the params (an object: {} for none)", mcp.MetaKeyClientCapabilities))
	}
	v := cmp.Or(version, header)
	switch {
	case len(missing) > 0:
		return rpcError(jsonID(env.ID), mcp.INVALID_PARAMS, fmt.Sprintf("Invalid params: a request of protocol revision %s needs the headers %s, %s and (for tools/call, resources/read, prompts/get) %s, and in its params' _meta %s (the same revision) and %s; missing: %s (a client of an earlier revision sends initialize first, and no _meta version)",
			v, mcp.HeaderProtocolVersion, mcp.HeaderMethod, mcp.HeaderName, mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientCapabilities, strings.Join(missing, "; ")))
	case header != version:
		return rpcError(jsonID(env.ID), mcp.HEADER_MISMATCH, fmt.Sprintf("the %s header %s does not match the request's _meta %s %s: they must be the same revision", mcp.HeaderProtocolVersion, header, mcp.MetaKeyProtocolVersion, version))
	}
	return nil
}

// jsonID is a message's id as rpcError takes it.
func jsonID(raw json.RawMessage) any {
	var id any
	if first(raw) == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	}
	if raw != nil {
		id = json.Number(raw)
	}
	return id
}
