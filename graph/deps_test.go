package graph_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports checks that graph imports nothing but the standard library,
// interp and go-graphviz.
func TestImports(t *testing.T) {
	goTool, err := exec.LookPath("go") // go test puts its own go first in PATH
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(goTool, "list", "-f", "{{join .Imports \"\\n\"}}", "github.com/stategate/stategate/graph").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := strings.Fields(string(out))
	if len(imports) == 0 {
		t.Fatal("go list lists no imports")
	}
	for _, p := range imports {
		std := !strings.Contains(strings.Split(p, "/")[0], ".")
		if !std && p != "github.com/stategate/stategate/interp" && p != "github.com/goccy/go-graphviz" {
			t.Errorf("graph imports %s", p)
		}
	}
}
