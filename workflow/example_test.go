package workflow_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

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

// Checking machine files as a server of your own would load them, with
// its Go implementations: every problem of each file at once, at its line
// and column (what `stategate check` prints, which knows only the
// machines' own code). A name the registry has is not a problem; one it
// lacks is.
func ExampleCheck() {
	dir, err := os.MkdirTemp("", "check")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "review.json")
	if err := os.WriteFile(file, []byte(`{
  "id": "review",
  "initial": "open",
  "states": {
    "open": {
      "on": {
        "APPROVE": { "target": "approved", "guard": "isReviewer", "actions": "count" },
        "CLOSE": { "target": "closed", "guard": "isOwner" }
      }
    },
    "approved": { "type": "final" },
    "closed": { "type": "final" }
  }
}`), 0o644); err != nil {
		panic(err)
	}
	reg := xstate.NewRegistry().
		Guard("isReviewer", func(interp.Args, any) (bool, error) { return true, nil }).
		Action("count", func(interp.Args, any) error { return nil })
	rep, err := workflow.Check(&xstate.Loader{Registry: reg}, []string{file}, "")
	if err != nil {
		panic(err)
	}
	for _, f := range rep.Files {
		for _, d := range f.Diags {
			fmt.Println(strings.TrimPrefix(d.String(), dir+string(filepath.Separator)))
		}
		fmt.Println(f.Failed)
	}
	// Output:
	// review.json:8:40: state open: guard "isOwner" has no implementation (at: "CLOSE": { "target": "closed", "guard": "isOwner" })
	// true
}
