package workflow_test

import (
	"context"
	"fmt"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
)

// A workflow made in memory, from a JSON config and Go implementations,
// driven from Go: no MCP, no file, no JavaScript.
func ExampleInstances_Send() {
	reg := xstate.NewRegistry().Assign("count", func(a interp.Args, _ any) (map[string]any, error) {
		n, _ := a.Context.(map[string]any)["approvals"].(float64)
		return map[string]any{"approvals": n + 1}, nil
	})
	m, _, err := (&xstate.Loader{Registry: reg}).Parse("review.json", []byte(`{
	  "id": "review", "initial": "open", "context": {"approvals": 0},
	  "states": {
	    "open": {"on": {"APPROVE": {"target": "approved", "actions": "count"}}},
	    "approved": {"type": "final"}}}`))
	if err != nil {
		panic(err)
	}
	w, err := workflow.New(m, workflow.Options{})
	if err != nil {
		panic(err)
	}
	inst := workflow.NewInstances(workflow.InstancesOptions{}) // a memory store
	if err := inst.SetWorkflows(w); err != nil {
		panic(err)
	}
	ctx := context.Background()
	st, err := inst.Send(ctx, "review", "pr-7", interp.Event{Type: "APPROVE"})
	fmt.Println(st.Value, st.Status, st.Context, err)
	_, err = inst.Send(ctx, "review", "pr-7", interp.Event{Type: "APPROVE"})
	fmt.Println(err)
	// Output:
	// approved done map[approvals:1] <nil>
	// review pr-7: the workflow does not take the event now in state approved
}
