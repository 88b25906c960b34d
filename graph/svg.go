package graph

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/goccy/go-graphviz"

	"github.com/stategate/stategate/interp"
)

// The diagram limits: SVG and PNG lay out no machine of more states or
// transitions (ErrTooLarge), because Graphviz's dot layout takes time that
// grows much faster than a machine's size and cannot be stopped once it
// runs. Measured in WebAssembly on two shared cores: a machine of 70
// states whose 140 transitions go far back and ahead took about 1 s, of
// 100 states and 200 such transitions 5 to 9 s, of 200 and 400 six
// minutes; a chain of 200 states, 70 ms. The largest machines of the
// conformance corpus and of machines/ have 28 states and 25 transitions.
// DOT and Mermaid write text of any size.
const (
	// MaxStates bounds the states of a machine drawn, its root included.
	MaxStates = 200
	// MaxTransitions bounds the transitions drawn: one per target of
	// each transition, as the drawing has arrows.
	MaxTransitions = 150
)

// ErrTooLarge is returned by SVG and PNG for a machine over MaxStates or
// MaxTransitions: it is too large to draw.
var ErrTooLarge = errors.New("the machine is too large to draw")

// checkSize refuses a machine over the diagram limits.
func checkSize(m *interp.Machine, o Options) error {
	if n := len(m.Nodes); n > MaxStates {
		return fmt.Errorf("%w: it has %d states, over the diagram limit of %d (graph.MaxStates); its DOT text can be laid out by Graphviz's own dot", ErrTooLarge, n, MaxStates)
	}
	if n := len(edges(m, &o)); n > MaxTransitions {
		return fmt.Errorf("%w: it has %d transitions, over the diagram limit of %d (graph.MaxTransitions); its DOT text can be laid out by Graphviz's own dot", ErrTooLarge, n, MaxTransitions)
	}
	return nil
}

// layout is the one Graphviz instance: go-graphviz runs one WebAssembly
// module for the whole program, which takes one call at a time, so its
// calls go through this channel (a lock that a context can give up
// waiting for). The instance is made on first use (about a millisecond)
// and kept.
var layout = make(chan *graphviz.Graphviz, 1)

func init() { layout <- nil }

// SVG returns the machine drawn by Graphviz's dot layout: the [DOT] text
// rendered as SVG; ErrTooLarge for a machine over the diagram limits
// (MaxStates, MaxTransitions). Calls run one at a time. ctx bounds the
// wait for another's to end and the layout: when it ends first, SVG
// returns its error (context.Cause) at once, and the layout, which
// cannot be stopped, goes on in the background and holds Graphviz until
// it ends (the limits bound how long).
func SVG(ctx context.Context, m *interp.Machine, o Options) ([]byte, error) {
	if err := checkSize(m, o); err != nil {
		return nil, err
	}
	return render(ctx, DOT(m, o), graphviz.SVG)
}

// PNG returns the machine drawn as SVG does, as a PNG image (for a look
// at it where no SVG viewer is at hand).
func PNG(ctx context.Context, m *interp.Machine, o Options) ([]byte, error) {
	if err := checkSize(m, o); err != nil {
		return nil, err
	}
	return render(ctx, DOT(m, o), graphviz.PNG)
}

func render(ctx context.Context, dot string, format graphviz.Format) ([]byte, error) {
	var g *graphviz.Graphviz
	select {
	case g = <-layout:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if err := ctx.Err(); err != nil {
		layout <- g
		return nil, context.Cause(ctx)
	}
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Graphviz's own calls get no deadline: a WebAssembly call that
		// a context stopped would leave the one module broken for good.
		out, err := renderWith(context.WithoutCancel(ctx), &g, dot, format)
		layout <- g
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		return r.out, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("graphviz: the layout did not end in time (it goes on in the background): %w", context.Cause(ctx))
	}
}

// renderWith lays out and renders dot with the instance *g (made first
// if nil).
func renderWith(ctx context.Context, g **graphviz.Graphviz, dot string, format graphviz.Format) ([]byte, error) {
	if *g == nil {
		var err error
		if *g, err = graphviz.New(ctx); err != nil {
			return nil, fmt.Errorf("graphviz: %w", err)
		}
	}
	gr, err := graphviz.ParseBytes([]byte(dot))
	if err != nil {
		return nil, fmt.Errorf("graphviz: %w", err)
	}
	defer gr.Close()
	var buf bytes.Buffer
	if err := (*g).Render(ctx, gr, format, &buf); err != nil {
		return nil, fmt.Errorf("graphviz: %w", err)
	}
	return buf.Bytes(), nil
}
