package gate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stategate/stategate/internal/mcptest"
)

// ledgerMachine binds POST to bank/effect, an upstream tool that pays
// (writes its file) and then kills stategate before it answers. JSON
// only: the binary serves it.
const ledgerMachine = `{
  "id": "ledger",
  "meta": { "handleKey": "ledger_id" },
  "initial": "open",
  "states": {
    "open": { "on": { "POST": { "target": "posted", "meta": { "tool": { "upstream": "bank/effect" } } } } },
    "posted": { "type": "final" }
  }
}`

// TestUpstreamInDoubtAfterKill runs the stategate binary with an
// upstream (the test binary over stdio) whose tool does its side effect
// and then SIGKILLs stategate, between the forward and the save of the
// new state. Restarted on the same store, the status tool shows the call
// in doubt (tool, arguments, time) and the machine where it was; `state
// show` shows it too, after the kill and after a clean stop.
func TestUpstreamInDoubtAfterKill(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	machines := filepath.Join(dir, "machines")
	if err := os.Mkdir(machines, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(machines, "ledger.json"), []byte(ledgerMachine), 0o644); err != nil {
		t.Fatal(err)
	}
	ups := filepath.Join(dir, "upstreams.json")
	writeUpstreams(t, ups, map[string]map[string]any{"bank": stdioEntry(t, "kill")})
	data := filepath.Join(dir, "data")
	paid := filepath.Join(dir, "paid")

	addr := freePort(t)
	srv, err := startServer(t, bin, machines, data, addr, "--upstreams", ups)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.kill()
	c := connect(t, "http://"+addr+"/mcp")
	if tl, ok := c.Tools()["effect"]; !ok || tl.Description != "Pays, then kills stategate before it answers." {
		t.Fatalf("effect as listed: %+v (%v)\n%s", tl, ok, srv.stderr)
	}
	began := time.Now()
	req := mcp.CallToolRequest{}
	req.Params.Name = "effect"
	req.Params.Arguments = map[string]any{"ledger_id": "L1", "path": paid, "amount": 7}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if res, err := c.CallTool(ctx, req); err == nil {
		t.Fatalf("effect answered: %+v", res)
	}
	select {
	case <-srv.exited:
	case <-time.After(time.Minute):
		t.Fatal("stategate was not killed")
	}
	ended := time.Now()
	if got, err := os.ReadFile(paid); err != nil || string(got) != "7" {
		t.Fatalf("the side effect: %q %v", got, err)
	}

	// `state show` reads the killed server's store (from a scratch copy).
	checkShow := func(when string) {
		t.Helper()
		cmd := exec.Command(bin, "state", "show", "--data", data, "ledger", "L1")
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("state show %s: %v\n%s", when, err, errOut.String())
		}
		var shown struct {
			Snapshot struct {
				Value any `json:"value"`
			} `json:"snapshot"`
			InDoubt []map[string]any `json:"inDoubt"`
		}
		if err := json.Unmarshal(out.Bytes(), &shown); err != nil {
			t.Fatalf("state show %s: %v\n%s", when, err, out.String())
		}
		if shown.Snapshot.Value != "open" || len(shown.InDoubt) != 1 {
			t.Fatalf("state show %s: %s", when, out.String())
		}
		checkDoubt(t, "state show "+when, shown.InDoubt[0], paid, began, ended)
	}
	checkShow("after the kill")

	// Restarted on the same store: in doubt, and the machine did not move.
	addr2 := freePort(t)
	srv2, err := startServer(t, bin, machines, data, addr2, "--upstreams", ups)
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.kill()
	c2 := connect(t, "http://"+addr2+"/mcp")
	res := c2.Result("ledger_status", map[string]any{"ledger_id": "L1"})
	sc := structured(res)
	doubt, _ := sc["inDoubt"].([]any)
	if res.IsError || sc["state"] != "open" || len(doubt) != 1 || !strings.Contains(mcptest.Text(res), "In doubt: 1 call(s)") {
		t.Fatalf("status after the restart: %v\n%s", sc, mcptest.Text(res))
	}
	d, _ := doubt[0].(map[string]any)
	checkDoubt(t, "the status tool", d, paid, began, ended)
	if _, ok := c2.Tools()["effect"]; !ok {
		t.Error("effect not listed after the restart: the machine moved")
	}
	c2.Close()
	srv2.stop()
	checkShow("after a clean stop")
}

// checkDoubt checks an in-doubt call as the status tool and `state show`
// list it: the tool, its arguments (without the handle), its event, and a
// time within the call.
func checkDoubt(t *testing.T, where string, d map[string]any, paid string, began, ended time.Time) {
	t.Helper()
	args, _ := d["arguments"].(map[string]any)
	if d["tool"] != "effect" || d["event"] != "POST" || args["path"] != paid || args["amount"] != 7.0 || args["ledger_id"] != nil {
		t.Errorf("%s: in doubt %v", where, d)
	}
	at, err := time.Parse(time.RFC3339Nano, fmtString(d["time"]))
	if err != nil || at.Before(began.Add(-time.Second)) || at.After(ended.Add(time.Second)) {
		t.Errorf("%s: in doubt at %v (%v), the call was between %v and %v", where, d["time"], err, began, ended)
	}
}

func fmtString(v any) string {
	s, _ := v.(string)
	return s
}
