package gate_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
)

// bill is an invoice made in memory: approved, then discharged by a tool
// with a Go handler (the payment), which records the handler's output; a
// failed payment comes back as DISCHARGE_FAILED.
const bill = `{
  "id": "bill",
  "meta": { "handleKey": "bill_id" },
  "initial": "draft",
  "context": { "receipt": null, "failure": null },
  "states": {
    "draft": { "on": { "APPROVE": "approved" } },
    "approved": { "on": {
      "DISCHARGE": { "target": "discharged", "actions": "keepReceipt" },
      "DISCHARGE_FAILED": { "actions": "keepFailure" },
      "CANCEL": "cancelled" } },
    "discharged": { "type": "final" },
    "cancelled": { "type": "final" }
  }
}`

func billWorkflow(t testing.TB) *workflow.Workflow {
	t.Helper()
	reg := xstate.NewRegistry().
		Assign("keepReceipt", func(a interp.Args, _ any) (map[string]any, error) {
			return map[string]any{"receipt": a.Event.Data["output"]}, nil
		}).
		Assign("keepFailure", func(a interp.Args, _ any) (map[string]any, error) {
			return map[string]any{"failure": a.Event.Data["error"]}, nil
		})
	m, _, err := (&xstate.Loader{Registry: reg}).Parse("bill.json", []byte(bill))
	if err != nil {
		t.Fatal(err)
	}
	w, err := workflow.New(m, workflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// payments is a payment service the discharge tool calls: it records
// what it paid, and fails while broken is set.
type payments struct {
	mu     sync.Mutex
	paid   []string
	states []any // the instance's state each call saw (StateFrom)
	broken bool
}

func (p *payments) discharge(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := gate.StateFrom(ctx)
	if !ok {
		return nil, errors.New("no instance in the handler's context")
	}
	p.states = append(p.states, st.Value)
	if p.broken {
		return mcp.NewToolResultError("the card was declined"), nil
	}
	p.paid = append(p.paid, st.Handle)
	res := mcp.NewToolResultStructuredOnly(map[string]any{"receipt": "R-" + st.Handle, "amount": 42.0})
	return res, nil
}

// hostWithGate is a host's own mcp-go server, with a tool of its own
// (echo), and the gate bound to it serving bill with discharge bound to
// approved.
func hostWithGate(t *testing.T) (*mcptest.Client, *gate.Gate, *payments) {
	t.Helper()
	srv := mcpserver.NewMCPServer("host", "1.0")
	srv.AddTool(mcp.NewTool("echo", mcp.WithDescription("Echo the text."), mcp.WithString("text")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(req.GetString("text", "")), nil
		})
	g := gate.New(gate.Options{Store: store.NewMemory(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	// A tool of the host's, bound to a state by name: registered before
	// the gate is bound (cancel), its handler and definition are the
	// host's.
	srv.AddTool(mcp.NewTool("cancel", mcp.WithDescription("Cancel the bill.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("cancelled"), nil
		})
	g.Bound("cancel").BindState("bill", []string{"approved"}, "CANCEL")
	if err := g.Bind(srv); err != nil {
		t.Fatal(err)
	}
	if err := g.Bind(mcpserver.NewMCPServer("other", "1")); !errors.Is(err, gate.ErrBound) {
		t.Fatalf("a second Bind: %v", err)
	}
	if err := g.SetWorkflows([]*workflow.Workflow{billWorkflow(t)}); err != nil {
		t.Fatal(err)
	}
	pay := &payments{}
	g.Tool(mcp.NewTool("discharge", mcp.WithDescription("Pay the bill."), mcp.WithOutputSchema[map[string]any]()), pay.discharge).
		BindState("bill", []string{"approved"}, "DISCHARGE").
		OnError("DISCHARGE_FAILED")
	h := g.HTTPHandler(gate.HTTPOptions{})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	t.Cleanup(h.Close)
	return connect(t, ts.URL+"/mcp"), g, pay
}

func TestBindKeepsTheHostsTools(t *testing.T) {
	c, _, _ := hostWithGate(t)
	tools := c.Tools()
	for _, want := range []string{"echo", "bill_approve", "bill_status"} {
		if _, ok := tools[want]; !ok {
			t.Errorf("%s not listed: %v", want, mcptest.Names(tools))
		}
	}
	for _, hidden := range []string{"discharge", "cancel", "bill_cancel", "bill_discharge", "bill_discharge_failed", "stategate.unknown-tool"} {
		if _, ok := tools[hidden]; ok {
			t.Errorf("%s listed in draft: %v", hidden, mcptest.Names(tools))
		}
	}
	if text, _, isErr := c.Call("echo", map[string]any{"text": "hi"}); isErr || text != "hi" {
		t.Errorf("echo: %q %v", text, isErr)
	}
}

func TestBoundTool(t *testing.T) {
	c, _, pay := hostWithGate(t)
	id := map[string]any{"bill_id": "b-1"}
	// Not in its state: refused with the tools allowed now, and the
	// handler does not run.
	// discharge has an output schema, which clients check error results
	// against too: the gate's answer is in _meta.
	res := c.Result("discharge", id)
	if text := mcptest.Text(res); !res.IsError || res.StructuredContent != nil || !strings.Contains(text, "FORBIDDEN") || !strings.Contains(text, "bill_approve") || len(pay.paid) != 0 {
		t.Fatalf("discharge in draft: %+v (paid %v)", res, pay.paid)
	}
	if e, _ := res.Meta.AdditionalFields["stategate/error"].(map[string]any); e["error"] != "FORBIDDEN" {
		t.Errorf("_meta of the refusal: %+v", res.Meta)
	}
	c.Call("bill_approve", id)
	c.AwaitTools("discharge", func(ts map[string]mcp.Tool) bool { _, ok := ts["discharge"]; return ok })
	listed := c.Tools()["discharge"]
	if props := listed.InputSchema.Properties; props["bill_id"] == nil {
		t.Errorf("the bound tool's schema lacks the handle argument: %+v", listed.InputSchema)
	}
	// A failed payment sends the error event: the bill stays approved.
	pay.broken = true
	res = c.Result("discharge", id)
	if !res.IsError || !strings.Contains(mcptest.Text(res), "declined") {
		t.Fatalf("a declined payment: %+v", res)
	}
	_, sc, _ := c.Call("bill_status", id)
	if sc["state"] != "approved" || sc["context"].(map[string]any)["failure"] != "the card was declined" {
		t.Fatalf("after the declined payment: %v", sc)
	}
	// A payment: the handler saw the instance, its result is kept as it
	// is, with the gate's note, and the event moved the bill.
	pay.broken = false
	res = c.Result("discharge", id)
	if res.IsError {
		t.Fatalf("discharge: %+v", res)
	}
	structured, _ := res.StructuredContent.(map[string]any)
	if structured["receipt"] != "R-b-1" || len(structured) != 2 {
		t.Errorf("the handler's structured content was changed: %v", res.StructuredContent)
	}
	if text := mcptest.Text(res); !strings.Contains(text, "now in state discharged (done)") {
		t.Errorf("no note of where the workflow is: %q", text)
	}
	if res.Meta == nil || res.Meta.AdditionalFields["stategate/workflow"] == nil {
		t.Errorf("no _meta note: %+v", res.Meta)
	}
	_, sc, _ = c.Call("bill_status", id)
	receipt, _ := sc["context"].(map[string]any)["receipt"].(map[string]any)
	if sc["state"] != "discharged" || receipt["receipt"] != "R-b-1" {
		t.Errorf("after discharge: %v", sc)
	}
	if len(pay.paid) != 1 || pay.states[len(pay.states)-1] != "approved" {
		t.Errorf("paid %v, states seen %v", pay.paid, pay.states)
	}
	// Done: the bound tool is gone, and a call is refused.
	if res := c.Result("discharge", id); !res.IsError || !strings.Contains(mcptest.Text(res), "FORBIDDEN") {
		t.Errorf("discharge when done: %+v", res)
	}
}

// TestBoundHostTool: a tool the host registered, bound by name.
func TestBoundHostTool(t *testing.T) {
	c, _, _ := hostWithGate(t)
	id := map[string]any{"bill_id": "b-2"}
	if _, sc, isErr := c.Call("cancel", id); !isErr || sc["error"] != "FORBIDDEN" {
		t.Fatalf("cancel in draft: %v", sc)
	}
	c.Call("bill_approve", id)
	res := c.Result("cancel", id)
	if res.IsError || !strings.HasPrefix(mcptest.Text(res), "cancelled\n") {
		t.Fatalf("cancel: %+v", res)
	}
	if _, sc, _ := c.Call("bill_status", id); sc["state"] != "cancelled" {
		t.Errorf("after cancel: %v", sc)
	}
}

// TestSendFromGo: Go code sends an event to an instance without MCP; the
// session that sees it is told its tool list changed.
func TestSendFromGo(t *testing.T) {
	c, g, _ := hostWithGate(t)
	ctx := context.Background()
	id := map[string]any{"bill_id": "b-9"}
	c.Call("bill_status", id) // the session sees b-9
	c.Drain()
	st, err := g.Instances().Send(ctx, "bill", "b-9", interp.Event{Type: "APPROVE"})
	if err != nil || st.Value != "approved" || st.Version != 1 {
		t.Fatalf("Send: %+v, %v", st, err)
	}
	c.AwaitChanged()
	if _, ok := c.Tools()["discharge"]; !ok {
		t.Errorf("discharge not listed after a Send: %v", mcptest.Names(c.Tools()))
	}
	if _, err := g.Instances().Send(ctx, "bill", "b-9", interp.Event{Type: "APPROVE"}); !errors.Is(err, workflow.ErrRejected) {
		t.Errorf("an event the instance does not take: %v", err)
	}
	if _, err := g.Instances().Send(ctx, "nope", "b-9", interp.Event{Type: "APPROVE"}); !errors.Is(err, workflow.ErrUnknownWorkflow) {
		t.Errorf("an unknown workflow: %v", err)
	}
	if _, err := g.Instances().Send(ctx, "bill", "a\x00b", interp.Event{Type: "APPROVE"}); !errors.Is(err, workflow.ErrBadHandle) {
		t.Errorf("a bad handle: %v", err)
	}
	st, err = g.Instances().Snapshot(ctx, "bill", "b-9")
	if err != nil || st.Value != "approved" || st.Status != "active" {
		t.Errorf("Snapshot: %+v, %v", st, err)
	}
	trail, _ := g.Instances().Store().Audit(ctx, store.Key{Machine: "bill", Handle: "b-9"}, 0)
	if len(trail) != 1 || trail[0].Tool != workflow.SendTool {
		t.Errorf("audit trail %+v", trail)
	}
}

// TestBindingTellsLiveSessions: a binding moved to other states while
// sessions are live changes their lists, though no tool is registered
// anew: each session whose list it changes is told.
func TestBindingTellsLiveSessions(t *testing.T) {
	c, g, _ := hostWithGate(t)
	remind := g.Tool(mcp.NewTool("remind", mcp.WithDescription("Approve, and remind the payer.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("reminded"), nil
		}).BindState("bill", []string{"approved"}, "APPROVE")
	c.AwaitTools("remind registered, and not listed in draft", func(tools map[string]mcp.Tool) bool {
		_, listed := tools["remind"]
		_, approve := tools["bill_approve"]
		return !listed && !approve
	})
	c.Settle()
	remind.BindState("bill", []string{"draft"}, "APPROVE")
	c.AwaitChanged()
	if tools := c.Tools(); tools["remind"].Name == "" || tools["bill_approve"].Name != "" {
		t.Fatalf("remind bound to draft: %v", mcptest.Names(tools))
	}
}

// TestBindingTyposAreErrors: a binding to a state or event its workflow
// does not have is an error naming the nearest one; it is not served (its
// event keeps its own tool, and the tool is refused); a binding to a
// workflow not served waits for it, and says so with the nearest name.
func TestBindingTyposAreErrors(t *testing.T) {
	logs := &logBuffer{}
	g := gate.New(gate.Options{Store: store.NewMemory(), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err := g.SetWorkflows([]*workflow.Workflow{billWorkflow(t)}); err != nil {
		t.Fatal(err)
	}
	handler := func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("paid"), nil
	}
	state := g.Tool(mcp.NewTool("pay"), handler).BindState("bill", []string{"aproved"}, "DISCHARGE")
	if err := state.Err(); !errors.Is(err, gate.ErrBinding) || !strings.Contains(err.Error(), `"aproved"`) || !strings.Contains(err.Error(), `nearest is "approved"`) {
		t.Errorf("a misspelt state: %v", err)
	}
	event := g.Tool(mcp.NewTool("pay2"), handler).BindState("bill", []string{"approved"}, "DISCHARG")
	if err := event.Err(); err == nil || !strings.Contains(err.Error(), "DISCHARG ") || !strings.Contains(err.Error(), "nearest is DISCHARGE") {
		t.Errorf("a misspelt event: %v", err)
	}
	wf := g.Tool(mcp.NewTool("pay3"), handler).BindState("bil", []string{"approved"}, "CANCEL")
	if err := wf.Err(); err != nil {
		t.Errorf("a binding to a workflow not served yet is no error: %v", err)
	}
	if logs.count("not served", "bil", "nearest=bill") != 1 {
		t.Errorf("the binding to bil was not said once with the nearest name:\n%s", logs)
	}
	// The event tool stays: the workflow is not stuck.
	srv := mcpserver.NewMCPServer("host", "1")
	if err := g.Bind(srv); err != nil {
		t.Fatal(err)
	}
	c := mcptest.InProcess(t, srv, mcptest.Options{})
	c.Call("bill_approve", map[string]any{"bill_id": "b1"})
	if _, ok := c.Tools()["bill_discharge"]; !ok {
		t.Errorf("bill_discharge not listed in approved: %v", mcptest.Names(c.Tools()))
	}
	if _, sc, _ := c.Call("bill_discharge", map[string]any{"bill_id": "b1"}); sc["state"] != "discharged" {
		t.Errorf("bill_discharge: %v", sc)
	}
}

// TestBoundToolArgumentsAreChecked: a bound Go tool's arguments are
// checked against its input schema, as an event tool's are: a call that
// does not match is INVALID_ARGUMENTS, and its handler never runs.
func TestBoundToolArgumentsAreChecked(t *testing.T) {
	g := gate.New(gate.Options{Store: store.NewMemory(), Logger: quietLog()})
	if err := g.SetWorkflows([]*workflow.Workflow{billWorkflow(t)}); err != nil {
		t.Fatal(err)
	}
	ran := 0
	g.Tool(mcp.NewTool("pay", mcp.WithString("payer", mcp.Required()), mcp.WithNumber("amount", mcp.Min(1))),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ran++
			return mcp.NewToolResultText("paid"), nil
		}).BindState("bill", []string{"approved"}, "DISCHARGE")
	srv := mcpserver.NewMCPServer("host", "1")
	if err := g.Bind(srv); err != nil {
		t.Fatal(err)
	}
	c := mcptest.InProcess(t, srv, mcptest.Options{})
	c.Call("bill_approve", map[string]any{"bill_id": "b1"})
	for _, args := range []map[string]any{{"bill_id": "b1"}, {"bill_id": "b1", "payer": 7}, {"bill_id": "b1", "payer": "acme", "amount": 0}} {
		if text, sc, isErr := c.Call("pay", args); !isErr || sc["error"] != "INVALID_ARGUMENTS" {
			t.Errorf("pay %v: %s", args, text)
		}
	}
	if ran != 0 {
		t.Errorf("the handler ran %d times for arguments its schema refuses", ran)
	}
	text, _, isErr := c.Call("pay", map[string]any{"bill_id": "b1", "payer": "acme", "amount": 5})
	if isErr || ran != 1 || !strings.Contains(text, "paid") {
		t.Errorf("pay with good arguments: %v %s", isErr, text)
	}
	res := c.Result("pay", map[string]any{"bill_id": "b1", "payer": "acme"}) // now discharged
	if !res.IsError {
		t.Errorf("pay once discharged: %s", mcptest.Text(res))
	}
	// The same sentence as an event tool's, and no output when there is none.
	_, sc, _ := c.Call("bill_status", map[string]any{"bill_id": "b1"})
	text, _, _ = c.Call("bill_status", map[string]any{"bill_id": "b1"})
	if sc["status"] != "done" || strings.Contains(text, "Output: null") {
		t.Errorf("status once done: %s", text)
	}
}

// TestResultsSayWhatTheStateIs: a result carries what the machine says of
// the states the instance is in: their descriptions (the most useful
// sentence for a model) and tags.
func TestResultsSayWhatTheStateIs(t *testing.T) {
	m, _, err := (&xstate.Loader{}).Parse("leave.json", []byte(`{"id":"leave","initial":"asked","states":{
	  "asked":{"description":"Waiting for the manager to approve the days off.","tags":["waiting"],"on":{"APPROVE":"granted"}},
	  "granted":{"description":"The days off are granted.","tags":["done","ok"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	w, _ := workflow.New(m, workflow.Options{})
	g := gate.New(gate.Options{Logger: quietLog(), SharedInstance: gate.DefaultInstance})
	if err := g.SetWorkflows([]*workflow.Workflow{w}); err != nil {
		t.Fatal(err)
	}
	c := mcptest.InProcess(t, g.Server(), mcptest.Options{})
	text, sc, _ := c.Call("leave_status", nil)
	if sc["description"] != "Waiting for the manager to approve the days off" || !strings.Contains(text, "asked (active): Waiting for the manager") || fmt.Sprint(sc["tags"]) != "[waiting]" {
		t.Errorf("status: %s %v", text, sc)
	}
	if _, sc, _ := c.Call("leave_approve", nil); sc["description"] != "The days off are granted" || fmt.Sprint(sc["tags"]) != "[done ok]" {
		t.Errorf("approve: %v", sc)
	}
}
