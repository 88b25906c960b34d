package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// checkUpstream serves an mcp-go server over Streamable HTTP with tools
// that answer nothing of interest, and returns its URL.
func checkUpstream(t *testing.T, tools ...mcp.Tool) string {
	t.Helper()
	s := mcpserver.NewMCPServer("check-upstream", "1.0.0", mcpserver.WithToolCapabilities(true))
	for _, tl := range tools {
		s.AddTool(tl, func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("ok"), nil
		})
	}
	ts := httptest.NewServer(mcpserver.NewStreamableHTTPServer(s))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts.URL + "/mcp"
}

// TestCheckUpstreams runs `stategate check --upstreams FILE MACHINES`
// against real servers (up: write and read, which require path; pub: ping,
// exposed always): a binding to a server not in the file, to a tool the
// server lacks (an event's, a state's meta.tools), a machine tool that
// clashes with an exposed one, and an inputSchema override that drops a
// property the upstream requires or changes a type are each a FAIL line
// naming the file, and the exit status is 1; good bindings pass.
func TestCheckUpstreams(t *testing.T) {
	dir := t.TempDir()
	up := checkUpstream(t,
		mcp.NewTool("write", mcp.WithDescription("Write a file."), mcp.WithString("path", mcp.Required()), mcp.WithString("content")),
		mcp.NewTool("read", mcp.WithDescription("Read a file."), mcp.WithString("path", mcp.Required())))
	pub := checkUpstream(t, mcp.NewTool("ping", mcp.WithDescription("Ping.")))
	ups, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"up":  map[string]any{"url": up},
		"pub": map[string]any{"url": pub, "expose": "always"},
	}})
	upsFile := filepath.Join(dir, "upstreams.json")
	if err := os.WriteFile(upsFile, ups, 0o644); err != nil {
		t.Fatal(err)
	}
	machines := filepath.Join(dir, "machines")
	if err := os.Mkdir(machines, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		// Good: a state tool, a bound event, and an override that keeps
		// what the upstream requires.
		"good.json": `{"id":"good","initial":"a","states":{
  "a":{"meta":{"tools":["up/read"]},"on":{"W":{"target":"b","meta":{"tool":{"upstream":"up/write",
    "inputSchema":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path"]}}}}}},
  "b":{"type":"final"}}}`,
		"noserver.json": `{"id":"noserver","initial":"a","states":{"a":{"on":{"W":{"target":"b","meta":{"tool":{"upstream":"nope/write","name":"nw"}}}}},"b":{}}}`,
		"notool.json": `{"id":"notool","initial":"a","states":{
  "a":{"meta":{"tools":["up/list"]},"on":{"E":{"target":"b","meta":{"tool":{"upstream":"up/erase"}}}}},"b":{}}}`,
		"clash.json": `{"id":"clash","initial":"a","states":{"a":{"on":{"P":{"target":"b","meta":{"tool":{"name":"ping"}}}}},"b":{}}}`,
		"schema.json": `{"id":"schema","initial":"a","states":{"a":{"on":{"W":{"target":"b","meta":{"tool":{"upstream":"up/write","name":"write_notes",
    "inputSchema":{"type":"object","properties":{"content":{"type":"number"}}}}}}}},"b":{}}}`,
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(machines, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	stdout, stderr, code := runMain(t, "check", "--upstreams", upsFile, machines)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var fails []string
	for _, line := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(line, "FAIL ") {
			fails = append(fails, line)
		}
	}
	for _, want := range []struct{ file, text string }{
		{"noserver.json", "event W binds nope/write: there is no server nope in the upstreams file"},
		{"notool.json", "event E binds up/erase: the server up has no tool erase"},
		{"notool.json", "state a (meta.tools) binds up/list: the server up has no tool list"},
		{"clash.json", "tool ping is also a tool of the upstream server pub, which exposes its tools"},
		{"schema.json", "event W: meta.tool.inputSchema breaks up/write's: it has no property path, which the upstream requires"},
		{"schema.json", "event W: meta.tool.inputSchema breaks up/write's: property content is of type number, and the upstream's of type string"},
	} {
		found := false
		for _, line := range fails {
			if strings.Contains(line, filepath.Join(machines, want.file)+": ") && strings.HasSuffix(line, want.text) {
				found = true
			}
		}
		if !found {
			t.Errorf("no FAIL line for %s: %s\nstdout:\n%s", want.file, want.text, stdout)
		}
	}
	for _, line := range fails {
		if strings.Contains(line, "good.json") {
			t.Errorf("good.json reported: %s", line)
		}
	}
	if len(fails) != 6 {
		t.Errorf("%d FAIL lines, want 6:\n%s", len(fails), stdout)
	}

	// The good machine alone passes.
	stdout, stderr, code = runMain(t, "check", "--upstreams", upsFile, filepath.Join(machines, "good.json"))
	if code != 0 || strings.Contains(stdout, "FAIL") {
		t.Errorf("good.json: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
