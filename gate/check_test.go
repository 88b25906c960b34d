package gate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
	"github.com/stategate/stategate/xstate/js"
)

// TestCheck checks folders as a server would serve them: each case is a
// folder's files (oldest first), and what check says of each.
func TestCheck(t *testing.T) {
	const lamp = `{"id":"lamp","initial":"off","states":{"off":{"on":{"ON":"off"}}}}`
	const noID = `{"initial":"x","states":{"x":{}}}`
	const pay = `{"id":"a","initial":"x","states":{"x":{"on":{
		"PAY":{"meta":{"tool":{"inputSchema":{"properties":{"amount":{"type":"number"}},"required":["amount"]}}}}}}}}`
	tests := []struct {
		name      string
		handleKey string      // check's --handle-key
		files     [][2]string // name, content; oldest first
		want      map[string]string
	}{{
		name:  "a newer copy of a machine",
		files: [][2]string{{"lamp.json", lamp}, {"a-copy.json", lamp}},
		want:  map[string]string{"lamp.json": "ok", "a-copy.json": `machine id "lamp" is also the id of the machine of lamp.json (older)`},
	}, {
		name: "a copy of a JSON machine without its implementations",
		files: [][2]string{{"inv.json", `{"id":"inv","initial":"x","states":{"x":{"on":{"GO":{"guard":"ready","target":"x"}}}}}`},
			{"inv.impl.ts", `export default { guards: { ready: () => true } };`},
			{"inv-copy.json", `{"id":"inv","initial":"x","states":{"x":{"on":{"GO":{"guard":"ready","target":"x"}}}}}`}},
		want: map[string]string{"inv.json": "ok", "inv-copy.json": `machine id "inv" is also the id of the machine of inv.json (older): a server serves that one; a copy of a machine file needs an id of its own (and, for a JSON machine, its implementations beside it, as inv-copy.impl.ts)`},
	}, {
		name:  "machines without ids take their file names",
		files: [][2]string{{"a.json", noID}, {"b.json", noID}},
		want:  map[string]string{"a.json": "ok", "b.json": "ok"},
	}, {
		name:  "one file name in two folders",
		files: [][2]string{{"m.json", noID}, {"sub/m.json", noID}},
		want:  map[string]string{"m.json": "ok", "sub/m.json": `machine id "m" is also the id of the machine of m.json (older)`},
	}, {
		name: "two events make one tool",
		files: [][2]string{{"a.json", `{"id":"a","initial":"x","states":{"x":{"on":{
			"GO":{"meta":{"tool":{"name":"go"}}},"STOP":{"meta":{"tool":{"name":"go"}}}}}}}`}},
		want: map[string]string{"a.json": `events "GO" and "STOP" both make a tool named "go"`},
	}, {
		name: "a tool of another machine's name",
		files: [][2]string{{"a.json", `{"id":"a","initial":"x","states":{"x":{"on":{"GO":{}}}}}`},
			{"b.json", `{"id":"b","initial":"x","states":{"x":{"on":{"GO":{"meta":{"tool":{"name":"a_go"}}}}}}}`}},
		want: map[string]string{"a.json": "ok", "b.json": "tool a_go is also a tool of the machine of a.json (older)"},
	}, {
		name: "a bad input schema",
		files: [][2]string{{"a.json", `{"id":"a","initial":"x","states":{"x":{"on":{
			"GO":{"meta":{"tool":{"inputSchema":{"type":"array"}}}}}}}}`}},
		want: map[string]string{"a.json": `tool a_go: inputSchema: the type must be "object"`},
	}, {
		name:      "a handle key that is a tool's argument",
		handleKey: "amount",
		files:     [][2]string{{"a.json", pay}},
		want:      map[string]string{"a.json": `tool a_pay: inputSchema: handle key "amount" is also a property of the tool's input schema`},
	}, {
		name:      "a handle key that is not",
		handleKey: "order_id",
		files:     [][2]string{{"a.json", pay}},
		want:      map[string]string{"a.json": "ok"},
	}, {
		name: "a machine's own handle key that a tool requires",
		files: [][2]string{{"a.json", `{"id":"a","meta":{"handleKey":"id"},"initial":"x","states":{"x":{"on":{
			"GO":{"meta":{"tool":{"inputSchema":{"required":["id"]}}}}}}}}`}},
		want: map[string]string{"a.json": `tool a_go: inputSchema: handle key "id" is also a property of the tool's input schema`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for i, f := range tt.files {
				path := filepath.Join(dir, f[0])
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(f[1]), 0o644); err != nil {
					t.Fatal(err)
				}
				at := time.Now().Add(time.Duration(i-len(tt.files)) * time.Minute)
				if err := os.Chtimes(path, at, at); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := workflow.Check(&xstate.Loader{Modules: &js.Host{}}, []string{dir}, tt.handleKey)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.ReplaceAll(strings.Join(rep.Lines(), "\n"), dir+string(filepath.Separator), "")
			if len(rep.Files) != len(tt.want) {
				t.Fatalf("report:\n%s", lines)
			}
			for _, r := range rep.Files {
				rel, _ := filepath.Rel(dir, r.File)
				want := tt.want[filepath.ToSlash(rel)]
				if want == "ok" {
					if r.Failed {
						t.Errorf("%s failed:\n%s", rel, lines)
					}
				} else if !r.Failed || !strings.Contains(lines, rel+": "+want) {
					t.Errorf("%s: want %q in:\n%s", rel, want, lines)
				}
			}
		})
	}
}
