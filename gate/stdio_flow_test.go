package gate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
)

// signalledReader reads lines, and signals each line read (by its
// number) and the end of its input.
type signalledReader struct {
	lines []string
	mu    sync.Mutex
	read  int
	seen  map[int]chan struct{}
}

func newSignalledReader(lines ...string) *signalledReader {
	s := &signalledReader{lines: lines, seen: map[int]chan struct{}{}}
	for i := 0; i <= len(lines); i++ {
		s.seen[i] = make(chan struct{})
	}
	return s
}

// Read hands out one line per call, then io.EOF; it closes seen[n] once
// n lines were handed out (seen[len] at the end of the input).
func (s *signalledReader) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.read == len(s.lines) {
		return 0, io.EOF
	}
	n := copy(p, s.lines[s.read]+"\n")
	s.read++
	close(s.seen[s.read])
	return n, nil
}

// stdioInvoice serves, over stdio in process, an invoice whose SUBMIT
// action waits for a signal.
func stdioInvoice(t *testing.T, submitWaits <-chan struct{}) *gate.Gate {
	t.Helper()
	reg := xstate.NewRegistry().Action("slow", func(interp.Args, any) error {
		select {
		case <-submitWaits:
		case <-time.After(mcptest.Wait):
		}
		return nil
	})
	m, _, err := (&xstate.Loader{Registry: reg}).Parse("inv.json", []byte(`{"id":"inv","initial":"draft","states":{
	  "draft":{"on":{"SUBMIT":{"target":"review","actions":"slow"}}},
	  "review":{"on":{"APPROVE":"approved"}},
	  "approved":{"type":"final"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	w, err := workflow.New(m, workflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := gate.New(gate.Options{Logger: quietLog(), SharedInstance: gate.DefaultInstance})
	if err := g.SetWorkflows([]*workflow.Workflow{w}); err != nil {
		t.Fatal(err)
	}
	return g
}

const (
	stdioInit        = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	stdioInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

func call(id int, tool string) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": map[string]any{}}})
	return string(b)
}

// answers reads ServeStdio's output: the results by request id.
func answers(t *testing.T, out []byte) map[float64]map[string]any {
	t.Helper()
	got := map[float64]map[string]any{}
	for _, l := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("not JSON: %s", l)
		}
		if id, ok := m["id"].(float64); ok {
			res, _ := m["result"].(map[string]any)
			got[id] = res
		}
	}
	return got
}

func resultState(res map[string]any) string {
	sc, _ := res["structuredContent"].(map[string]any)
	s, _ := sc["state"].(string)
	return s
}

// TestStdioEOFAnswersWhatCame: closing the input ends the server only
// once every request read before is answered, not cancelled.
func TestStdioEOFAnswersWhatCame(t *testing.T) {
	in := newSignalledReader(stdioInit, stdioInitialized, call(2, "inv_submit"))
	g := stdioInvoice(t, in.seen[3]) // SUBMIT's action waits for the end of the input
	var out bytes.Buffer
	if err := g.ServeStdio(context.Background(), in, &out); err != nil {
		t.Fatal(err)
	}
	res := answers(t, out.Bytes())[2]
	if res == nil || res["isError"] == true || resultState(res) != "review" {
		t.Fatalf("the call in flight at the end of the input: %v\n%s", res, out.String())
	}
}

// TestStdioKeepsArrivalOrderPerInstance: a call pipelined behind another
// on the same instance waits for it: submit then approve both succeed,
// though approve arrives while submit is still running.
func TestStdioKeepsArrivalOrderPerInstance(t *testing.T) {
	in := newSignalledReader(stdioInit, stdioInitialized, call(2, "inv_submit"), call(3, "inv_approve"), call(4, "inv_status"))
	g := stdioInvoice(t, in.seen[5]) // SUBMIT runs until every line was read
	var out bytes.Buffer
	if err := g.ServeStdio(context.Background(), in, &out); err != nil {
		t.Fatal(err)
	}
	got := answers(t, out.Bytes())
	if s := resultState(got[2]); s != "review" {
		t.Errorf("submit: %v", got[2])
	}
	if s := resultState(got[3]); s != "approved" || got[3]["isError"] == true {
		t.Errorf("approve, pipelined behind submit: %v", got[3])
	}
	if s := resultState(got[4]); s != "approved" {
		t.Errorf("status, behind both: %v", got[4])
	}
	if !strings.Contains(out.String(), `"id":4`) {
		t.Errorf("no answer to status:\n%s", out.String())
	}
}

// TestStdioUnknownTool: over stdio too, a call to a tool nobody serves is
// MCP's -32602, with the tools available now as its data.
func TestStdioUnknownTool(t *testing.T) {
	in := newSignalledReader(stdioInit, stdioInitialized, call(2, "inv_sbmit"))
	g := stdioInvoice(t, nil)
	var out bytes.Buffer
	if err := g.ServeStdio(context.Background(), in, &out); err != nil {
		t.Fatal(err)
	}
	var msg struct {
		ID    float64 `json:"id"`
		Error struct {
			Code int `json:"code"`
			Data struct {
				Tool    string   `json:"tool"`
				Allowed []string `json:"allowed"`
			} `json:"data"`
		} `json:"error"`
	}
	// The answers come in the order mcp-go finishes them.
	var line []byte
	for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		if bytes.Contains(l, []byte(`"id":2`)) {
			line = l
		}
	}
	if err := json.Unmarshal(line, &msg); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	if msg.ID != 2 || msg.Error.Code != -32602 || msg.Error.Data.Tool != "inv_sbmit" || strings.Join(msg.Error.Data.Allowed, ",") != "inv_status,inv_submit" {
		t.Errorf("unknown tool over stdio: %s", line)
	}
}
