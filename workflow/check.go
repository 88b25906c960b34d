package workflow

import (
	"fmt"

	"github.com/stategate/stategate/xstate"
)

// Check checks machine files as l.Check does, and then as a server
// would serve them: each good machine's tools are built (two events
// making one tool name, or a bad meta.tool.inputSchema, fail the file),
// and among the files found in folders, a machine whose id or tool names
// are taken by an older file's machine fails, as the server serves the
// older one. handleKey is the server's --handle-key.
func Check(l *xstate.Loader, paths []string, handleKey string) (*xstate.Report, error) {
	rep, err := l.Check(paths)
	if err != nil {
		return nil, err
	}
	built := map[string]*Workflow{}
	var found []string
	for i := range rep.Files {
		r := &rep.Files[i]
		if r.Failed || r.Skipped != "" || r.Machine == nil {
			continue
		}
		m, err := newWorkflow(r.Machine, workflowID(r.Machine, r.File), r.File, handleKey)
		if err != nil {
			r.Failed = true
			r.Diags = append(r.Diags, xstate.Diagnostic{File: r.File, Msg: err.Error()})
			continue
		}
		if m.startErr != nil {
			// Most often a context made of an input the machine does
			// not declare: every instance would start failed.
			r.Diags = append(r.Diags, xstate.Diagnostic{File: r.File, State: "(root)", Warning: true, Msg: fmt.Sprintf(
				"the machine does not start without an input (%s): every instance would start failed; if its context or entry actions read input, declare the input's schema at meta.input, and instances start through %s with it (docs/tools.md#machines-that-start-with-an-input)",
				xstate.PublicError(m.startErr), m.StartTool)})
		}
		if r.Found {
			built[r.File] = m
			found = append(found, r.File)
		}
	}
	xstate.SortOldestFirst(found)
	held := claims{}
	index := map[string]int{}
	for i, r := range rep.Files {
		index[r.File] = i
	}
	for _, f := range found {
		m, r := built[f], &rep.Files[index[f]]
		var clash string
		switch kind, name, first := held.taken(m); kind {
		case "id":
			clash = fmt.Sprintf("machine id %q is also the id of the machine of %s (older): a server serves that one", name, first)
		case "tool":
			clash = fmt.Sprintf("tool %s is also a tool of the machine of %s (older): a server serves that one", name, first)
		}
		if clash != "" {
			r.Failed = true
			r.Diags = append(r.Diags, xstate.Diagnostic{File: f, Msg: clash})
			continue
		}
		held.take(m, f)
	}
	// A file that fails for missing implementations, whose machine id an
	// older file's machine has, is a copy: that is what to say (its
	// implementations module is looked up by the copy's own name).
	for i := range rep.Files {
		r := &rep.Files[i]
		if !r.Failed || !r.Found || r.Machine == nil {
			continue
		}
		if first, taken := held.ids[r.Machine.ID]; taken && first != r.File {
			var warns []xstate.Diagnostic
			for _, d := range r.Diags {
				if d.Warning {
					warns = append(warns, d)
				}
			}
			r.Diags = append(warns, xstate.Diagnostic{File: r.File, Msg: fmt.Sprintf("machine id %q is also the id of the machine of %s (older): a server serves that one; %s",
				r.Machine.ID, first, copyHint(r.File))})
		}
	}
	return rep, nil
}
