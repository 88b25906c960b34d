package gate

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
)

// The answers of the gate's tools: the state an instance is in now and the
// tools it allows (report), and the refusals and errors, each with a word
// an agent can act on (FORBIDDEN, REJECTED, INVALID_ARGUMENTS, ...) in its
// text and its structured content.

// saveFailed answers a call whose new state could not be stored, saying
// what the agent may do: the instance keeps its state (snap), except when
// the store cannot tell (ErrOutcomeUnknown), and an instance over its
// workflow's limits (workflow.ErrLimit) is not created (snap may be nil).
func saveFailed(tool string, snap *interp.Snapshot, err error) *mcp.CallToolResult {
	if errors.Is(err, workflow.ErrLimit) {
		// Only an instance's first save is limited.
		return errorResult("LIMIT", fmt.Sprintf("LIMIT: %s was not done: %v. No instance was created", tool, err), nil)
	}
	if res := retryable(tool, err); res != nil {
		return res // nothing was written (replicas.go)
	}
	code, text := "ERROR", fmt.Sprintf("ERROR: %s was not done: the new state cannot be stored (%v); the instance keeps its state %s", tool, err, workflow.StateString(snap))
	switch {
	case errors.Is(err, store.ErrOutcomeUnknown):
		code, text = "OUTCOME_UNKNOWN", fmt.Sprintf("OUTCOME_UNKNOWN: the store failed while saving %s, so whether it was done is unknown (%v). The server takes no more changes until it is restarted; then the status tool tells where the instance is", tool, err)
	case errors.Is(err, store.ErrDiskFailed):
		text = fmt.Sprintf("ERROR: %s was not done: the store failed earlier and takes no more changes until the server is restarted; the instance keeps its state %s", tool, workflow.StateString(snap))
	case errors.Is(err, store.ErrNoSpace):
		code, text = "NO_SPACE", fmt.Sprintf("NO_SPACE: %s was not done: the server's disk is nearly full; the instance keeps its state %s. Try again once space is freed", tool, workflow.StateString(snap))
	case errors.Is(err, store.ErrTooLarge):
		code, text = "TOO_LARGE", fmt.Sprintf("TOO_LARGE: %s was not done: the instance's new state would be too large to store (%v); the instance keeps its state %s", tool, err, workflow.StateString(snap))
	}
	return errorResult(code, text, map[string]any{"state": snap.Value()})
}

func textResult(text string, structured any, isError bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Content:           []mcp.Content{mcp.NewTextContent(text)},
		StructuredContent: structured,
		IsError:           isError,
	}
}

// maxErrorText bounds the text of an error result, and each string of its
// structured content: an error that quotes a huge value (a key, an
// argument) does not flood the agent's context.
const maxErrorText = 1024

// brief cuts s to maxErrorText bytes (on a rune boundary), saying how much
// was left out.
func brief(s string) string {
	if len(s) <= maxErrorText {
		return s
	}
	cut := maxErrorText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes more)", s[:cut], len(s)-cut)
}

func errorResult(code, text string, structured map[string]any) *mcp.CallToolResult {
	if structured == nil {
		structured = map[string]any{}
	}
	text = brief(text)
	for k, v := range structured {
		if str, ok := v.(string); ok {
			structured[k] = brief(str)
		}
	}
	if _, ok := structured["error"]; !ok {
		structured["error"] = code
	}
	return textResult(text, structured, true)
}

// refusal is a FORBIDDEN or REJECTED result: it names the state and the
// tools allowed now, and the machine does not move.
func refusal(code, why string, m *workflow.Workflow, handle string, v view) *mcp.CallToolResult {
	text := fmt.Sprintf("%s: %s. Allowed now: %s.", code, why, joinTools(v.tools))
	var state any
	if !v.notStarted {
		state = v.snap.Value()
	}
	return textResult(text, map[string]any{
		"error": code, "machine": m.ID, "handle": handle, "state": state, "allowed": v.tools,
	}, true)
}

// notAvailable says why a tool is not available to an instance's view:
// its state, or that it is not started.
func notAvailable(tool string, m *workflow.Workflow, v view) string {
	if v.notStarted {
		return fmt.Sprintf("%s is not available: the %s workflow is not started; it starts with its input, given to %s", tool, m.ID, m.StartTool)
	}
	return fmt.Sprintf("%s is not available in state %s", tool, workflow.StateString(v.snap))
}

// success reports an instance after a call moved it: its state, status,
// context, output when done, and the tools it allows now.
func success(m *workflow.Workflow, handle string, v view, emitted []map[string]any) *mcp.CallToolResult {
	return report(m, handle, v, emitted, "is now")
}

// report reports an instance; verb says whether it moved ("is now") or is
// only read ("is").
func report(m *workflow.Workflow, handle string, v view, emitted []map[string]any, verb string) *mcp.CallToolResult {
	if v.notStarted {
		sc := map[string]any{"machine": m.ID, "handle": handle, "state": nil, "status": "not started", "tools": v.tools, "input": m.Input}
		text := fmt.Sprintf("%s %s %s not started: it starts with its input (%s takes it). Tools available now: %s.", m.ID, handle, verb, m.StartTool, joinTools(v.tools))
		return textResult(text, sc, false)
	}
	s := v.snap
	sc := map[string]any{
		"machine": m.ID, "handle": handle, "state": s.Value(), "status": s.Status.String(),
		"context": s.Context, "tools": v.tools,
	}
	if s.Status == interp.StatusDone {
		sc["output"] = s.Output()
	}
	if s.Status == interp.StatusError && s.Err() != nil {
		sc["error"] = s.Err().Error()
	}
	if len(emitted) > 0 {
		sc["emitted"] = emitted
	}
	desc, tags := stateWords(s)
	if desc != "" {
		sc["description"] = desc
	}
	if len(tags) > 0 {
		sc["tags"] = tags
	}
	return textResult(whereNow(m, handle, v, verb), sc, false)
}

// whereNow says where an instance is and what it allows: the sentence of
// every answer that moved or read one (event tools, bound tools, status).
func whereNow(m *workflow.Workflow, handle string, v view, verb string) string {
	s := v.snap
	text := fmt.Sprintf("%s %s %s in state %s (%s)", m.ID, handle, verb, workflow.StateString(s), s.Status)
	if desc, _ := stateWords(s); desc != "" {
		text += ": " + desc
	}
	text += fmt.Sprintf(". Tools available now: %s.", joinTools(v.tools))
	if s.Status == interp.StatusDone {
		if out := s.Output(); out != nil {
			b, _ := json.Marshal(out)
			text += " Output: " + string(b) + "."
		}
	}
	return text
}

// stateWords are what a machine says of the states an instance is in:
// the descriptions of its active states (innermost first, each once) and
// their tags.
func stateWords(s *interp.Snapshot) (description string, tags []string) {
	var descs []string
	nodes := s.Nodes()
	for i := len(nodes) - 1; i >= 0; i-- {
		if d := strings.TrimSpace(nodes[i].Description); d != "" && !slices.Contains(descs, d) {
			descs = append(descs, strings.TrimSuffix(d, "."))
		}
	}
	return strings.Join(descs, "; "), s.Tags()
}
