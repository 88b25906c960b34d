package inspect

import (
	"html/template"
	"net/url"
	"time"

	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
)

// instanceRows are the rows of an instances table, of one workflow's
// page (Workflow set: no workflow column) or of all workflows.
type instanceRows struct {
	Rows     []instanceRow
	Workflow string
}

var funcs = template.FuncMap{
	"rows": func(rows []instanceRow, workflow string) instanceRows {
		return instanceRows{Rows: rows, Workflow: workflow}
	},
	"iso": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	},
	// human is a time as the page shows it before its script makes it
	// local and relative.
	"human": func(t time.Time) string {
		if t.IsZero() {
			return "unknown"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"stateOf":      stateString,
	"description":  func(w *workflow.Workflow) string { return description(w.Machine) },
	"workflowLink": func(w string) string { return Prefix + "/" + url.PathEscape(w) },
	"instanceLink": func(w, h string) string { return Link(Prefix, w, h) },
	"toolLabel":    toolLabel,
}

// toolLabel says what made an audit entry that no tool call made.
func toolLabel(tool string) string {
	switch tool {
	case "(timer)":
		return "(timer fired)"
	case store.ResetTool:
		return "(operator reset)"
	case workflow.SendTool:
		return "(sent from Go)"
	case "(migration)":
		return "(machine changed)"
	}
	return tool
}
