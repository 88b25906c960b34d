package gate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"stategate/gate"
	"stategate/xstate"
)

func writeMachine(t *testing.T, name, src string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestBuiltinsYieldToEvents(t *testing.T) {
	f := writeMachine(t, "game.json", `{"id":"game","initial":"on","states":{"on":{"on":{"RESET":"on","STATUS":"on","Jump!":"on"}}}}`)
	m, _, err := gate.LoadMachine(&xstate.Loader{}, f, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range m.Tools {
		names = append(names, tl.Name)
	}
	if got := strings.Join(names, ","); got != "game_jump_,game_reset,game_status" {
		t.Fatalf("event tools %s", got)
	}
	if m.StatusTool != "game__status" || m.ResetTool != "game__reset" {
		t.Fatalf("built-ins %s %s", m.StatusTool, m.ResetTool)
	}
}

func TestToolNameClash(t *testing.T) {
	f := writeMachine(t, "m.json", `{"id":"m","initial":"a","states":{"a":{"on":{"A_B":"a","A-B":{"target":"a","meta":{"tool":{"name":"m_a_b"}}}}}}}`)
	_, _, err := gate.LoadMachine(&xstate.Loader{}, f, "")
	if err == nil || !strings.Contains(err.Error(), `"A-B"`) || !strings.Contains(err.Error(), `"A_B"`) {
		t.Fatalf("err = %v, want a clash naming both events", err)
	}
}

func TestMissingGuardIsRefused(t *testing.T) {
	f := writeMachine(t, "m.json", `{"id":"m","initial":"a","states":{"a":{"on":{"GO":{"guard":"ready","target":"a"}}}}}`)
	_, _, err := gate.LoadMachine(&xstate.Loader{}, f, "")
	if err == nil || !strings.Contains(err.Error(), `guard "ready" has no implementation`) {
		t.Fatalf("err = %v", err)
	}
}

func TestScriptErrorKeepsTheSnapshot(t *testing.T) {
	url, _ := setupWith(t, map[string]string{"fragile.mjs": `import { createMachine, assign } from 'xstate';
export default createMachine({ id: 'fragile', initial: 'a', context: { n: 0 }, states: {
  a: { on: { BUMP: { actions: assign({ n: ({ context }) => context.n + 1 }) },
             BREAK: { target: 'b', actions: () => { throw new Error('disk on fire'); } } } },
  b: {} } });`})
	c := connect(t, url)
	c.call("fragile_bump", nil)
	text, sc, isErr := c.call("fragile_break", nil)
	if !isErr || !strings.Contains(text, "disk on fire") || sc["error"] != "ERROR" {
		t.Fatalf("break: %v %q %v", isErr, text, sc)
	}
	_, sc, _ = c.call("fragile_status", nil)
	if sc["state"] != "a" || sc["status"] != "active" || sc["context"].(map[string]any)["n"] != 1.0 {
		t.Fatalf("after a failed call: %v", sc)
	}
}
