package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The official MCP conformance suite (@modelcontextprotocol/conformance),
// its server scenarios run against `stategate serve --http` on the
// bundled machines. It needs node 22 or later: the node on PATH when it is
// one, else the node package of the npm registry (a node 22 binary),
// installed with the suite into a cache folder (mcpSuiteDir) by npm when
// the registry is reachable. Without either, the test skips, saying why.

// mcpSuiteVersion is the suite's version the results below are of.
const mcpSuiteVersion = "0.1.16"

// mcpScenario is what stategate does with one of the suite's server
// scenarios: passes it, or fails it for a reason that makes it not apply
// (failure: a text the failure's message holds).
type mcpScenario struct {
	name    string
	failure string // "" when the scenario passes
	why     string // why it does not apply, or what passing shows
}

// mcpScenarios are the suite's server scenarios (conformance list, every
// suite), in its order. docs/conformance.md's table is made of them
// (TestMCPSuiteDocs).
var mcpScenarios = []mcpScenario{
	{"server-initialize", "", "initialize: name, version, capabilities, a revision it asked for"},
	{"logging-set-level", "logging not supported", "no logging capability: stategate logs to stderr, and sends clients no log messages"},
	{"ping", "", "ping"},
	{"completion-complete", "completions not supported", "no completions capability: no prompts, and resource templates whose arguments are a workflow id and a handle"},
	{"tools-list", "", "every tool has a name, a description and an input schema"},
	{"tools-call-simple-text", "Unknown tool: test_simple_text", "calls `test_simple_text`, a tool of the suite's reference server: stategate's tools are its workflows' events, and an unknown tool is the JSON-RPC error -32602 naming the tools available (as MCP asks)"},
	{"tools-call-image", "Unknown tool: test_image_content", "a reference-server tool (`test_image_content`): stategate's results are text and structured content"},
	{"tools-call-audio", "Unknown tool: test_audio_content", "a reference-server tool (`test_audio_content`)"},
	{"tools-call-embedded-resource", "Unknown tool: test_embedded_resource", "a reference-server tool (`test_embedded_resource`)"},
	{"tools-call-mixed-content", "Unknown tool: test_multiple_content_types", "a reference-server tool (`test_multiple_content_types`)"},
	{"tools-call-with-logging", "logging not supported", "sets a log level first: no logging capability"},
	{"tools-call-error", "Unknown tool: test_error_handling", "a reference-server tool (`test_error_handling`); stategate's refusals are results with isError (FORBIDDEN, REJECTED, ...), tested by its own suite"},
	{"tools-call-with-progress", "Unknown tool: test_tool_with_progress", "a reference-server tool (`test_tool_with_progress`); stategate relays an upstream tool's progress to its caller"},
	{"tools-call-sampling", "Unknown tool: test_sampling", "a reference-server tool (`test_sampling`): stategate asks clients for no sampling"},
	{"tools-call-elicitation", "Unknown tool: test_elicitation", "a reference-server tool (`test_elicitation`); stategate elicits only a human's yes for a step with meta.tool.confirm"},
	{"json-schema-2020-12", "Tool 'json_schema_2020_12_tool' not found", "a reference-server tool (`json_schema_2020_12_tool`)"},
	{"elicitation-sep1034-defaults", "Unknown tool: test_elicitation_sep1034_defaults", "a reference-server tool"},
	{"server-sse-polling", "", "a call answered as JSON (no SSE priming event to test: the suite says so, as information)"},
	{"server-sse-multiple-streams", "", "concurrent POSTs of one session"},
	{"elicitation-sep1330-enums", "Unknown tool: test_elicitation_sep1330_enums", "a reference-server tool"},
	{"resources-list", "", "the workflows' diagrams and the session's own instances, each with a URI and a name"},
	{"resources-read-text", "test://static-text", "reads `test://static-text`, a reference-server resource: stategate's are `stategate://workflow/...`; an unknown URI is -32002"},
	{"resources-read-binary", "test://static-binary", "reads `test://static-binary`, a reference-server resource (stategate's are text)"},
	{"resources-templates-read", "test://template/123/data", "reads `test://template/123/data`, of a reference-server template"},
	{"resources-subscribe", "test://watched-resource", "subscribes to `test://watched-resource`, which stategate does not serve: it refuses (-32002) rather than acknowledge a subscription that can never be told anything"},
	{"resources-unsubscribe", "test://watched-resource", "subscribes to `test://watched-resource` first (refused, as above)"},
	{"prompts-list", "prompts not supported", "no prompts capability"},
	{"prompts-get-simple", "prompts not supported", "no prompts capability"},
	{"prompts-get-with-args", "prompts not supported", "no prompts capability"},
	{"prompts-get-embedded-resource", "prompts not supported", "no prompts capability"},
	{"prompts-get-with-image", "prompts not supported", "no prompts capability"},
	{"dns-rebinding-protection", "", "a request whose Host is not the server's is refused (403)"},
}

// TestMCPSuite runs the suite's server scenarios against serve --http and
// checks that each passes, or fails for the reason mcpScenarios gives.
func TestMCPSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the MCP conformance suite")
	}
	node, suite := mcpSuite(t)
	base := serveHTTP(t)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, suite, "server", "--suite", "all", "--url", base+"/mcp", "-o", out)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("the suite did not run: %v\n%s", err, log.String())
	}
	got := mcpResults(t, out)
	for _, sc := range mcpScenarios {
		checks, ran := got[sc.name]
		switch {
		case !ran:
			t.Errorf("%s: not run by the suite (%s)", sc.name, mcpSuiteVersion)
		case sc.failure == "" && checks.failed != "":
			t.Errorf("%s: fails: %s", sc.name, checks.failed)
		case sc.failure != "" && checks.failed == "":
			t.Errorf("%s: passes now; docs/conformance.md says it does not apply (%s)", sc.name, sc.why)
		case sc.failure != "" && !strings.Contains(checks.failed, sc.failure):
			t.Errorf("%s: fails for another reason than %q: %s", sc.name, sc.failure, checks.failed)
		}
		delete(got, sc.name)
	}
	for name := range got {
		t.Errorf("%s: a scenario of the suite that mcpScenarios (and docs/conformance.md) do not list", name)
	}
	if t.Failed() {
		t.Logf("the suite's output:\n%s", log.String())
	}
}

// scenarioChecks are a scenario's checks: the messages of those that
// failed, "" when none did.
type scenarioChecks struct{ failed string }

// mcpResults reads the suite's results: a folder per scenario run
// (server-NAME-TIME), each with checks.json.
func mcpResults(t *testing.T, dir string) map[string]scenarioChecks {
	t.Helper()
	stamp := regexp.MustCompile(`^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$`)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]scenarioChecks{}
	for _, e := range entries {
		m := stamp.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			t.Fatal(err)
		}
		var checks []struct {
			ID, Status, ErrorMessage string
		}
		if err := json.Unmarshal(data, &checks); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		var failed []string
		for _, c := range checks {
			if c.Status == "FAILURE" {
				failed = append(failed, c.ID+": "+c.ErrorMessage)
			}
		}
		out[m[1]] = scenarioChecks{failed: strings.Join(failed, "; ")}
	}
	return out
}

// serveHTTP runs serve --http on the bundled machines, in memory, and
// returns its address (http://127.0.0.1:PORT).
func serveHTTP(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], "serve", "--memory", "--machines", "../../machines", "--upstreams", "none", "--http", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "STATEGATE_RUN_MAIN=1")
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	var base string
	lines := bufio.NewScanner(stderr)
	for base == "" && lines.Scan() {
		if _, u, ok := strings.Cut(lines.Text(), `msg="serving MCP over Streamable HTTP" url=`); ok {
			u, _, _ = strings.Cut(u, " ")
			base = strings.TrimSuffix(u, "/mcp")
		}
	}
	if base == "" {
		t.Fatalf("serve did not say where it serves (%v)", lines.Err())
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	return base
}

// mcpSuiteDir is where the suite and a node 22 are installed:
// $STATEGATE_MCPSUITE_DIR, else a folder of the user's cache.
func mcpSuiteDir() (string, error) {
	if d := os.Getenv("STATEGATE_MCPSUITE_DIR"); d != "" {
		return d, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "stategate", "mcpsuite-"+mcpSuiteVersion), nil
}

// mcpSuite returns a node of version 22 or later and the suite's script,
// installing them into mcpSuiteDir when they are not there; it skips the
// test when they cannot be had.
func mcpSuite(t *testing.T) (node, suite string) {
	t.Helper()
	dir, err := mcpSuiteDir()
	if err != nil {
		t.Skipf("no folder for the MCP conformance suite: %v", err)
	}
	find := func() (string, string) {
		suite := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
		if !suiteAt(filepath.Dir(filepath.Dir(suite))) {
			suite = ""
		}
		for _, n := range []string{"node", filepath.Join(dir, "node_modules", ".bin", "node")} {
			if nodeMajor(n) >= 22 {
				return n, suite
			}
		}
		return "", suite
	}
	if node, suite = find(); node != "" && suite != "" {
		return node, suite
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skipf("the MCP conformance suite needs node 22 or later and is not in %s, and there is no npm to install it: %v", dir, err)
	}
	// Installed into a folder of its own, then moved into place: a run
	// that stops half-way leaves nothing behind that looks installed.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Skipf("cannot make %s: %v", filepath.Dir(dir), err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".install-")
	if err != nil {
		t.Skipf("cannot install the MCP conformance suite: %v", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.WriteFile(filepath.Join(tmp, "package.json"), []byte(`{"name":"stategate-mcpsuite","private":true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "node@22", "@modelcontextprotocol/conformance@"+mcpSuiteVersion)
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("the MCP conformance suite could not be installed with npm (%v): %s", err, lastLines(out, 5))
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		t.Skipf("cannot move the MCP conformance suite into %s: %v", dir, err)
	}
	if node, suite = find(); node == "" || suite == "" {
		t.Skipf("the MCP conformance suite was installed into %s, yet no node 22 or suite is there", dir)
	}
	t.Logf("installed the MCP conformance suite %s and a node 22 into %s", mcpSuiteVersion, dir)
	return node, suite
}

// suiteAt reports whether the suite's package at dir is of mcpSuiteVersion.
func suiteAt(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return false
	}
	var p struct{ Version string }
	return json.Unmarshal(data, &p) == nil && p.Version == mcpSuiteVersion
}

// nodeMajor is a node's major version, 0 when it does not run.
func nodeMajor(node string) int {
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return 0
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	major, _, _ := strings.Cut(v, ".")
	n, _ := strconv.Atoi(major)
	return n
}

func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

var update = flag.Bool("update", false, "write docs/conformance.md's table of the MCP conformance suite's scenarios")

// TestMCPSuiteDocs keeps docs/conformance.md's table the one mcpScenarios
// makes (go test -run TestMCPSuiteDocs -update writes it).
func TestMCPSuiteDocs(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "conformance.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- mcpsuite: made by go test ./cmd/stategate -run TestMCPSuiteDocs -update -->\n", "<!-- /mcpsuite -->"
	doc := string(data)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no table between %q and %q", path, strings.TrimSpace(begin), end)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| scenario (suite %s) | result | why |\n| --- | --- | --- |\n", mcpSuiteVersion)
	for _, sc := range mcpScenarios {
		result := "pass"
		if sc.failure != "" {
			result = "does not apply"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", sc.name, result, sc.why)
	}
	table := b.String()
	if doc[i+len(begin):j] == table {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(doc[:i+len(begin)]+table+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's table is not the one mcpScenarios makes (go test ./cmd/stategate -run TestMCPSuiteDocs -update):\n%s", path, table)
}
