package gate

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"
)

func TestIdleSessionsEnd(t *testing.T) {
	g := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	tr := newHTTPTransport(g.srv, g.log)
	defer tr.Close()
	ctx := context.Background()
	idle, err := tr.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	busy, _ := tr.open(ctx)
	streaming, _ := tr.open(ctx)
	streaming.streaming.Store(true)
	now := time.Now()
	old := now.Add(-2 * tr.idle).UnixNano()
	idle.lastSeen.Store(old)
	streaming.lastSeen.Store(old)
	tr.sweep(now)
	tr.mu.Lock()
	_, idleLives := tr.sessions[idle.id]
	_, busyLives := tr.sessions[busy.id]
	_, streamLives := tr.sessions[streaming.id]
	tr.mu.Unlock()
	if idleLives || !busyLives || !streamLives {
		t.Fatalf("after a sweep: idle lives %v (want false), busy %v, streaming %v (want true)", idleLives, busyLives, streamLives)
	}
	select {
	case <-idle.done:
	default:
		t.Fatal("the idle session's streams were not told to end")
	}
	g.sessMu.Lock()
	_, known := g.sessions[idle.id]
	g.sessMu.Unlock()
	if known {
		t.Fatal("the gate still knows the ended session")
	}
}
