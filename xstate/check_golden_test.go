package xstate

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/check")

// TestCheckGolden checks each machine of testdata/check and compares what
// check prints with NAME.golden: every problem of a file in one pass
// (structural errors and missing implementations together), each at the
// line and column of its key, with the line's text and a caret.
func TestCheckGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/check/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			rep, err := (&Loader{}).Check([]string{file})
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(rep.Lines(), "\n") + "\n"
			golden := strings.TrimSuffix(file, ".json") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test ./xstate -run TestCheckGolden -update writes it)", err)
			}
			if got != string(want) {
				t.Errorf("check %s printed\n%s\nwant\n%s", file, got, want)
			}
		})
	}
}
