package conformance

import (
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkCases times one round (fresh actor, every step) of each
// conformance case (JSON and JavaScript), as `stategate bench` does.
func BenchmarkCases(b *testing.B) {
	for _, file := range caseFiles(b) {
		c, err := ReadCase(file)
		if err != nil {
			b.Fatal(err)
		}
		m, err := c.Load(withJS())
		if err != nil {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(file), ".case.json")
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.Round(m)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*max(1, len(c.Steps))), "ns/step")
		})
	}
}
