// Command stategate runs XState v5 machines: as the gate of an MCP server
// (serve), and from the command line to check machine files, print the
// trace of a conformance case, or time one.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/stategate/stategate/conformance"
	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/upstream"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
	"github.com/stategate/stategate/xstate/js"
)

// version is the binary's version, as MCP clients see it.
const version = "0.1.0"

// The commands, in the order a user needs them.
type cli struct {
	Init  initCmd  `cmd:"" help:"Start a machines folder: one commented machine, and the config that makes an MCP client start the server."`
	Serve serveCmd `cmd:"" help:"Serve the machines of a folder as an MCP server whose tools follow each workflow's state."`
	Check checkCmd `cmd:"" help:"Validate machine files; exit status 1 when any fails."`
	Graph graphCmd `cmd:"" help:"Draw a machine file as SVG, DOT or Mermaid; with --handle (and --data or --store), an instance's active states and context."`
	State stateCmd `cmd:"" help:"Inspect or reset the stored instances (when no server holds the --data folder; with --store, while servers run)."`
	Trace traceCmd `cmd:"" help:"Run a conformance case and print its trace (the format of the conformance README)."`
	Bench benchCmd `cmd:"" help:"Time conformance cases as scripts/bench-xstate.sh times XState; one JSON line per case."`

	Version kong.VersionFlag `help:"Print the version and exit."`
}

type traceCmd struct {
	Case string `arg:"" type:"existingfile" help:"The case file (NAME.case.json)."`
}

func (c *traceCmd) Run(stdout io.Writer) error {
	cs, err := conformance.ReadCase(c.Case)
	if err != nil {
		return err
	}
	// What the machine's code writes with console.log goes to stderr.
	m, err := cs.Load(&xstate.Loader{Modules: &js.Host{Console: slog.New(slog.NewTextHandler(os.Stderr, nil))}})
	if err != nil {
		return err
	}
	out, err := cs.Run(m).JSON()
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}

type benchCmd struct {
	Cases   []string `arg:"" type:"existingfile" help:"Case files."`
	Seconds float64  `short:"s" default:"2" help:"Seconds to time each case (after a quarter as much to warm up)."`
}

func (c *benchCmd) Run(stdout io.Writer) error {
	if c.Seconds <= 0 {
		return errors.New("--seconds must be positive")
	}
	for _, file := range c.Cases {
		cs, err := conformance.ReadCase(file)
		if err != nil {
			return err
		}
		m, err := cs.Load(&xstate.Loader{Modules: &js.Host{}})
		if err != nil {
			return err
		}
		line, err := jsonLine(cs.Bench(m, time.Duration(c.Seconds*float64(time.Second))))
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, line)
	}
	return nil
}

type checkCmd struct {
	Files     []string `arg:"" help:"Machine files, or folders to search for them."`
	HandleKey string   `placeholder:"NAME" help:"The handle key the server is given (its --handle-key), for the tools' schemas."`
	Upstreams string   `placeholder:"FILE" help:"An upstreams file: its servers are started, and the machines' upstream tools checked against theirs."`
}

func (c *checkCmd) Run(stdout io.Writer) error {
	report, err := workflow.Check(&xstate.Loader{Modules: &js.Host{}}, c.Files, c.HandleKey)
	if err != nil {
		return err
	}
	for _, line := range report.Lines() {
		fmt.Fprintln(stdout, line)
	}
	failed := report.Failed()
	if c.Upstreams != "" {
		bad, err := checkUpstreams(c.Upstreams, c.HandleKey, report)
		if err != nil {
			return err
		}
		for _, line := range bad {
			fmt.Fprintln(stdout, "FAIL "+line)
		}
		failed = failed || len(bad) > 0
	}
	if failed {
		return errSilentFailure
	}
	return nil
}

// checkUpstreams starts the servers of an upstreams file, waits for them
// to come up (or fail), and checks the good machines' upstream tools
// against theirs.
func checkUpstreams(file, handleKey string, report *xstate.Report) ([]string, error) {
	cfg, err := upstream.Load(file)
	if err != nil {
		return nil, err
	}
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ups := upstream.New(upstream.Options{Log: quiet})
	defer ups.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ups.Apply(ctx, cfg)
	_ = ups.Ready(ctx)
	var ws []*workflow.Workflow
	for _, r := range report.Files {
		if r.Failed || r.Machine == nil {
			continue
		}
		w, err := workflow.New(r.Machine, workflow.Options{HandleKey: handleKey})
		if err != nil {
			continue // reported by Check
		}
		w.File = r.File
		ws = append(ws, w)
	}
	return gate.CheckUpstreams(ws, ups.Servers()), nil
}

// errSilentFailure exits with status 1 after the command printed why.
var errSilentFailure = errors.New("")

func main() {
	var c cli
	parser, err := kong.New(&c,
		kong.Name("stategate"),
		kong.Description("Runs XState v5 machines as the gate of an MCP server."),
		kong.Vars{"version": "stategate " + version + " (XState " + xstate.Version + ")", "storeHelp": storeHelp},
		kong.BindTo(io.Writer(os.Stdout), (*io.Writer)(nil)),
	)
	if err != nil {
		panic(err) // the command line's definition is wrong: a bug
	}
	ctx, err := parser.Parse(os.Args[1:])
	if err != nil {
		// The one useful line, and where the rest is (not the whole
		// usage); 2, as usage errors conventionally exit.
		fmt.Fprintln(os.Stderr, "stategate:", err)
		help := "stategate --help"
		var pe *kong.ParseError
		if errors.As(err, &pe) && pe.Context != nil && pe.Context.Selected() != nil {
			help = "stategate " + pe.Context.Selected().Path() + " --help"
		}
		fmt.Fprintf(os.Stderr, "Run '%s' for the commands and flags.\n", help)
		os.Exit(2)
	}
	// Steps allocate short-lived garbage and the live heap is small, so
	// Go's default GC target makes collections frequent: unless GOGC is
	// set, the commands that time steps trade memory for fewer of them.
	// serve keeps Go's default, for a small server: under load the
	// difference in calls per second is lost in the noise, while its
	// memory grows by half at 200%.
	if os.Getenv("GOGC") == "" && !strings.HasPrefix(ctx.Command(), "serve") {
		debug.SetGCPercent(400)
	}
	if err := ctx.Run(); err != nil {
		if !errors.Is(err, errSilentFailure) {
			fmt.Fprintln(os.Stderr, "stategate:", err)
		}
		os.Exit(1)
	}
}

// jsonLine renders v as one line of JSON.
func jsonLine(v any) (string, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}
