package gate_test

import (
	"context"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// BenchmarkCall times the per-call path: one tools/call that moves the
// invoice machine (submit, then request changes), in process, with the
// store, listing and notifications of a real call.
func BenchmarkCall(b *testing.B) {
	_, g := setup(b)
	c, err := client.NewInProcessClient(g.Server())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	if _, err := c.Initialize(ctx, init); err != nil {
		b.Fatal(err)
	}
	calls := []string{"invoice_submit", "invoice_request_changes"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		req := mcp.CallToolRequest{}
		req.Params.Name = calls[i%2]
		req.Params.Arguments = map[string]any{"reason": "fix it"}
		res, err := c.CallTool(ctx, req)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
		i++
	}
}
