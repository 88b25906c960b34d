package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/xstate"
	"github.com/stategate/stategate/xstate/js"
)

// withJS returns a Loader that loads JavaScript and TypeScript modules,
// as the trace and bench commands' do.
func withJS() *xstate.Loader { return &xstate.Loader{Modules: &js.Host{}} }

// caseFiles lists every conformance case under testdata/conformance.
func caseFiles(t testing.TB) []string {
	var files []string
	err := filepath.WalkDir(filepath.Join("..", "testdata", "conformance"), func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".case.json") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	if len(files) == 0 {
		t.Fatal("no conformance cases found")
	}
	return files
}

var traceFields = []string{"value", "context", "status", "tags", "enabled", "emitted", "output", "error"}

// traceDiffs compares two traces field by field, as internal/cmd/tracediff does.
func traceDiffs(expected, actual []byte) ([]string, error) {
	var exp, act struct {
		Steps []map[string]any `json:"steps"`
	}
	if err := json.Unmarshal(expected, &exp); err != nil {
		return nil, fmt.Errorf("expected trace: %w", err)
	}
	if err := json.Unmarshal(actual, &act); err != nil {
		return nil, fmt.Errorf("actual trace: %w", err)
	}
	var diffs []string
	if len(exp.Steps) != len(act.Steps) {
		diffs = append(diffs, fmt.Sprintf("steps: expected %d, got %d", len(exp.Steps), len(act.Steps)))
	}
	for i := range min(len(exp.Steps), len(act.Steps)) {
		e, a := exp.Steps[i], act.Steps[i]
		for _, f := range traceFields {
			if !reflect.DeepEqual(e[f], a[f]) {
				ej, _ := json.Marshal(e[f])
				aj, _ := json.Marshal(a[f])
				sj, _ := json.Marshal(e["step"])
				diffs = append(diffs, fmt.Sprintf("step %d (%s) %s: expected %s, got %s", i, sj, f, ej, aj))
			}
		}
	}
	return diffs, nil
}

func TestConformance(t *testing.T) {
	for _, file := range caseFiles(t) {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.ToSlash(file), "../testdata/conformance/"), ".case.json")
		t.Run(name, func(t *testing.T) {
			c, err := ReadCase(file)
			if err != nil {
				t.Fatal(err)
			}
			m, err := c.Load(withJS())
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Run(m).JSON()
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(strings.TrimSuffix(file, ".case.json") + ".trace.json")
			if err != nil {
				t.Fatal(err)
			}
			diffs, err := traceDiffs(want, got)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range diffs {
				t.Error(d)
			}
		})
	}
}

// TestCaseAbsolutePaths loads a case that names its machine and
// implementations by absolute paths, as the oracle's path.resolve allows.
func TestCaseAbsolutePaths(t *testing.T) {
	src, err := filepath.Abs(filepath.Join("..", "testdata", "conformance", "actions", "enqueue-actions.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "abs.case.json")
	body, _ := json.Marshal(map[string]any{"machine": src, "steps": []any{map[string]any{"send": map[string]any{"type": "DEPOSIT", "amount": 150}}}})
	if err := os.WriteFile(file, body, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := ReadCase(file)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Load(withJS())
	if err != nil {
		t.Fatalf("case naming %s: %v", src, err)
	}
	tr := c.Run(m)
	out, err := tr.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"large": 1`) {
		t.Errorf("trace of a large deposit counts no large deposit:\n%s", out)
	}
}

// TestHoldPromises checks the option bench rounds run with: a promise's
// outcome is not delivered (XState's benchmark never yields to the
// microtasks that would deliver it), while a normal run takes onDone.
func TestHoldPromises(t *testing.T) {
	c, err := ReadCase(filepath.Join("..", "testdata", "conformance", "invoke", "promise-resolve.case.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Load(withJS())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		hold bool
		want string
	}{{false, "success"}, {true, "loading"}} {
		a := interp.NewActor(m, interp.ActorOptions{HoldPromises: tc.hold})
		a.Start()
		a.Send(interp.Event{Type: "FETCH", Data: map[string]any{"id": 7.0}})
		if v := a.Snapshot().Value(); v != tc.want {
			t.Errorf("HoldPromises %v: state %v after FETCH, want %s", tc.hold, v, tc.want)
		}
		a.Stop()
	}
}
