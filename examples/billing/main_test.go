package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stategate/stategate/internal/mcptest"
)

// walk drives an invoice through the billing server as an agent would,
// checking what is listed at each step, that discharge is refused before
// approval, and that a discharge records the payment in the ledger.
func walk(t *testing.T, c *mcptest.Client, ledgerFile string) {
	t.Helper()
	listed := func() map[string]bool {
		out := map[string]bool{}
		for name := range c.Tools() {
			out[name] = true
		}
		return out
	}
	call := c.Result
	text := mcptest.Text
	if l := listed(); !l["ledger"] || !l["invoice_add_line"] || l["discharge"] || l["invoice_approve"] {
		t.Fatalf("in draft: %v", l)
	}
	if res := call("discharge", map[string]any{"payer": "acme"}); !res.IsError || !strings.Contains(text(res), "FORBIDDEN") {
		t.Fatalf("discharge in draft: %s", text(res))
	}
	call("invoice_add_line", map[string]any{"description": "consulting", "amount": 120.0})
	call("invoice_submit", nil)
	call("invoice_approve", nil)
	if l := listed(); !l["discharge"] || l["invoice_approve"] {
		t.Fatalf("approved: %v", l)
	}
	res := call("discharge", map[string]any{"payer": "acme"})
	if res.IsError || !strings.Contains(text(res), "Paid 120.00") || !strings.Contains(text(res), "now in state discharged (done)") {
		t.Fatalf("discharge: %s", text(res))
	}
	data, err := os.ReadFile(ledgerFile)
	if err != nil {
		t.Fatal(err)
	}
	var p payment
	if err := json.Unmarshal(data, &p); err != nil || p.Payer != "acme" || p.Amount != 120 {
		t.Fatalf("the ledger holds %q", data)
	}
	if res := call("ledger", nil); !strings.Contains(text(res), `"payer":"acme"`) {
		t.Fatalf("ledger: %s", text(res))
	}
	if l := listed(); l["discharge"] || !l["invoice_reset"] {
		t.Fatalf("discharged: %v", l)
	}
}

func TestBillingOverStdio(t *testing.T) {
	ledgerFile := filepath.Join(t.TempDir(), "ledger.jsonl")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-ledger", ledgerFile}, inR, outW, io.Discard); outW.Close() }()
	c := mcptest.Pipes(t, outR, inW, mcptest.Options{Version: mcp.LATEST_LEGACY_PROTOCOL_VERSION, Name: "billing-test"})
	walk(t, c, ledgerFile)
	inW.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestBillingOverHTTP(t *testing.T) {
	addr := freeAddr(t)
	ledgerFile := filepath.Join(t.TempDir(), "ledger.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-http", addr, "-ledger", ledgerFile}, nil, io.Discard, io.Discard) }()
	waitHTTP(t, addr)
	c := mcptest.HTTP(t, "http://"+addr+"/mcp", mcptest.Options{Version: mcp.LATEST_LEGACY_PROTOCOL_VERSION, Name: "billing-test"})
	walk(t, c, ledgerFile)
	c.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestBillingWithTheTypeScriptSDK drives the server over stdio with the
// official TypeScript SDK (testdata/client.mjs), when node and npm are
// here (its packages are installed on first use).
func TestBillingWithTheTypeScriptSDK(t *testing.T) {
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
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		install := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--silent")
		install.Dir = dir
		if out, err := install.CombinedOutput(); err != nil {
			t.Skipf("cannot install the TypeScript SDK (no npm registry?): %v\n%s", err, out)
		}
	}
	bin := filepath.Join(t.TempDir(), "billing")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ledgerFile := filepath.Join(t.TempDir(), "ledger.jsonl")
	cmd := exec.Command(node, filepath.Join(dir, "client.mjs"), bin, "-ledger", ledgerFile)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the TypeScript client failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "discharged") {
		t.Fatalf("the TypeScript client said:\n%s", out)
	}
	if data, err := os.ReadFile(ledgerFile); err != nil || !strings.Contains(string(data), `"payer":"ts-sdk"`) {
		t.Fatalf("the ledger holds %q (%v)", data, err)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitHTTP waits until the server answers HTTP.
func waitHTTP(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if res, err := http.Get("http://" + addr + "/mcp"); err == nil {
			res.Body.Close()
			return
		}
		time.Sleep(20 * time.Millisecond) // a port has no signal to await
	}
	t.Fatal("the server did not start")
}
