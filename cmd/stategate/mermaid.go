package main

import (
	"github.com/stategate/stategate/graph"
	"github.com/stategate/stategate/interp"
)

// mermaid draws a machine for the gate's diagram resources
// (gate.Options.Mermaid).
func mermaid(m *interp.Machine, tools map[string]string, active func(*interp.StateNode) bool) string {
	return graph.Mermaid(m, graph.Options{Tools: tools, Active: active})
}
