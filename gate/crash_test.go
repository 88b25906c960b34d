package gate_test

import (
	"context"
	"flag"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"stategate/store"
)

var crashFull = flag.Bool("crash.full", false, "run the crash test with 1000 concurrent calls")

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startServer runs the binary over HTTP and waits until it answers.
func startServer(t *testing.T, bin, machines, data, addr string) *exec.Cmd {
	t.Helper()
	// Flushes and compactions every few hundred calls: the kill may land
	// in one.
	cmd := exec.Command(bin, "serve", "--machines", machines, "--data", data, "--http", addr, "--small-tables")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return cmd
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the server did not start")
		}
		time.Sleep(20 * time.Millisecond) // waiting for a port: no signal to await
	}
}

// TestCrashLosesNoAcknowledgedCall kills the server with SIGKILL while
// calls run, restarts it, and checks that every call that got a success
// result is in the stored state and the audit trail.
func TestCrashLosesNoAcknowledgedCall(t *testing.T) {
	bin := buildBinary(t)
	total, killAfter := 200, int64(80)
	if *crashFull {
		total, killAfter = 1000, 500
	}
	machines := t.TempDir()
	for f, src := range testMachines {
		if err := os.WriteFile(filepath.Join(machines, f), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data := t.TempDir()
	addr := freePort(t)
	srv := startServer(t, bin, machines, data, addr)
	url := "http://" + addr + "/mcp"

	clients := make([]*mcpClient, 8)
	for i := range clients {
		clients[i] = connect(t, url)
	}
	var acked atomic.Int64
	var killed sync.Once
	kill := func() { killed.Do(func() { srv.Process.Kill(); srv.Wait() }) }
	var wg sync.WaitGroup
	calls := make(chan int, total)
	for i := range total {
		calls <- i
	}
	close(calls)
	for _, c := range clients {
		wg.Add(1)
		go func(c *mcpClient) {
			defer wg.Done()
			for range calls {
				req := mcp.CallToolRequest{}
				req.Params.Name = "order_add"
				req.Params.Arguments = map[string]any{"order_id": "crash"}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				res, err := c.CallTool(ctx, req)
				cancel()
				if err == nil && !res.IsError {
					if acked.Add(1) == killAfter {
						go kill()
					}
				}
			}
		}(c)
	}
	wg.Wait()
	kill()
	n := acked.Load()
	if n < killAfter {
		t.Fatalf("only %d calls succeeded before the kill", n)
	}
	st, err := store.OpenBadger(data, store.BadgerOptions{GCInterval: -1, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k := store.Key{Machine: "order", Handle: "crash"}
	rec, version, err := st.Load(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	var snap struct {
		Context struct{ Items int } `json:"context"`
	}
	if err := jsonUnmarshal(rec.Snapshot, &snap); err != nil {
		t.Fatal(err)
	}
	trail, err := st.Audit(context.Background(), k, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d calls acknowledged before and after the kill; stored: items=%d version=%d audit=%d", n, snap.Context.Items, version, len(trail))
	if int64(snap.Context.Items) < n || int64(len(trail)) < n {
		t.Fatalf("acknowledged %d calls, but the store has items=%d and %d audit entries", n, snap.Context.Items, len(trail))
	}
	if uint64(len(trail)) != version || trail[len(trail)-1].Version != version {
		t.Fatalf("audit trail (%d, last v%d) and state (v%d) disagree", len(trail), trail[len(trail)-1].Version, version)
	}
}
