package gate_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
)

// A host's own mcp-go server, with a tool of its own and a tool whose Go
// handler does the work of a workflow's step: the gate lists the bound
// tool only in the state that allows it, and a call moves the workflow.
func ExampleGate_Bind() {
	srv := mcpserver.NewMCPServer("billing", "1.0")
	srv.AddTool(mcp.NewTool("ping"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("pong"), nil
	})
	// One instance shared by every session (over HTTP without it, each
	// session has its own).
	g := gate.New(gate.Options{SharedInstance: gate.DefaultInstance})
	if err := g.Bind(srv); err != nil {
		panic(err)
	}
	m, _, err := (&xstate.Loader{}).Parse("invoice.json", []byte(`{
	  "id": "invoice", "initial": "draft",
	  "states": {
	    "draft": {"on": {"APPROVE": "approved"}},
	    "approved": {"on": {"DISCHARGE": "discharged"}},
	    "discharged": {"type": "final"}}}`))
	if err != nil {
		panic(err)
	}
	w, _ := workflow.New(m, workflow.Options{})
	if err := g.SetWorkflows([]*workflow.Workflow{w}); err != nil {
		panic(err)
	}
	var paid []string
	g.Tool(mcp.NewTool("discharge", mcp.WithDescription("Pay the invoice.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			st, _ := gate.StateFrom(ctx)
			paid = append(paid, st.Handle)
			return mcp.NewToolResultText("paid"), nil
		}).BindState("invoice", []string{"approved"}, "DISCHARGE")

	c, err := client.NewInProcessClient(srv)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	defer c.Close()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	if _, err := c.Initialize(ctx, init); err != nil {
		panic(err)
	}
	list := func() {
		res, _ := c.ListTools(ctx, mcp.ListToolsRequest{})
		var names []string
		for _, t := range res.Tools {
			names = append(names, t.Name)
		}
		sort.Strings(names)
		fmt.Println(names)
	}
	call := func(name string) {
		req := mcp.CallToolRequest{}
		req.Params.Name = name
		res, _ := c.CallTool(ctx, req)
		fmt.Println(name, "->", res.Content[0].(mcp.TextContent).Text)
	}
	list()
	call("invoice_approve")
	list()
	call("discharge")
	fmt.Println("paid:", paid)
	// Output:
	// [invoice_approve invoice_status ping]
	// invoice_approve -> invoice default is now in state approved (active). Tools available now: discharge, invoice_status.
	// [discharge invoice_status ping]
	// discharge -> paid
	// paid: [default]
}

// The README's embedding: a host's server, the gate on a store, and the
// machines of a folder served as serve serves them.
func ExampleGate_Reloaded() {
	dir, _ := os.MkdirTemp("", "machines")
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "lamp.json"), []byte(`{"id":"lamp","initial":"off","states":{"off":{"on":{"ON":"on"}},"on":{"on":{"OFF":"off"}}}}`), 0o644)
	ctx := context.Background()

	srv := mcpserver.NewMCPServer("billing", "1.0")                                             // your server, your tools
	g := gate.New(gate.Options{Store: store.NewMemory(), SharedInstance: gate.DefaultInstance}) // badger.Open(dir, badger.Options{}) keeps them
	if err := g.Bind(srv); err != nil {                                                         // the gate's tools, listing, hooks
		panic(err)
	}
	lib := workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Loader: &xstate.Loader{}, Serve: g.Reloaded})
	if err := lib.Reload(ctx); err != nil { // the folder's machines, as serve loads them (watch.Tree reloads them as they change)
		panic(err)
	}

	for _, w := range g.Workflows() {
		fmt.Println(w.ID, w.ToolNames())
	}
	// Output:
	// lamp [lamp_status lamp_reset lamp_start lamp_off lamp_on]
}
