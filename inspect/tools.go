package inspect

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/workflow"
)

// toolView is one of a workflow's tools as the pages list it.
type toolView struct {
	Name        string
	Event       string // its event ("" for a state's upstream tool, status, reset)
	Description string // as clients are listed it (the compact one in the initial state)
	// Roles are the roles a caller needs one of to see and call it (none:
	// every caller).
	Roles []string
	// Hidden is set when Options.Caller holds none of Roles: that agent is
	// not listed the tool.
	Hidden bool
	// Notes say what else a call does: who approves it, what its human
	// is asked, the upstream tool it forwards to.
	Notes []string
	// Accepting are the states that take its event (the workflow's page).
	Accepting []string
}

// toolsNow is what an instance offers its agents now, as the gate lists
// its tools to a session of a revision with sessions (the gate's view of
// an instance): the status tool always; while it is active, each event
// tool whose event the instance would take now (workflow.Accepts: XState's
// snapshot.can, guards included, keeping a tool whose guard reads the
// event's arguments) and each upstream tool an active state lists
// (meta.tools); once it is done or failed, the reset tool; while a call
// waits for an operator's approval, only the status tool. Tools a role
// hides are listed with their roles.
//
// It does not see what a host binds in Go (gate's Tool and Bound with
// BindState): such a tool is listed here as its event's tool.
type toolsNow struct {
	Tools []toolView
	// Others are the workflow's event tools the instance does not offer
	// now, by name.
	Others []string
	// Waiting names the tool whose call waits for an operator's approval
	// ("" when none): no other is offered until it is settled.
	Waiting string
	// Caller says whose view Hidden is ("" when the inspector is told of
	// no single caller).
	Caller string
}

// toolsAt computes what an instance offers now.
func (h *Handler) toolsAt(in *workflow.Instance) toolsNow {
	wf, s, pending := in.Workflow, in.Snapshot, in.Pending
	var out toolsNow
	if c := h.opts.Caller; c != nil {
		out.Caller = who(*c)
	}
	out.Tools = append(out.Tools, toolView{Name: wf.StatusTool, Description: "Shows where the instance is: its state, status, context, and the tools it allows now. Always listed."})
	if wf.NeedsInput() && (in.NotStarted || wf.HandleKey != "") {
		out.Tools = append(out.Tools, toolView{Name: wf.StartTool, Description: "Starts an instance with its input (the machine's meta.input)."})
	}
	offered := map[string]bool{}
	switch {
	case in.NotStarted:
		// Not started: its start tool and its status tool, nothing else.
		s = nil
	case pending != nil:
		out.Waiting = pending.Tool
	case s.Status != interp.StatusActive:
		out.Tools = append(out.Tools, toolView{Name: wf.ResetTool, Description: "Starts the finished instance (done or failed) afresh."})
	default:
		initial := wf.IsInitial(s)
		for _, t := range wf.Tools {
			if !workflow.Accepts(s, t.Event) {
				continue
			}
			offered[t.Name] = true
			v := h.eventTool(t)
			if initial && t.Compact != "" {
				v.Description = t.Compact
			}
			out.Tools = append(out.Tools, v)
		}
	}
	if pending == nil && s != nil {
		for _, st := range wf.StateTools {
			if st.Active(s) {
				out.Tools = append(out.Tools, stateTool(st))
			}
		}
	}
	slices.SortFunc(out.Tools, func(a, b toolView) int { return strings.Compare(a.Name, b.Name) })
	for _, t := range wf.Tools {
		if !offered[t.Name] {
			out.Others = append(out.Others, t.Name)
		}
	}
	return out
}

// eventTool is an event's tool as the pages list it.
func (h *Handler) eventTool(t *workflow.Tool) toolView {
	v := toolView{Name: t.Name, Event: t.Event, Description: t.Description, Roles: t.Roles, Accepting: t.Accepting}
	if c := h.opts.Caller; c != nil && len(t.Roles) > 0 {
		v.Hidden = !slices.ContainsFunc(t.Roles, func(r string) bool { return slices.Contains(c.Roles, r) })
	}
	if t.Approval != "" {
		v.Notes = append(v.Notes, fmt.Sprintf("each call waits for the approval of an operator holding the role %s, here", t.Approval))
	}
	if t.Confirm != "" {
		v.Notes = append(v.Notes, fmt.Sprintf("the caller's human is asked first: %q (when the client cannot ask, an operator approves it here)", t.Confirm))
	}
	if t.Upstream != "" {
		n := "forwards to the upstream tool " + t.Upstream + "; its success sends " + t.Event
		if !t.Given.Description {
			n += " (clients are listed the upstream tool's own description)"
		}
		v.Notes = append(v.Notes, n)
	}
	return v
}

// stateTool is a state's upstream tool (meta.tools) as the pages list it.
func stateTool(st *workflow.StateTool) toolView {
	states := make([]string, len(st.States))
	for i, n := range st.States {
		states[i] = n.PathString()
	}
	return toolView{Name: st.Name, Description: "The upstream tool " + st.Upstream + ", forwarded as it is (its own description is listed); it sends no event.",
		Accepting: states, Notes: []string{"listed while " + strings.Join(states, " or ") + " is active (meta.tools)"}}
}

// workflowTools lists every tool of a workflow, for its page.
func (h *Handler) workflowTools(wf *workflow.Workflow) []toolView {
	out := make([]toolView, 0, len(wf.Tools)+len(wf.StateTools))
	for _, t := range wf.Tools {
		out = append(out, h.eventTool(t))
	}
	for _, st := range wf.StateTools {
		out = append(out, stateTool(st))
	}
	slices.SortFunc(out, func(a, b toolView) int { return strings.Compare(a.Name, b.Name) })
	return out
}
