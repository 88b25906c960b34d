package layout_test

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
	all := strings.Fields(string(out))
	if !slices.Contains(all, module+pkg) {
		t.Fatalf("go list %s does not list the package itself: %v", pkg, all)
	}
	return all
}

// What a package may not link, by the prefixes of import paths.
var (
	mcpGo     = []string{"github.com/mark3labs/mcp-go"}
	badger    = []string{"github.com/dgraph-io/badger", module + "store/badger"}
	postgres  = []string{"github.com/jackc/pgx", module + "store/postgres"}
	fsnotify  = []string{"github.com/fsnotify/fsnotify", module + "internal/watch"}
	jsEngine  = []string{"github.com/dop251/goja", "github.com/evanw/esbuild", module + "xstate/js"}
	outModule = []string{""} // anything outside the standard library and the module (checked apart)
)

// TestLayout keeps each package out of the rooms it must not enter: the
// engine and the XState layer need nothing but the standard library; the
// runtime (workflow) links no MCP, no store engine, no file watcher and no
// JavaScript; the gate links no store engine, no file watcher and no
// JavaScript; the store's interface links no engine; only xstate/js
// links goja and esbuild, only store/badger Badger, only store/postgres
// pgx, only internal/watch fsnotify.
func TestLayout(t *testing.T) {
	for _, c := range []struct {
		pkg    string
		denied [][]string
	}{
		{"interp", [][]string{outModule}},
		{"xstate", [][]string{outModule}},
		{"store", [][]string{badger, postgres, mcpGo, fsnotify, jsEngine}},
		{"store/storetest", [][]string{badger, postgres, mcpGo, fsnotify, jsEngine}},
		{"store/badger", [][]string{postgres, mcpGo, fsnotify, jsEngine}},
		{"store/postgres", [][]string{badger, mcpGo, fsnotify, jsEngine}},
		{"workflow", [][]string{mcpGo, badger, postgres, fsnotify, jsEngine}},
		{"upstream", [][]string{badger, postgres, fsnotify, jsEngine}},
		{"gate", [][]string{badger, postgres, fsnotify, jsEngine}},
		{"inspect", [][]string{badger, postgres, fsnotify, jsEngine, {module + "gate"}}},
		{"graph", [][]string{badger, postgres, fsnotify, jsEngine, mcpGo}},
		{"auth", [][]string{badger, postgres, fsnotify, jsEngine, mcpGo, {module + "gate", module + "workflow"}}},
	} {
		for _, d := range deps(t, c.pkg) {
			for _, deny := range c.denied {
				if len(deny) == 1 && deny[0] == "" {
					if !strings.HasPrefix(d, module) {
						t.Errorf("%s depends on %s, outside the standard library and the module", c.pkg, d)
					}
					continue
				}
				for _, p := range deny {
					if strings.HasPrefix(d, p) {
						t.Errorf("%s depends on %s", c.pkg, d)
					}
				}
			}
		}
	}
	// The check sees each dependency where it is.
	for pkg, want := range map[string]string{
		"xstate/js":      "github.com/dop251/goja",
		"store/badger":   "github.com/dgraph-io/badger",
		"store/postgres": "github.com/jackc/pgx",
		"internal/watch": "github.com/fsnotify/fsnotify",
		"gate":           "github.com/mark3labs/mcp-go",
	} {
		if !slices.ContainsFunc(deps(t, pkg), func(d string) bool { return strings.HasPrefix(d, want) }) {
			t.Errorf("%s does not depend on %s: the checks above see nothing", pkg, want)
		}
	}
}
