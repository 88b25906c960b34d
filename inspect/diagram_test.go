package inspect

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stategate/stategate/graph"
	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
)

func testWorkflow(t *testing.T) *workflow.Workflow {
	t.Helper()
	m, _, err := xstate.ParseJSON("light.json", []byte(`{"id":"light","initial":"green","states":{"green":{"on":{"TIMER":"red"}},"red":{"on":{"TIMER":"green"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	wf, err := workflow.New(m, workflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

// drawer is a Handler that draws diagrams, and nothing else, with
// layout.
func drawer(layout func(context.Context, *interp.Machine, graph.Options) ([]byte, error)) *Handler {
	h := &Handler{svgs: map[string][]byte{}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	h.draw.layout, h.draw.timeout = layout, defaultLayoutTimeout
	return h
}

// blockedLayout is a layout that waits for release (or its context, as
// graph.SVG gives up at its deadline), counting its calls.
type blockedLayout struct {
	calls   atomic.Int64
	release chan struct{}
}

func (b *blockedLayout) layout(ctx context.Context, m *interp.Machine, o graph.Options) ([]byte, error) {
	b.calls.Add(1)
	select {
	case <-b.release:
		return []byte("<svg>drawn</svg>"), nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// TestDiagramSharedLayout: page views of one diagram while it is being
// laid out wait for that layout; they start none of their own.
func TestDiagramSharedLayout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &blockedLayout{release: make(chan struct{})}
		h := drawer(b.layout)
		wf := testWorkflow(t)
		const views = 8
		got := make(chan string, views)
		for range views {
			go func() {
				svg, msg := h.diagram(context.Background(), wf, "green", "light x")
				got <- string(svg) + msg
			}()
		}
		synctest.Wait() // every view waits for the layout
		close(b.release)
		for range views {
			if s := <-got; s != "<svg>drawn</svg>" {
				t.Errorf("a view got %q", s)
			}
		}
		if n := b.calls.Load(); n != 1 {
			t.Errorf("%d layouts for %d views of one diagram, want 1", n, views)
		}
	})
}

// TestDiagramLayoutDeadline: a layout that runs past the deadline is
// given up, and the machine is not laid out again (until its file
// changes): later views say so at once.
func TestDiagramLayoutDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &blockedLayout{release: make(chan struct{})}
		h := drawer(b.layout)
		wf := testWorkflow(t)
		for i, state := range []string{"green", "red", "green"} {
			svg, msg := h.diagram(context.Background(), wf, state, "light x")
			if svg != "" || !strings.Contains(msg, "took more than 10s to lay it out") || !strings.Contains(msg, "not laid out again until its machine file changes") {
				t.Fatalf("view %d: svg %q, message %q", i, svg, msg)
			}
		}
		if n := b.calls.Load(); n != 1 {
			t.Errorf("%d layouts, want 1", n)
		}
		close(b.release)
	})
}

// TestDiagramTooLarge: a machine over graph's limits gets a message that
// says it is too large to draw, naming the limit.
func TestDiagramTooLarge(t *testing.T) {
	var src strings.Builder
	src.WriteString(`{"id":"big","initial":"s0","states":{`)
	for i := range graph.MaxStates { // and the root
		if i > 0 {
			src.WriteString(",")
		}
		fmt.Fprintf(&src, `"s%d":{}`, i)
	}
	src.WriteString(`}}`)
	m, _, err := xstate.ParseJSON("big.json", []byte(src.String()))
	if err != nil {
		t.Fatal(err)
	}
	wf, err := workflow.New(m, workflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := drawer(graph.SVG)
	svg, msg := h.diagram(context.Background(), wf, nil, "big")
	if svg != "" || !strings.Contains(msg, "too large to draw") || !strings.Contains(msg, "graph.MaxStates") {
		t.Fatalf("svg %d bytes, message %q", len(svg), msg)
	}
}
