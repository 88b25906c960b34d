package xstate_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/stategate/stategate/"

// deps returns the packages pkg depends on (itself included) that are
// not in the standard library, as go list sees them.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go") // go test puts its own go first in PATH
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", module+pkg).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list %s: %v\n%s", pkg, err, ee.Stderr)
		}
		t.Fatalf("go list %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

func isJSEngine(p string) bool {
	return strings.HasPrefix(p, "github.com/dop251/goja") || strings.HasPrefix(p, "github.com/evanw/esbuild")
}

// TestNoJavaScriptEngine checks that a Go program that runs machines
// without JavaScript (the engine, the XState layer, the store and its
// engine on disk, the gate) links no JavaScript engine and no bundler:
// only package xstate/js does, and the program that wires it in. The engine and the XState layer need
// nothing but the standard library and the module's own packages.
func TestNoJavaScriptEngine(t *testing.T) {
	for _, pkg := range []string{"interp", "xstate", "store", "store/badger", "gate"} {
		all := deps(t, pkg)
		if !slices.Contains(all, module+pkg) {
			t.Fatalf("go list %s does not list the package itself: %v", pkg, all)
		}
		for _, d := range all {
			if isJSEngine(d) {
				t.Errorf("%s depends on %s", pkg, d)
			}
			if (pkg == "interp" || pkg == "xstate") && !strings.HasPrefix(d, module) {
				t.Errorf("%s depends on %s, outside the standard library and the module", pkg, d)
			}
		}
	}
	// The check sees the engine where it is.
	if !slices.ContainsFunc(deps(t, "xstate/js"), isJSEngine) {
		t.Error("xstate/js does not depend on goja or esbuild: the check above sees nothing")
	}
}

func isBadger(p string) bool { return strings.HasPrefix(p, "github.com/dgraph-io/badger") }

// TestNoBadger checks that the store's interface, and what uses a store
// without choosing its engine (the gate, the inspector), link no Badger:
// only the engine, store/badger, does, and the programs that open it.
func TestNoBadger(t *testing.T) {
	for _, pkg := range []string{"store", "store/storetest", "gate", "inspect"} {
		for _, d := range deps(t, pkg) {
			if isBadger(d) || d == module+"store/badger" {
				t.Errorf("%s depends on %s", pkg, d)
			}
		}
	}
	// The check sees Badger where it is.
	if !slices.ContainsFunc(deps(t, "store/badger"), isBadger) {
		t.Error("store/badger does not depend on github.com/dgraph-io/badger: the check above sees nothing")
	}
}
