//go:build linux

package gate_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/store/badger"
)

// unlimited lets a server under test create an instance per call, as
// fast as it takes them (a blob each).
var unlimited = []string{"--start-rate", "0"}

// crashFullDisk runs the server on a small tmpfs until its reserve
// refuses calls: calls fail with a clear error, reads go on, the server
// stays up; killed then, it refuses to start on the full disk, and
// started again once space is freed, it serves every acknowledged call.
func crashFullDisk(t *testing.T, bin, machines string) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	disk := t.TempDir()
	if err := syscall.Mount("tmpfs", disk, "tmpfs", 0, "size=256m"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	defer syscall.Unmount(disk, syscall.MNT_DETACH)
	data := filepath.Join(disk, "data")
	// Leave the reserve and 24 MiB.
	filler := filepath.Join(disk, "filler")
	var st syscall.Statfs_t
	syscall.Statfs(disk, &st)
	if err := os.WriteFile(filler, bytes.Repeat([]byte("f"), int(int64(st.Bavail)*st.Bsize-badger.DefaultMinFree-24<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	var f crashFigures
	addr := freePort(t)
	srv, err := startServer(t, bin, machines, data, addr, unlimited...)
	if err != nil {
		t.Fatal(err)
	}
	f.runs++
	c := connect(t, "http://"+addr+"/mcp")
	text := make([]byte, 30<<10)
	ackedBlobs := map[string]bool{}
	refusals := 0
	var refusal string
	for i := 0; refusals < 20; i++ {
		for j := range text {
			text[j] = "abcdefghijklmnopqrstuvwxyz0123456789"[rand.IntN(36)]
		}
		id := fmt.Sprint("b", i)
		msg, ok, err := callTool(c, "blob_put", map[string]any{"blob_id": id, "text": string(text)})
		if err != nil {
			t.Fatalf("call %d: %v (the server died?)\n%s", i, err, srv.stderr.String())
		}
		if ok {
			ackedBlobs[id] = true
			f.acked++
			continue
		}
		if !strings.Contains(msg, "NO_SPACE") {
			t.Fatalf("call %d failed: %s", i, msg)
		}
		refusals++
		refusal = msg
	}
	t.Logf("%d calls stored, then refused: %s", f.acked, refusal)
	// Reads go on.
	if msg, ok, err := callTool(c, "blob_status", map[string]any{"blob_id": "b0"}); err != nil || !ok {
		t.Fatalf("status on a full disk: %v %s", err, msg)
	}
	srv.kill()
	f.kills++
	// Restarting on the full disk: refused, with a clear error.
	if srv, err := startServer(t, bin, machines, data, freePort(t), unlimited...); err == nil {
		srv.stop()
		t.Log("the server started again on the full disk (it had room for the reserve)")
	} else {
		if !strings.Contains(err.Error(), "free disk space") {
			t.Fatalf("restart on a full disk: %v", err)
		}
		f.refusedSpace++
		t.Logf("restart on the full disk refused: %s", firstLineOf(err.Error()))
	}
	os.Remove(filler)
	srv, err = startServer(t, bin, machines, data, freePort(t), unlimited...)
	if err != nil {
		t.Fatalf("restart once space is freed: %v", err)
	}
	f.runs++
	srv.stop()
	stor, err := badger.Open(data, badger.Options{ReadOnly: true, GCInterval: -1, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer stor.Close()
	for id := range ackedBlobs {
		if _, _, err := stor.Load(context.Background(), store.Key{Machine: "blob", Handle: id}); err != nil {
			f.lost++
		}
	}
	t.Logf("full disk: %d runs, %d kills, %d calls acknowledged, %d lost, %d refused to open (no space)", f.runs, f.kills, f.acked, f.lost, f.refusedSpace)
	if f.lost > 0 {
		t.Fatalf("%d acknowledged calls lost", f.lost)
	}
}
