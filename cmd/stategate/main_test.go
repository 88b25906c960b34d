package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/internal/pgtest"
)

const caseDir = "../../testdata/conformance"

func TestTraceCommand(t *testing.T) {
	file := filepath.Join(caseDir, "history", "deep.case.json")
	var out bytes.Buffer
	if err := (&traceCmd{Case: file}).Run(&out); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(caseDir, "history", "deep.trace.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got, exp any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("trace is not JSON: %v\n%s", err, out.String())
	}
	if err := json.Unmarshal(want, &exp); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, exp) {
		t.Fatalf("trace differs from the oracle's:\n%s", out.String())
	}
}

func TestBenchCommand(t *testing.T) {
	var out bytes.Buffer
	cmd := &benchCmd{Cases: []string{filepath.Join(caseDir, "basic", "transitions.case.json")}, Seconds: 0.05}
	if err := cmd.Run(&out); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON line: %q", out.String())
	}
	for _, k := range []string{"case", "rounds", "steps", "ns_per_step", "ns_per_round"} {
		if _, ok := line[k]; !ok {
			t.Errorf("line lacks %q: %s", k, out.String())
		}
	}
	if line["case"] != "basic/transitions.case.json" || line["steps"] != 6.0 || line["rounds"].(float64) < 1 {
		t.Errorf("line %s", out.String())
	}
}

func TestCheckCommand(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"id":"m","initial":"a","states":{"a":{"on":{"GO":"nowhere"}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := (&checkCmd{Files: []string{bad}}).Run(&out)
	if err != errSilentFailure {
		t.Fatalf("err = %v, want a failure", err)
	}
	if !strings.Contains(out.String(), "bad.json:1:46: state a:") || !strings.Contains(out.String(), "FAILED") {
		t.Fatalf("output %q", out.String())
	}
	// A handle key that is a bundled machine's argument fails its files.
	out.Reset()
	err = (&checkCmd{Files: []string{"../../machines"}, HandleKey: "amount"}).Run(&out)
	if err != errSilentFailure || !strings.Contains(out.String(), `tool invoice_add_line: inputSchema: handle key "amount" is also a property`) ||
		!strings.Contains(out.String(), "tool payment_authorize: inputSchema:") {
		t.Fatalf("check --handle-key amount machines: %v\n%s", err, out.String())
	}
	// The machines of the history cases, each on its own (two of them
	// share an id, which a served folder could not hold).
	out.Reset()
	var machines []string
	files, _ := filepath.Glob(filepath.Join(caseDir, "history", "*.json"))
	for _, f := range files {
		if !strings.HasSuffix(f, ".case.json") && !strings.HasSuffix(f, ".trace.json") {
			machines = append(machines, f)
		}
	}
	if err := (&checkCmd{Files: machines}).Run(&out); err != nil || len(machines) < 4 {
		t.Fatalf("history cases fail to check: %v\n%s", err, out.String())
	}
	// As a folder, the two that share an id are a clash.
	out.Reset()
	if err := (&checkCmd{Files: []string{filepath.Join(caseDir, "history")}}).Run(&out); err != errSilentFailure || !strings.Contains(out.String(), `machine id "stereo" is also the id of`) {
		t.Fatalf("history folder: %v\n%s", err, out.String())
	}
}

// TestServeRefusesAMissingMachinesFolder checks that a mistyped
// --machines fails before the store is opened: no store is left behind.
func TestServeRefusesAMissingMachinesFolder(t *testing.T) {
	data := filepath.Join(t.TempDir(), "state")
	err := (&serveCmd{Machines: filepath.Join(t.TempDir(), "nope"), Data: data}).Run(io.Discard)
	if err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("a store was made at %s (%v)", data, err)
	}
}

// TestMain runs the command itself when STATEGATE_RUN_MAIN is set, so that
// a test can run it as a process and see its output and exit status.
func TestMain(m *testing.M) {
	if os.Getenv("STATEGATE_RUN_MAIN") != "" {
		main()
		os.Exit(0)
	}
	code := m.Run()
	pg.Close()
	os.Exit(code)
}

// pg is the test binary's PostgreSQL cluster, started by the first test
// that needs it (those skip where PostgreSQL is not installed).
var pg pgtest.Shared

// runMain runs stategate with args and returns what it printed and its
// exit status.
func runMain(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "STATEGATE_RUN_MAIN=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// TestServeFlagsThatCannotBeCombined checks that --memory with --no-sync
// is one line of error and exit status 1, not kong's whole usage and its
// status 80.
func TestServeFlagsThatCannotBeCombined(t *testing.T) {
	stdout, stderr, code := runMain(t, "serve", "--memory", "--no-sync")
	want := "stategate: --memory and --no-sync cannot be combined (--memory writes nothing to sync)\n"
	if code != 1 || stdout != "" || stderr != want {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and stderr %q", code, stdout, stderr, want)
	}
}

// TestServeOnABusyPortLeavesNoStore checks that serve --http on a port
// another process holds fails before the store is opened: the error names
// the flag, and no store is left behind.
func TestServeOnABusyPortLeavesNoStore(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	data := filepath.Join(t.TempDir(), "state")
	addr := busy.Addr().String()
	_, stderr, code := runMain(t, "serve", "--machines", "../../machines", "--data", data, "--http", addr)
	if code != 1 || !strings.Contains(stderr, "stategate: --http "+addr+": listen tcp "+addr) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("a store was made at %s (%v)", data, err)
	}
}

// TestUsageErrorsAreOneLine: a mistyped flag or command is one line that
// says what is wrong, one that says where help is, and exit status 2 (not
// the whole usage and status 80).
func TestUsageErrorsAreOneLine(t *testing.T) {
	for _, args := range [][]string{{"serve", "--nope"}, {"srve"}, {"check"}} {
		stdout, stderr, code := runMain(t, args...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != 2 || stdout != "" || len(lines) != 2 || !strings.HasPrefix(lines[0], "stategate: ") || !strings.Contains(lines[1], "--help") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}

// TestInitMakesAWorkingFolder: init writes a machine that check passes
// and serve serves, and prints the client's config with absolute paths;
// it writes nothing over a file.
func TestInitMakesAWorkingFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "machines")
	stdout, stderr, code := runMain(t, "init", dir)
	if code != 0 || !strings.Contains(stdout, filepath.Join(dir, "ticket.ts")) || !strings.Contains(stdout, `"args": [`) || !strings.Contains(stdout, `"`+dir+`"`) || !strings.Contains(stdout, "--tool-name ticket_assign --tool-arg ticket_id=T-1") {
		t.Fatalf("init: exit %d\n%s%s", code, stdout, stderr)
	}
	if stdout, stderr, code := runMain(t, "check", dir); code != 0 || !strings.Contains(stdout, "ticket.ts: ok (4 states, 3 events)") {
		t.Errorf("check of init's folder: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, stderr, code := runMain(t, "init", dir); code != 1 || !strings.Contains(stderr, "exists already") {
		t.Errorf("init over its own file: exit %d %s", code, stderr)
	}
}
