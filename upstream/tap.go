package upstream

import (
	"context"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// tap wraps a client transport to see what mcp-go's Client keeps to
// itself: the JSON-RPC error of a call's response (its code, message and
// data; the Client turns it into a bare Go error), and, over HTTP, the id
// of a request whose context ended, to send notifications/cancelled for it
// (the Client sends that over stdio only).
type tap struct {
	transport.Interface
	bidi transport.BidirectionalInterface // nil if the transport is not
}

// callNote is where tap leaves what it saw of one call; Call puts one in
// the context it gives the Client.
type callNote struct {
	rpcErr *mcp.JSONRPCErrorDetails
}

type callNoteKey struct{}

func (t *tap) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	resp, err := t.Interface.SendRequest(ctx, req)
	if resp != nil && resp.Error != nil {
		if n, ok := ctx.Value(callNoteKey{}).(*callNote); ok {
			n.rpcErr = resp.Error
		}
	}
	return resp, err
}

func (t *tap) SetRequestHandler(h transport.RequestHandler) {
	if t.bidi != nil {
		t.bidi.SetRequestHandler(h)
	}
}

// httpTap is the tap of a Streamable HTTP transport: it is an
// HTTPConnection as the transport is (the Client tells it the protocol
// version), and sends notifications/cancelled itself.
type httpTap struct {
	tap
	http *transport.StreamableHTTP
}

func (t *httpTap) SetProtocolVersion(v string)  { t.http.SetProtocolVersion(v) }
func (t *httpTap) RequiresLegacyProtocol() bool { return t.http.RequiresLegacyProtocol() }

func (t *httpTap) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	resp, err := t.tap.SendRequest(ctx, req)
	if err != nil && ctx.Err() != nil && req.Method != string(mcp.MethodInitialize) {
		n := mcp.JSONRPCNotification{
			JSONRPC: mcp.JSONRPC_VERSION,
			Notification: mcp.Notification{
				Method: string(mcp.MethodNotificationCancelled),
				Params: mcp.NotificationParams{AdditionalFields: map[string]any{
					"requestId": req.ID, "reason": ctx.Err().Error(),
				}},
			},
		}
		// Best effort, off the caller's path: the caller has its error.
		go func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = t.http.SendNotification(ctx, n)
		}()
	}
	return resp, err
}
