package graph_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/graph"
	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/xstate"
)

// chain is a machine of n states, the first `arrows` of which go to the
// next by NEXT.
func chain(t testing.TB, n, arrows int) *interp.Machine {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"id":"chain","initial":"s0","states":{`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		if i < arrows {
			fmt.Fprintf(&b, `"s%d":{"on":{"NEXT":"s%d"}}`, i, (i+1)%n)
		} else {
			fmt.Fprintf(&b, `"s%d":{}`, i)
		}
	}
	b.WriteString(`}}`)
	m, _, err := xstate.ParseJSON("chain.json", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSVGTooLarge: a machine over the diagram limits is not laid out:
// SVG and PNG say it is too large to draw, naming the limit; its DOT and
// Mermaid text are still written. One at the limits is drawn.
func TestSVGTooLarge(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    *interp.Machine
		want string
	}{
		// The root is a state too: MaxStates nodes in all.
		{"at the limits", chain(t, graph.MaxStates-1, graph.MaxTransitions-1), ""},
		{"a state over", chain(t, graph.MaxStates, 1), fmt.Sprintf("%d states, over the diagram limit of %d (graph.MaxStates)", graph.MaxStates+1, graph.MaxStates)},
		{"a transition over", chain(t, graph.MaxTransitions+1, graph.MaxTransitions+1), fmt.Sprintf("%d transitions, over the diagram limit of %d (graph.MaxTransitions)", graph.MaxTransitions+1, graph.MaxTransitions)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == "" {
				if _, err := graph.SVG(context.Background(), tc.m, graph.Options{}); err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, draw := range []func(context.Context, *interp.Machine, graph.Options) ([]byte, error){graph.SVG, graph.PNG} {
				_, err := draw(context.Background(), tc.m, graph.Options{})
				if !errors.Is(err, graph.ErrTooLarge) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "too large to draw") {
					t.Fatalf("err = %v, want ErrTooLarge saying %q", err, tc.want)
				}
			}
			if dot := graph.DOT(tc.m, graph.Options{}); !strings.Contains(dot, "digraph") {
				t.Errorf("no DOT text: %q", dot)
			}
		})
	}
}

// slow is a machine within the limits that Graphviz takes long to lay out
// (about a second here, on two cores: every state's second transition
// goes far back or ahead).
func slow(t testing.TB) *interp.Machine {
	t.Helper()
	const n = 70
	var b strings.Builder
	b.WriteString(`{"id":"tangle","initial":"s0","states":{`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"s%d":{"on":{"NEXT":"s%d","JUMP":"s%d"}}`, i, (i+1)%n, (i*7+3)%n)
	}
	b.WriteString(`}}`)
	m, _, err := xstate.ParseJSON("tangle.json", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSVGDeadline: a layout still running when its context ends is given
// up by its caller, with the context's error; Graphviz finishes it in the
// background (it cannot be stopped), and the next drawing waits for it.
func TestSVGDeadline(t *testing.T) {
	m := slow(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	svg, err := graph.SVG(ctx, m, graph.Options{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v (%d bytes drawn), want the deadline's", err, len(svg))
	}
	if _, err := graph.SVG(context.Background(), load(t, "../machines/invoice.json"), graph.Options{}); err != nil {
		t.Fatal(err)
	}
}
