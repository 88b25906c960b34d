// Package upstreams_test runs the example: stategate in front of the
// official filesystem MCP server (from npm, when node is here).
package upstreams_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stategate/stategate/internal/mcptest"
)

// TestFilesystemServerGated walks the release example over stdio with
// mcp-go's client: stategate starts the filesystem server (installed
// from npm on first use), lists its reads always and write_file only once
// the notes are approved, and the file on disk shows the write.
func TestFilesystemServerGated(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("no npm")
	}
	dir, _ := filepath.Abs("testdata")
	server := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	if _, err := os.Stat(server); err != nil {
		install := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--silent")
		install.Dir = dir
		if out, err := install.CombinedOutput(); err != nil {
			t.Skipf("cannot install the filesystem server (no npm registry?): %v\n%s", err, out)
		}
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "stategate")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/stategate").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The example's upstreams file, with node and the installed server in
	// place of npx (no registry needed at run time).
	workspace := filepath.Join(tmp, "workspace")
	if err := os.Mkdir(workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	ups, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"fs": map[string]any{"command": node, "args": []string{server, "${WORKSPACE}"}},
	}})
	upsFile := filepath.Join(tmp, "upstreams.json")
	if err := os.WriteFile(upsFile, ups, 0o644); err != nil {
		t.Fatal(err)
	}
	c := mcptest.Stdio(t, bin, append(os.Environ(), "WORKSPACE="+workspace),
		[]string{"serve", "--machines", "machines", "--data", filepath.Join(tmp, "data"), "--upstreams", upsFile},
		mcptest.Options{Version: mcp.LATEST_LEGACY_PROTOCOL_VERSION, Name: "upstreams-test"})
	listed := func() map[string]bool {
		out := map[string]bool{}
		for name := range c.Tools() {
			out[name] = true
		}
		return out
	}
	call := func(name string, args map[string]any) (string, bool) {
		res := c.Result(name, args)
		return mcptest.Text(res), res.IsError
	}
	notes := filepath.Join(workspace, "NOTES.md")

	tools := listed()
	for _, want := range []string{"read_text_file", "list_directory", "release_submit"} {
		if !tools[want] {
			t.Errorf("%s not listed while drafting: %v", want, tools)
		}
	}
	for _, hidden := range []string{"write_file", "move_file", "edit_file"} {
		if tools[hidden] {
			t.Errorf("%s listed while drafting", hidden)
		}
	}
	if text, isErr := call("write_file", map[string]any{"path": notes, "content": "too early"}); !isErr || !strings.Contains(text, "FORBIDDEN") {
		t.Fatalf("write_file before approval: %v %s", isErr, text)
	}
	if _, err := os.Stat(notes); !os.IsNotExist(err) {
		t.Fatalf("the refused write reached the disk: %v", err)
	}
	if err := c.CallErr("move_file", map[string]any{"source": notes, "destination": notes + ".bak"}); !errors.Is(err, mcp.ErrInvalidParams) || !strings.Contains(err.Error(), "move_file") {
		t.Errorf("move_file (named by no machine): %v", err)
	}
	call("release_submit", nil)
	call("release_approve", nil)
	if !listed()["write_file"] {
		t.Fatalf("write_file not listed once approved: %v", listed())
	}
	text, isErr := call("write_file", map[string]any{"path": notes, "content": "# v1\n"})
	if isErr || !strings.Contains(text, "now in state published") {
		t.Fatalf("write_file once approved: %v %s", isErr, text)
	}
	if data, err := os.ReadFile(notes); err != nil || string(data) != "# v1\n" {
		t.Fatalf("on disk: %q %v", data, err)
	}
	if text, isErr := call("read_text_file", map[string]any{"path": notes}); isErr || text != "# v1\n" {
		t.Errorf("read_text_file: %v %q", isErr, text)
	}
	if listed()["write_file"] {
		t.Errorf("write_file still listed once published")
	}
}
