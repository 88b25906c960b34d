package gate_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/store"
)

// malformed are messages JSON-RPC and MCP refuse, and the error code and
// id each must be answered with.
var malformed = []struct {
	name, msg string
	code      int
	id        any
}{
	{"not JSON", `{"jsonrpc":`, -32700, nil},
	{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"\xff\"}}", -32700, nil},
	{"a batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, -32600, nil},
	{"an empty batch", `[]`, -32600, nil},
	{"not an object", `"ping"`, -32600, nil},
	{"an object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600, nil},
	{"a null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, -32600, nil},
	{"a boolean id", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, -32600, nil},
	{"a number as method", `{"jsonrpc":"2.0","id":5,"method":5}`, -32600, 5.0},
	{"JSON-RPC 1.0", `{"jsonrpc":"1.0","id":"a","method":"ping"}`, -32600, "a"},
	{"no jsonrpc", `{"id":"b","method":"ping"}`, -32600, "b"},
	{"no method nor result", `{"jsonrpc":"2.0","id":3}`, -32600, 3.0},
	{"params as an array", `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":[1]}`, -32602, 4.0},
}

// TestMalformedMessages: stdio and HTTP answer malformed messages alike,
// as JSON-RPC and MCP say.
func TestMalformedMessages(t *testing.T) {
	mcpURL, _ := setup(t)
	session, _ := rawSession(t, mcpURL, "2025-06-18")
	stdio := stdioSession(t)
	for _, c := range malformed {
		t.Run(c.name, func(t *testing.T) {
			res := rawPost(t, mcpURL, session, c.msg, nil)
			if res.StatusCode != http.StatusBadRequest {
				t.Errorf("HTTP: %s, want 400", res.Status)
			}
			msgs := responseMessages(t, res)
			overStdio := stdio(c.msg)
			for name, m := range map[string]map[string]any{"HTTP": msgs[0], "stdio": overStdio} {
				e, _ := m["error"].(map[string]any)
				if e == nil || e["code"] != float64(c.code) || m["id"] != c.id {
					t.Errorf("%s answered %v, want code %d and id %v", name, m, c.code, c.id)
				}
			}
			if msgs[0]["error"].(map[string]any)["message"] != overStdio["error"].(map[string]any)["message"] {
				t.Errorf("HTTP says %v, stdio %v", msgs[0], overStdio)
			}
		})
	}
	// The session still works after all that.
	if m := stdio(`{"jsonrpc":"2.0","id":9,"method":"ping"}`); m["result"] == nil {
		t.Errorf("stdio ping after malformed messages: %v", m)
	}
}

// stdioSession serves the test machines over stdio in process, initializes
// a session, and returns a function that sends one line and reads the
// answer to it.
func stdioSession(t *testing.T) func(line string) map[string]any {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	g := gate.New(gate.Options{Store: store.NewMemory(), Logger: log, SharedInstance: gate.DefaultInstance})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { g.ServeStdio(ctx, inR, outW); close(done) }()
	t.Cleanup(func() { inW.Close(); cancel(); outR.Close(); <-done })
	out := bufio.NewScanner(outR)
	out.Buffer(nil, 1<<20)
	send := func(line string) map[string]any {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
		for out.Scan() {
			var m map[string]any
			if err := json.Unmarshal(out.Bytes(), &m); err != nil {
				t.Fatalf("stdio wrote %q: %v", out.Text(), err)
			}
			if _, isNote := m["method"]; !isNote {
				return m
			}
		}
		t.Fatalf("stdio closed: %v", out.Err())
		return nil
	}
	if m := send(strings.Replace(initBody, "%s", "2025-06-18", 1)); m["result"] == nil {
		t.Fatalf("initialize over stdio: %v", m)
	}
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	return send
}

// TestOversizedStdioLine: a line over the bound is answered with an error
// and skipped, and the next one is served.
func TestOversizedStdioLine(t *testing.T) {
	stdio := stdioSession(t)
	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", gate.DefaultMaxBody) + `"}}`
	if m := stdio(big); m["error"] == nil {
		t.Errorf("an oversized line: %v, want an error", m)
	}
	if m := stdio(`{"jsonrpc":"2.0","id":2,"method":"ping"}`); m["result"] == nil || m["id"] != 2.0 {
		t.Errorf("the line after: %v", m)
	}
}

// TestHTTPProtocolVersions: 2024-11-05 has no Streamable HTTP: a client
// asking for it gets the newest revision served, and a request naming it
// in its header is refused.
func TestHTTPProtocolVersions(t *testing.T) {
	mcpURL, _ := setup(t)
	id, v := rawSession(t, mcpURL, "2024-11-05")
	if v != "2025-11-25" {
		t.Errorf("negotiated %s for a 2024-11-05 client over HTTP, want 2025-11-25", v)
	}
	res := rawPost(t, mcpURL, id, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, map[string]string{"MCP-Protocol-Version": "2024-11-05"})
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("MCP-Protocol-Version 2024-11-05: %s, want 400", res.Status)
	}
	for _, ok := range []string{"2025-03-26", "2025-06-18", "2025-11-25"} {
		if _, v := rawSession(t, mcpURL, ok); v != ok {
			t.Errorf("negotiated %s for a %s client, want it kept", v, ok)
		}
	}
}
