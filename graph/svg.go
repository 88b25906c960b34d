package graph

import (
	"bytes"
	"context"
	"fmt"

	"github.com/goccy/go-graphviz"

	"github.com/stategate/stategate/interp"
)

// layout is the one Graphviz instance: go-graphviz runs one WebAssembly
// module for the whole program, which takes one call at a time, so its
// calls go through this channel (a lock that a context can give up
// waiting for). The instance is made on first use (about a millisecond)
// and kept.
var layout = make(chan *graphviz.Graphviz, 1)

func init() { layout <- nil }

// SVG returns the machine drawn by Graphviz's dot layout: the [DOT] text
// rendered as SVG. Calls run one at a time; ctx bounds the wait for
// another's to end.
func SVG(ctx context.Context, m *interp.Machine, o Options) ([]byte, error) {
	return render(ctx, DOT(m, o), graphviz.SVG)
}

// PNG returns the machine drawn as SVG does, as a PNG image (for a look
// at it where no SVG viewer is at hand).
func PNG(ctx context.Context, m *interp.Machine, o Options) ([]byte, error) {
	return render(ctx, DOT(m, o), graphviz.PNG)
}

func render(ctx context.Context, dot string, format graphviz.Format) ([]byte, error) {
	var g *graphviz.Graphviz
	select {
	case g = <-layout:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { layout <- g }()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if g == nil {
		var err error
		if g, err = graphviz.New(ctx); err != nil {
			return nil, fmt.Errorf("graphviz: %w", err)
		}
	}
	gr, err := graphviz.ParseBytes([]byte(dot))
	if err != nil {
		return nil, fmt.Errorf("graphviz: %w", err)
	}
	defer gr.Close()
	var buf bytes.Buffer
	if err := g.Render(ctx, gr, format, &buf); err != nil {
		return nil, fmt.Errorf("graphviz: %w", err)
	}
	return buf.Bytes(), nil
}
