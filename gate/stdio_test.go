package gate_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stategate/stategate/internal/mcptest"
)

// buildBinary builds cmd/stategate once per test run.
func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "stategate")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/stategate")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestStdio runs the built binary as an MCP client starts it: a
// subprocess with only PATH and HOME in its environment.
func TestStdio(t *testing.T) {
	bin := buildBinary(t)
	dir, _ := filepath.Abs(filepath.Join("..", "machines"))
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	c, err := client.NewStdioMCPClient(bin, env, "serve", "--machines", dir, "--data", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	mc := watched(t, c)
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	init.Params.ClientInfo = mcp.Implementation{Name: "stdio-e2e", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	tools := mc.Tools()
	if _, ok := tools["invoice_submit"]; !ok {
		t.Fatalf("tools: %v", mcptest.Names(tools))
	}
	text, _, isErr := mc.Call("invoice_approve", nil)
	if !isErr || !strings.HasPrefix(text, "FORBIDDEN") {
		t.Fatalf("approve in draft: %v %q", isErr, text)
	}
	_, sc, isErr := mc.Call("invoice_add_line", map[string]any{"description": "Consulting", "amount": 1200})
	if isErr || sc["state"] != "draft" {
		t.Fatalf("add line: %v %v", isErr, sc)
	}
	_, sc, isErr = mc.Call("invoice_submit", nil)
	if isErr || sc["state"] != "review" {
		t.Fatalf("submit: %v %v", isErr, sc)
	}
	mc.AwaitChanged()
	if _, ok := mc.Tools()["invoice_approve"]; !ok {
		t.Fatal("invoice_approve not listed in review")
	}
}

// TestStdioRestartResumes stops the server and starts it again on the same
// store: the instance is where it was.
func TestStdioRestartResumes(t *testing.T) {
	start := stdioServer(t, "--data", t.TempDir())
	a := start()
	a.Call("invoice_add_line", map[string]any{"description": "Audit", "amount": 800})
	a.Call("invoice_submit", nil)
	if err := a.Close(); err != nil { // closes stdin: the server shuts down
		t.Fatal(err)
	}
	b := start()
	defer b.Close()
	_, sc, isErr := b.Call("invoice_status", nil)
	ctx, _ := sc["context"].(map[string]any)
	if isErr || sc["state"] != "review" || ctx["total"] != 800.0 {
		t.Fatalf("after a restart: %v %v", isErr, sc)
	}
}

// TestStdioMemoryForgets runs serve --memory: state lives in the process
// only, so nothing is written where --data points and a restart starts
// the instance afresh.
func TestStdioMemoryForgets(t *testing.T) {
	data := filepath.Join(t.TempDir(), "unused")
	start := stdioServer(t, "--memory", "--data", data)
	a := start()
	if _, sc, isErr := a.Call("invoice_submit", nil); isErr || sc["state"] != "review" {
		t.Fatalf("submit: %v %v", isErr, sc)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("--memory wrote %s (%v)", data, err)
	}
	b := start()
	defer b.Close()
	if _, sc, isErr := b.Call("invoice_status", nil); isErr || sc["state"] != "draft" {
		t.Fatalf("after a restart with --memory: %v %v", isErr, sc)
	}
}

// stdioServer builds the binary and returns a function that starts it as
// an MCP client would (serve on the bundled machines, with flags, and only
// PATH and HOME in its environment) and initializes a session; the
// server's state lives as the flags say, across starts.
func stdioServer(t *testing.T, flags ...string) func() *mcptest.Client {
	bin := buildBinary(t)
	machines, _ := filepath.Abs(filepath.Join("..", "machines"))
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	args := append([]string{"serve", "--machines", machines}, flags...)
	return func() *mcptest.Client {
		return mcptest.Stdio(t, bin, env, args, mcptest.Options{})
	}
}
