package gate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/upstream"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
)

// deploy gates upstream tools: write_file (fs) moves draft to written,
// and its failure sends WRITE_FAILED; run_tests (ci) branches on its
// output; read_file (fs) is listed in draft and written; misc exposes
// its tools always; fs/delete_file is named by nobody.
const deploy = `{
  "id": "deploy",
  "meta": { "handleKey": "deploy_id" },
  "initial": "draft",
  "context": { "written": null, "error": null },
  "states": {
    "draft": {
      "meta": { "tools": ["fs/read_file"] },
      "on": {
        "WRITE": { "target": "written", "actions": "keepOutput",
          "meta": { "tool": { "upstream": "fs/write_file", "onError": "WRITE_FAILED" } } },
        "WRITE_FAILED": { "actions": "keepError" }
      }
    },
    "written": {
      "meta": { "tools": ["fs/read_file"] },
      "on": {
        "TEST": [
          { "guard": "passed", "target": "green", "meta": { "tool": { "upstream": "ci/run_tests" } } },
          { "target": "red" }
        ]
      }
    },
    "green": { "type": "final" },
    "red": { "type": "final" }
  }
}`

func deployWorkflow(t testing.TB) *workflow.Workflow {
	t.Helper()
	reg := xstate.NewRegistry().
		Assign("keepOutput", func(a interp.Args, _ any) (map[string]any, error) {
			return map[string]any{"written": a.Event.Data["output"]}, nil
		}).
		Assign("keepError", func(a interp.Args, _ any) (map[string]any, error) {
			return map[string]any{"error": a.Event.Data["error"]}, nil
		}).
		Guard("passed", func(a interp.Args, _ any) (bool, error) {
			out, _ := a.Event.Data["output"].(map[string]any)
			return out["passed"] == true, nil
		})
	m, _, err := (&xstate.Loader{Registry: reg}).Parse("deploy.json", []byte(deploy))
	if err != nil {
		t.Fatal(err)
	}
	w, err := workflow.New(m, workflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// fakeUpstreams are upstream servers in memory: they record the calls
// and answer with answer.
type fakeUpstreams struct {
	mu      sync.Mutex
	servers []upstream.ServerStatus
	calls   []string // "server/tool {args}"
	answer  func(ctx context.Context, server string, req mcp.CallToolRequest) (*mcp.CallToolResult, error)
	subs    []func()
}

func (f *fakeUpstreams) Subscribe(fn func()) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs = append(f.subs, fn)
	return func() {}
}

// changed tells the subscribers that the servers' tools changed.
func (f *fakeUpstreams) changed() {
	f.mu.Lock()
	subs := slices.Clone(f.subs)
	f.mu.Unlock()
	for _, fn := range subs {
		fn()
	}
}

func (f *fakeUpstreams) Servers() []upstream.ServerStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]upstream.ServerStatus(nil), f.servers...)
}

func (f *fakeUpstreams) Call(ctx context.Context, server string, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	f.mu.Lock()
	f.calls = append(f.calls, fmt.Sprintf("%s/%s %v", server, req.Params.Name, req.Params.Arguments))
	answer := f.answer
	f.mu.Unlock()
	return answer(ctx, server, req)
}

func (f *fakeUpstreams) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func newFakeUpstreams() *fakeUpstreams {
	writeFile := mcp.NewTool("write_file", mcp.WithDescription("Write a file."),
		mcp.WithString("path", mcp.Required()), mcp.WithString("content"))
	// An output schema that forbids anything else, as the official
	// filesystem server's.
	writeFile.RawOutputSchema = []byte(`{"type":"object","properties":{"bytes":{"type":"number"}},"required":["bytes"],"additionalProperties":false}`)
	return &fakeUpstreams{
		servers: []upstream.ServerStatus{
			{Name: "ci", Up: true, Tools: []mcp.Tool{mcp.NewTool("run_tests", mcp.WithDescription("Run the tests."))}},
			{Name: "fs", Up: true, Tools: []mcp.Tool{
				mcp.NewTool("read_file", mcp.WithDescription("Read a file."), mcp.WithString("path", mcp.Required())),
				writeFile,
				mcp.NewTool("delete_file", mcp.WithDescription("Delete a file."), mcp.WithString("path")),
			}},
			{Name: "misc", Up: true, Expose: "always", Tools: []mcp.Tool{mcp.NewTool("ping", mcp.WithDescription("Ping."))}},
		},
		answer: func(ctx context.Context, server string, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			switch req.Params.Name {
			case "write_file":
				return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("wrote 5 bytes")}, StructuredContent: map[string]any{"bytes": 5.0}}, nil
			case "run_tests":
				return mcp.NewToolResultStructuredOnly(map[string]any{"passed": req.GetBool("pass", false)}), nil
			}
			return mcp.NewToolResultText(server + " " + req.Params.Name), nil
		},
	}
}

// upstreamGate serves deploy over HTTP with the fake upstreams.
func upstreamGate(t *testing.T, st store.Store, up gate.Upstreams) (*mcptest.Client, *gate.Gate) {
	t.Helper()
	return upstreamGateLogged(t, st, up, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func upstreamGateLogged(t *testing.T, st store.Store, up gate.Upstreams, log *slog.Logger) (*mcptest.Client, *gate.Gate) {
	t.Helper()
	g := gate.New(gate.Options{Store: st, Upstreams: up, Logger: log})
	if err := g.SetWorkflows([]*workflow.Workflow{deployWorkflow(t)}); err != nil {
		t.Fatal(err)
	}
	h := g.HTTPHandler(gate.HTTPOptions{})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	t.Cleanup(h.Close)
	return connect(t, ts.URL+"/mcp"), g
}

func TestUpstreamToolsListedByState(t *testing.T) {
	up := newFakeUpstreams()
	c, _ := upstreamGate(t, store.NewMemory(), up)
	tools := c.Tools()
	for _, want := range []string{"write_file", "read_file", "ping", "deploy_status"} {
		if _, ok := tools[want]; !ok {
			t.Errorf("%s not listed in draft: %v", want, mcptest.Names(tools))
		}
	}
	for _, hidden := range []string{"run_tests", "delete_file", "deploy_write", "deploy_write_failed", "deploy_test"} {
		if _, ok := tools[hidden]; ok {
			t.Errorf("%s listed in draft: %v", hidden, mcptest.Names(tools))
		}
	}
	// The upstream's definition, with the handle argument added.
	w := tools["write_file"]
	if w.Description != "Write a file." || w.InputSchema.Properties["deploy_id"] == nil || w.InputSchema.Properties["path"] == nil {
		t.Errorf("write_file as listed: %+v", w)
	}
	// A tool nobody names is refused as unknown, and not forwarded.
	if err := c.CallErr("delete_file", map[string]any{"path": "x"}); !errors.Is(err, mcp.ErrInvalidParams) {
		t.Errorf("delete_file: %v", err)
	}
	// A state tool outside its states, and a bound tool outside its
	// event's: refused, with the tools allowed now, and not forwarded.
	id := map[string]any{"deploy_id": "d1"}
	if _, sc, isErr := c.Call("run_tests", id); !isErr || sc["error"] != "FORBIDDEN" {
		t.Errorf("run_tests in draft: %v", sc)
	}
	if n := len(up.called()); n != 0 {
		t.Errorf("refused calls were forwarded: %v", up.called())
	}
	// An exposed tool passes through, whatever the state.
	if text, _, isErr := c.Call("ping", nil); isErr || text != "misc ping" {
		t.Errorf("ping: %q %v", text, isErr)
	}
}

func TestUpstreamBoundCall(t *testing.T) {
	up := newFakeUpstreams()
	st := store.NewMemory()
	c, _ := upstreamGate(t, st, up)
	// A state tool: forwarded without the handle, the instance stays.
	if text, _, isErr := c.Call("read_file", map[string]any{"deploy_id": "d1", "path": "a.txt"}); isErr || text != "fs read_file" {
		t.Fatalf("read_file: %q %v", text, isErr)
	}
	res := c.Result("write_file", map[string]any{"deploy_id": "d1", "path": "a.txt", "content": "hello"})
	if res.IsError {
		t.Fatalf("write_file: %+v", res)
	}
	if got := up.called(); len(got) != 2 || got[1] != "fs/write_file map[content:hello path:a.txt]" {
		t.Errorf("forwarded: %v", got)
	}
	// The upstream's structured content exactly (its output schema
	// forbids anything else), the note in the text and _meta.
	if sc, _ := res.StructuredContent.(map[string]any); len(sc) != 1 || sc["bytes"] != 5.0 {
		t.Errorf("structured content changed: %v", res.StructuredContent)
	}
	if text := mcptest.Text(res); !strings.Contains(text, "wrote 5 bytes") || !strings.Contains(text, "now in state written") || !strings.Contains(text, "run_tests") {
		t.Errorf("text: %q", text)
	}
	if res.Meta == nil || res.Meta.AdditionalFields["stategate/workflow"] == nil {
		t.Errorf("no _meta note: %+v", res.Meta)
	}
	c.AwaitTools("run_tests", func(ts map[string]mcp.Tool) bool { _, ok := ts["run_tests"]; return ok })
	_, sc, _ := c.Call("deploy_status", map[string]any{"deploy_id": "d1"})
	if sc["state"] != "written" || sc["context"].(map[string]any)["written"].(map[string]any)["bytes"] != 5.0 {
		t.Errorf("after write_file: %v", sc)
	}
	// Not allowed any more: refused, and the gate's answer fits the
	// output schema (no structured content of its own).
	res = c.Result("write_file", map[string]any{"deploy_id": "d1", "path": "a.txt"})
	if !res.IsError || res.StructuredContent != nil || !strings.Contains(mcptest.Text(res), "FORBIDDEN") {
		t.Errorf("write_file in written: %+v", res)
	}
	// The audit trail: the intent, then the transition that settles it.
	trail, _ := st.Audit(context.Background(), store.Key{Machine: "deploy", Handle: "d1"}, 0)
	if len(trail) != 2 || trail[0].Intent == nil || trail[0].Intent.Event != "WRITE" || trail[0].Intent.Arguments["path"] != "a.txt" ||
		trail[1].Settles != trail[0].Version || trail[1].To != "written" {
		t.Errorf("audit trail: %+v", trail)
	}
	if len(store.Unsettled(trail)) != 0 {
		t.Errorf("unsettled intents: %+v", store.Unsettled(trail))
	}
	// The machine branches on the output.
	if res := c.Result("run_tests", map[string]any{"deploy_id": "d1", "pass": true}); res.IsError {
		t.Fatalf("run_tests: %+v", res)
	}
	if _, sc, _ := c.Call("deploy_status", map[string]any{"deploy_id": "d1"}); sc["state"] != "green" {
		t.Errorf("after passing tests: %v", sc)
	}
	c.Call("write_file", map[string]any{"deploy_id": "d2", "path": "b"})
	c.Call("run_tests", map[string]any{"deploy_id": "d2", "pass": false})
	if _, sc, _ := c.Call("deploy_status", map[string]any{"deploy_id": "d2"}); sc["state"] != "red" {
		t.Errorf("after failing tests: %v", sc)
	}
}

func TestUpstreamFailures(t *testing.T) {
	up := newFakeUpstreams()
	st := store.NewMemory()
	c, _ := upstreamGate(t, st, up)
	id := map[string]any{"deploy_id": "d1", "path": "a"}
	for _, tc := range []struct {
		name string
		err  error
		res  *mcp.CallToolResult
		code string
	}{
		{"an error result", nil, mcp.NewToolResultError("disk full"), ""},
		{"the server down", fmt.Errorf("%w: fs is restarting", upstream.ErrUnavailable), nil, "UPSTREAM_UNAVAILABLE"},
		{"a timeout", fmt.Errorf("%w: fs took 60s", upstream.ErrTimeout), nil, "UPSTREAM_TIMEOUT"},
		{"a JSON-RPC error", errors.New("invalid params"), nil, "UPSTREAM_ERROR"},
	} {
		up.mu.Lock()
		up.answer = func(context.Context, string, mcp.CallToolRequest) (*mcp.CallToolResult, error) { return tc.res, tc.err }
		up.mu.Unlock()
		res := c.Result("write_file", id)
		if !res.IsError || (tc.code != "" && !strings.Contains(mcptest.Text(res), tc.code)) {
			t.Errorf("%s: %+v", tc.name, res)
		}
		if tc.code != "" && res.StructuredContent != nil {
			t.Errorf("%s: the gate's answer does not fit the output schema: %v", tc.name, res.StructuredContent)
		}
		// The error event was sent, with why: the machine stays in draft.
		_, sc, _ := c.Call("deploy_status", map[string]any{"deploy_id": "d1"})
		if sc["state"] != "draft" || sc["context"].(map[string]any)["error"] == nil {
			t.Errorf("%s: after the failure: %v", tc.name, sc)
		}
	}
	trail, _ := st.Audit(context.Background(), store.Key{Machine: "deploy", Handle: "d1"}, 0)
	if len(store.Unsettled(trail)) != 0 || len(trail) != 8 {
		t.Errorf("audit trail (%d entries), unsettled %+v", len(trail), store.Unsettled(trail))
	}
}

// TestUpstreamInDoubt: a call whose server never answered (the process
// that forwarded it is gone) is in doubt for the next process.
func TestUpstreamInDoubt(t *testing.T) {
	st := store.NewMemory()
	up := newFakeUpstreams()
	forwarded, hang := make(chan struct{}), make(chan struct{})
	defer close(hang)
	up.answer = func(ctx context.Context, _ string, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		close(forwarded)
		<-hang
		return nil, errors.New("never")
	}
	c1, _ := upstreamGate(t, st, up)
	go c1.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"deploy_id": "d1", "path": "a", "content": "x"}}})
	<-forwarded
	// The same process: a call under way is not in doubt.
	if _, sc, _ := c1.Call("deploy_status", map[string]any{"deploy_id": "d1"}); sc["inDoubt"] != nil {
		t.Errorf("a call under way shown in doubt: %v", sc["inDoubt"])
	}
	// Another process on the store: in doubt, with the call's arguments.
	c2, _ := upstreamGate(t, st, newFakeUpstreams())
	res := c2.Result("deploy_status", map[string]any{"deploy_id": "d1"})
	text, sc := mcptest.Text(res), res.StructuredContent.(map[string]any)
	doubt, _ := sc["inDoubt"].([]any)
	if len(doubt) != 1 || !strings.Contains(text, "In doubt") {
		t.Fatalf("status: %v\n%s", sc, text)
	}
	d := doubt[0].(map[string]any)
	if d["tool"] != "write_file" || d["event"] != "WRITE" || d["arguments"].(map[string]any)["path"] != "a" {
		t.Errorf("in doubt: %v", d)
	}
	if sc["state"] != "draft" {
		t.Errorf("state: %v", sc["state"])
	}
}

func TestUpstreamToolsChange(t *testing.T) {
	up := newFakeUpstreams()
	logs := &logBuffer{}
	c, g := upstreamGateLogged(t, store.NewMemory(), up, slog.New(slog.NewTextHandler(logs, nil)))
	c.Tools()
	c.Drain()
	// The servers told of a change that changed nothing: nobody is told.
	up.changed()
	c.NoChange()
	up.mu.Lock()
	up.servers[2].Tools = append(up.servers[2].Tools, mcp.NewTool("pong", mcp.WithDescription("Pong.")))
	up.mu.Unlock()
	up.changed()
	c.AwaitChanged()
	if _, ok := c.Tools()["pong"]; !ok {
		t.Errorf("pong not listed after the change: %v", mcptest.Names(c.Tools()))
	}
	// An exposed tool named as a workflow's is dropped and said: the
	// workflows and the other upstream tools go on changing.
	up.mu.Lock()
	up.servers[2].Tools = append(up.servers[2].Tools, mcp.NewTool("deploy_status"), mcp.NewTool("zap", mcp.WithDescription("Zap.")))
	up.mu.Unlock()
	up.changed()
	c.AwaitTools("zap, beside the clash", func(tools map[string]mcp.Tool) bool { _, ok := tools["zap"]; return ok })
	if err := g.SetWorkflows([]*workflow.Workflow{deployWorkflow(t)}); err != nil {
		t.Errorf("a reload beside the clash: %v", err)
	}
	if st := c.Tools()["deploy_status"]; !strings.Contains(st.Description, "deploy workflow") {
		t.Errorf("deploy_status is not the workflow's: %q", st.Description)
	}
	if n := logs.count("an exposed upstream tool is not served", "deploy_status", "misc", "deploy"); n != 1 {
		t.Errorf("the clash was logged %d times, want once:\n%s", n, logs)
	}
}

// TestUpstreamToolsModern: a client of revision 2026-07-28 sees every
// upstream tool the workflow names, whatever the state, and its calls are
// gated and forwarded as a session's are.
func TestUpstreamToolsModern(t *testing.T) {
	up := newFakeUpstreams()
	g := gate.New(gate.Options{Store: store.NewMemory(), Upstreams: up, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := g.SetWorkflows([]*workflow.Workflow{deployWorkflow(t)}); err != nil {
		t.Fatal(err)
	}
	h := g.HTTPHandler(gate.HTTPOptions{})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	t.Cleanup(h.Close)
	c := modernHTTP(t, ts.URL+"/mcp")
	tools := c.Tools()
	for name, when := range map[string]string{"write_file": "in draft", "run_tests": "in written", "read_file": "in draft or written", "ping": ""} {
		tool, ok := tools[name]
		if !ok || !strings.Contains(tool.Description, when) {
			t.Errorf("%s as listed: %+v", name, tool)
		}
	}
	if _, sc, isErr := c.Call("run_tests", map[string]any{"deploy_id": "m1"}); !isErr || sc["error"] != "FORBIDDEN" {
		t.Errorf("run_tests in draft: %v", sc)
	}
	if res := c.Result("write_file", map[string]any{"deploy_id": "m1", "path": "a"}); res.IsError {
		t.Fatalf("write_file: %+v", res)
	}
	if got := up.called(); len(got) != 1 || got[0] != "fs/write_file map[path:a]" {
		t.Errorf("forwarded: %v", got)
	}
	if _, sc, _ := c.Call("deploy_status", map[string]any{"deploy_id": "m1"}); sc["state"] != "written" {
		t.Errorf("after write_file: %v", sc)
	}
}

// TestUpstreamModernHandleNotForwarded: for a workflow with no handle key,
// a client of revision 2026-07-28 names its instance with workflow_id,
// which the upstream never sees.
func TestUpstreamModernHandleNotForwarded(t *testing.T) {
	up := newFakeUpstreams()
	up.answer = func(_ context.Context, _ string, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		data, _ := json.Marshal(req.Params) // as mcp-go's client would send it
		return mcp.NewToolResultText(string(data)), nil
	}
	m, _, err := (&xstate.Loader{}).Parse("docs.json", []byte(`{"id":"docs","initial":"open","meta":{"tools":["fs/read_file"]},"states":{"open":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	w, err := workflow.New(m, workflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := gate.New(gate.Options{Store: store.NewMemory(), Upstreams: up, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := g.SetWorkflows([]*workflow.Workflow{w}); err != nil {
		t.Fatal(err)
	}
	h := g.HTTPHandler(gate.HTTPOptions{})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	t.Cleanup(h.Close)
	c := modernHTTP(t, ts.URL+"/mcp")
	_, sc, _ := c.Call("docs_start", nil)
	text, _, isErr := c.Call("read_file", map[string]any{"workflow_id": sc["handle"], "path": "a.txt"})
	if isErr || !strings.Contains(text, `"path":"a.txt"`) || strings.Contains(text, "workflow_id") {
		t.Errorf("forwarded: %v %s", isErr, text)
	}
}

// TestUpstreamOutputTooLargeIsSettled: an upstream's success whose output
// is too large or too deep to record (as the arguments of a call would
// be) reaches the
// agent with a note; the intent is settled as not recorded, nothing is
// in doubt, and the workflow did not move. On the store on disk, whose
// limits the memory store shares.
func TestUpstreamOutputTooLargeIsSettled(t *testing.T) {
	var deep any = "bottom"
	for range 5000 {
		deep = map[string]any{"d": deep}
	}
	for name, output := range map[string]any{
		"large": map[string]any{"bytes": 5.0, "blob": strings.Repeat("x", 5<<20)},
		"deep":  map[string]any{"bytes": 5.0, "tree": deep},
	} {
		t.Run(name, func(t *testing.T) {
			up := newFakeUpstreams()
			up.answer = func(ctx context.Context, server string, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("wrote it")}, StructuredContent: output}, nil
			}
			c, _ := upstreamGate(t, openBadger(t, t.TempDir()), up)
			res := c.Result("write_file", map[string]any{"deploy_id": "big", "path": "a", "content": "x"})
			if res.IsError || !strings.Contains(mcptest.Text(res), "wrote it") || !strings.Contains(mcptest.Text(res), "did not take WRITE") {
				t.Fatalf("write_file: %v %s", res.IsError, brief(mcptest.Text(res)))
			}
			_, sc, _ := c.Call("deploy_status", map[string]any{"deploy_id": "big"})
			if sc["state"] != "draft" || sc["inDoubt"] != nil {
				t.Fatalf("status: state %v, in doubt %v", sc["state"], sc["inDoubt"])
			}
			recent, _ := sc["recent"].([]any)
			last, _ := recent[len(recent)-1].(map[string]any)
			if note, _ := last["note"].(string); last["settles"] == nil || !strings.Contains(note, "not") {
				t.Fatalf("the entry that settles the intent: %v", last)
			}
		})
	}
}

// brief cuts a long text for a test's message.
func brief(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
