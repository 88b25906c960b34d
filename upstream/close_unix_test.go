//go:build unix

package upstream

import (
	"context"
	"errors"
	"strconv"
	"syscall"
	"testing"
)

func TestCloseKillsChildren(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.m.Apply(context.Background(), config(stdioServer(t, "a"), stdioServer(t, "b")))
	f.up(t, "a")
	f.up(t, "b")
	var pids []int
	for _, name := range []string{"a", "b"} {
		pid, err := strconv.Atoi(pidOf(t, f.m, name))
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	inflight := make(chan error, 1)
	running := make(chan struct{}, 100)
	go func() {
		req := callReq("slow", map[string]any{"ms": 20000})
		ctx := WithNotify(context.Background(), func(string, map[string]any) { running <- struct{}{} })
		_, err := f.m.Call(ctx, "a", withToken(req, "inflight"))
		inflight <- err
	}()
	<-running
	if err := f.m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-inflight; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("call in flight: %v", err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("pid %d still there (%v)", pid, err)
		}
	}
	if len(f.m.Servers()) != 0 {
		t.Fatal("servers after Close")
	}
}
