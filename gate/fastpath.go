package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/mark3labs/mcp-go/mcp"
)

// fastParams are the parameters of a tools/call or tools/list request as
// the fast path reads them. The fields it does not handle itself (_meta,
// tasks, multi-round trips, cursors) send the request to mcp-go instead.
type fastParams struct {
	Name      string `json:"name"`
	Arguments any    `json:"arguments"` // as mcp-go decodes them

	Meta           json.RawMessage `json:"_meta"`
	Task           json.RawMessage `json:"task"`
	InputResponses json.RawMessage `json:"inputResponses"`
	RequestState   json.RawMessage `json:"requestState"`
	Cursor         json.RawMessage `json:"cursor"`
}

func (p *fastParams) plain() bool {
	return len(p.Meta) == 0 && len(p.Task) == 0 && len(p.InputResponses) == 0 && len(p.RequestState) == 0 && len(p.Cursor) == 0
}

// answer answers the requests a session makes most, tools/call of a
// served tool and tools/list, as mcp-go's HandleMessage would (the same
// handler, the same result, the same panic recovery), reading the message
// once instead of four or five times (httpTransport's fastPath). Anything
// else, or anything unusual in these (a _meta, a task, a cursor, an
// unknown tool, parameters that do not parse), is left to mcp-go, which
// answers it or explains the error.
func (g *Gate) answer(ctx context.Context, req *rpcRequest) (mcp.JSONRPCMessage, bool) {
	if req.JSONRPC != mcp.JSONRPC_VERSION || (req.Method != string(mcp.MethodToolsCall) && req.Method != string(mcp.MethodToolsList)) {
		return nil, false
	}
	p := &req.Params
	if req.oddParams || !p.plain() {
		return nil, false
	}
	id, ok := requestID(req.ID)
	if !ok {
		return nil, false
	}
	switch mcp.MCPMethod(req.Method) {
	case mcp.MethodToolsList:
		if p.Name != "" || p.Arguments != nil {
			return nil, false
		}
		res := &mcp.ListToolsResult{Tools: g.listFor(ctx, g.sessionOf(ctx))}
		return mcp.NewJSONRPCResultResponse(mcp.NewRequestId(id), res), true
	}
	if _, served := g.lookup(p.Name); !served {
		return nil, false
	}
	call := mcp.CallToolRequest{}
	call.Method = req.Method
	call.Params.Name = p.Name
	call.Params.Arguments = p.Arguments
	res, err := g.handleRecovered(ctx, call)
	if err != nil {
		return mcp.NewJSONRPCError(mcp.NewRequestId(id), mcp.INTERNAL_ERROR, err.Error(), nil), true
	}
	return mcp.NewJSONRPCResultResponse(mcp.NewRequestId(id), res), true
}

// requestID reads a request's id as json.Unmarshal into `any` reads it (a
// number is a float64), without decoding again the common forms: a
// number, or a string with no escapes. raw is part of a message that
// parsed, so it is valid JSON.
func requestID(raw json.RawMessage) (any, bool) {
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' && !bytes.ContainsRune(raw, '\\') {
		return string(raw[1 : n-1]), true
	}
	if len(raw) > 0 && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')) {
		if f, err := strconv.ParseFloat(string(raw), 64); err == nil {
			return f, true
		}
	}
	var id any
	if err := json.Unmarshal(raw, &id); err != nil {
		return nil, false
	}
	return id, true
}

// handleRecovered is handle with mcp-go's WithRecovery around it: a panic
// becomes the call's error.
func (g *Gate) handleRecovered(ctx context.Context, req mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("panic recovered in %s tool handler: %v", req.Params.Name, r)
		}
	}()
	return g.handle(ctx, req)
}
