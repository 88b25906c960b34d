package gate_test

import (
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
)

// TestListBetweenRegisterAndServe: mcp-go tells every client that its
// list changed as the gate registers changed tools, before the gate
// serves them. A session that lists in between (on that very
// notification) is shown the list as it was; it must be told again once
// the change is served, or it never learns of it.
func TestListBetweenRegisterAndServe(t *testing.T) {
	url, g := setup(t)
	lamp := func(desc string) *workflow.Workflow {
		t.Helper()
		m, _, err := (&xstate.Loader{}).Parse("lamp.json", []byte(`{"id":"lamp","initial":"off","states":{"off":{"on":{"SWITCH":{"target":"on","description":"`+desc+`"}}},"on":{}}}`))
		if err != nil {
			t.Fatal(err)
		}
		w, err := workflow.New(m, workflow.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	if err := g.SetWorkflows([]*workflow.Workflow{lamp("Turn it on.")}); err != nil {
		t.Fatal(err)
	}
	c := connect(t, url)
	method := string(mcp.MethodNotificationToolsListChanged)
	c.AwaitTools("the lamp's tool", func(ts map[string]mcp.Tool) bool { return ts["lamp_switch"].Description == "Turn it on." })
	before := len(c.Notifications(method))
	g.SetRegistered(func() {
		// mcp-go's notification reaches the client, which lists at once.
		c.AwaitNotification(method, func(mcp.JSONRPCNotification) bool { return len(c.Notifications(method)) > before })
		before = len(c.Notifications(method))
		if d := c.Tools()["lamp_switch"].Description; d != "Turn it on." {
			t.Errorf("listed before it was served: %q", d)
		}
	})
	if err := g.SetWorkflows([]*workflow.Workflow{lamp("Light the room.")}); err != nil {
		t.Fatal(err)
	}
	g.SetRegistered(nil)
	// Told again (its list differs from the one it was shown), the client
	// lists what is served.
	c.AwaitNotification(method, func(mcp.JSONRPCNotification) bool { return len(c.Notifications(method)) > before })
	if d := c.Tools()["lamp_switch"].Description; d != "Light the room." {
		t.Errorf("after the serve: %q", d)
	}
}
