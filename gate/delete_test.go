package gate_test

import (
	"context"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/store"
)

// TestDeleteTellsSessions: a session that sees an instance is told
// (list_changed) when it is deleted, on the replica that deleted it and
// on another, and its next list is that of the instance as it starts.
func TestDeleteTellsSessions(t *testing.T) {
	mem := store.NewMemory()
	urlA, a := serveOn(t, mem.Replica("a"), testMachines, gate.HTTPOptions{Route: "a"})
	urlB, _ := serveOn(t, mem.Replica("b"), testMachines, gate.HTTPOptions{Route: "b"})
	onA, onB := connect(t, urlA), connect(t, urlB)
	onA.Call("order_add", map[string]any{"order_id": "o1"})
	if _, sc, isErr := onA.Call("order_close", map[string]any{"order_id": "o1"}); isErr {
		t.Fatalf("order_close: %v", sc)
	}
	onA.Settle()
	if _, sc, isErr := onB.Call("order_status", map[string]any{"order_id": "o1"}); isErr {
		t.Fatalf("order_status on b: %v", sc)
	}
	onB.Settle()
	for name, c := range map[string]*mcptest.Client{"a": onA, "b": onB} {
		if _, ok := c.Tools()["order_reopen"]; !ok {
			t.Fatalf("%s: order_reopen not listed while the order is closed", name)
		}
	}
	if err := a.Instances().Delete(context.Background(), "order", "o1", "deleted by a test"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*mcptest.Client{onA, onB} {
		c.AwaitChanged()
		c.AwaitTools("the order's tools as it starts", func(tools map[string]mcp.Tool) bool {
			_, reopen := tools["order_reopen"]
			_, add := tools["order_add"]
			return !reopen && add
		})
	}
}
