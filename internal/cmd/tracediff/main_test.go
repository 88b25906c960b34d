package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// differ.golden is what the comparison script the traces were first
// checked with (a Python one) printed for expected.trace.json against
// actual.trace.json.
func TestRun(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "differ.golden"))
	if err != nil {
		t.Fatal(err)
	}
	td := func(name string) string { return filepath.Join("testdata", name) }
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     string
		stderrHas  string
		stderrNone bool
	}{
		{name: "differ", args: []string{td("expected.trace.json"), td("actual.trace.json")}, code: 1, stdout: string(golden), stderrNone: true},
		{name: "key order, number spelling and a missing null aside", args: []string{td("expected.trace.json"), td("reordered.trace.json")}, code: 0, stderrNone: true},
		{name: "same file", args: []string{td("actual.trace.json"), td("actual.trace.json")}, code: 0, stderrNone: true},
		{name: "missing file", args: []string{td("expected.trace.json"), td("nowhere.trace.json")}, code: 2, stderrHas: "nowhere.trace.json"},
		{name: "broken JSON", args: []string{td("broken.json"), td("expected.trace.json")}, code: 2, stderrHas: "broken.json: invalid JSON"},
		{name: "not a trace", args: []string{td("expected.trace.json"), td("not-a-trace.json")}, code: 2, stderrHas: "not-a-trace.json: not a trace"},
		{name: "no arguments", code: 2, stderrHas: "usage"},
		{name: "three arguments", args: []string{"a", "b", "c"}, code: 2, stderrHas: "usage"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, stderr.String())
			}
			if stdout.String() != tc.stdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout.String(), tc.stdout)
			}
			if tc.stderrNone && stderr.Len() > 0 {
				t.Errorf("stderr %q, want nothing", stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.stderrHas) {
				t.Errorf("stderr %q does not name %q", stderr.String(), tc.stderrHas)
			}
		})
	}
}

// Every recorded trace of the project reads, and agrees with itself.
func TestRecordedTraces(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "testdata", "conformance", "*", "*.trace.json"))
	if err != nil {
		t.Fatal(err)
	}
	own, err := filepath.Glob(filepath.Join("..", "..", "..", "testdata", "conformance", "own", "*", "*.trace.json"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, own...)
	if len(files) < 100 {
		t.Fatalf("found %d traces under testdata/conformance, want the corpus", len(files))
	}
	for _, f := range files {
		var stdout, stderr bytes.Buffer
		if code := run([]string{f, f}, &stdout, &stderr); code != 0 {
			t.Errorf("%s against itself: exit %d: %s%s", f, code, stdout.String(), stderr.String())
		}
	}
}

func TestPyNumber(t *testing.T) {
	for in, want := range map[string]string{
		"0": "0", "-0": "0", "42": "42", "-7": "-7", "123456789012345678901234567890": "123456789012345678901234567890",
		"1.0": "1.0", "-0.0": "-0.0", "2.50": "2.5", "1e3": "1000.0", "1E-7": "1e-07", "0.0001": "0.0001",
		"0.00001": "1e-05", "1e16": "1e+16", "1234567890123456.0": "1234567890123456.0", "1.5e300": "1.5e+300",
		"1e400": "Infinity", "-1e400": "-Infinity", "0.1": "0.1",
	} {
		if got := pyNumber(json.Number(in)); got != want {
			t.Errorf("pyNumber(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestEqual(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{`{"a": 1, "b": [true, null]}`, `{"b": [true, null], "a": 1.0}`, true},
		{`1`, `1.0`, true},
		{`12345678901234567890`, `12345678901234567891`, false},
		{`1e2`, `100`, true},
		{`true`, `1`, false},
		{`null`, `false`, false},
		{`""`, `null`, false},
		{`[1, 2]`, `[2, 1]`, false},
		{`[1]`, `[1, 1]`, false},
		{`{"a": 1}`, `{"a": 1, "b": 2}`, false},
		{`{"a": null}`, `{"b": null}`, false},
		{`"x"`, `"x"`, true},
		{`{}`, `[]`, false},
	}
	for _, tc := range tests {
		a, err := decode([]byte(tc.a))
		if err != nil {
			t.Fatal(err)
		}
		b, err := decode([]byte(tc.b))
		if err != nil {
			t.Fatal(err)
		}
		if got := equal(a, b); got != tc.want {
			t.Errorf("equal(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := equal(b, a); got != tc.want {
			t.Errorf("equal(%s, %s) = %v, want %v", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, in := range []string{``, `{`, `{"a": }`, `[1, 2`, `{} {}`, `{"a": 1,}`, `nul`} {
		if _, err := decode([]byte(in)); err == nil {
			t.Errorf("decode(%q): no error", in)
		}
	}
}
