package upstream

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestNoFileWatcher checks that package upstream links no file watcher:
// the gate imports it, and the gate must not link fsnotify
// (internal/watch does, for the programs that watch files).
func TestNoFileWatcher(t *testing.T) {
	goTool, err := exec.LookPath("go") // go test puts its own go first in PATH
	if err != nil {
		t.Fatal(err)
	}
	deps := func(pkg string) []string {
		out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	isWatcher := func(p string) bool { return strings.HasPrefix(p, "github.com/fsnotify/") }
	if slices.ContainsFunc(deps("github.com/stategate/stategate/upstream"), isWatcher) {
		t.Error("package upstream depends on fsnotify")
	}
	// The check sees fsnotify where it is.
	if !slices.ContainsFunc(deps("github.com/stategate/stategate/internal/watch"), isWatcher) {
		t.Error("internal/watch does not depend on fsnotify: the check above sees nothing")
	}
}
