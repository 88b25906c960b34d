// Command billing is an MCP server of its own, written with mcp-go, with
// stategate's gate plugged in: it serves a tool of its own (ledger), an
// invoice workflow whose events are tools (add a line, submit, approve,
// ...), and a tool with a real Go handler bound to the workflow's state:
// discharge, listed only once the invoice is approved, records the
// payment in a ledger file and then moves the invoice to discharged.
//
// The workflow is a JSON config with Go implementations (no JavaScript).
//
//	go run ./examples/billing                       # stdio
//	go run ./examples/billing -http 127.0.0.1:3002  # Streamable HTTP at /mcp
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/store/badger"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
)

//go:embed invoice.json
var invoiceConfig []byte

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "billing:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("billing", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("http", "", "serve Streamable HTTP at `ADDR`/mcp instead of stdio")
	ledgerFile := fs.String("ledger", "billing-ledger.jsonl", "the `FILE` payments are recorded in, a JSON line each")
	data := fs.String("data", "", "a `DIR` to keep the invoices in (a Badger store); in memory when empty")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(stderr, nil))

	var st store.Store = store.NewMemory()
	if *data != "" {
		b, err := badger.Open(*data, badger.Options{Logger: log})
		if err != nil {
			return err
		}
		defer b.Close()
		st = b
	}

	// The host's server, with a tool of its own.
	ledger := &ledger{file: *ledgerFile}
	srv := server.NewMCPServer("billing", "1.0", server.WithRecovery(), server.WithInstructions(gate.Instructions))
	srv.AddTool(mcp.NewTool("ledger", mcp.WithDescription("List the payments recorded."), mcp.WithReadOnlyHintAnnotation(true)), ledger.list)

	// The gate, plugged into it, serving the invoice workflow.
	g := gate.New(gate.Options{Store: st, Logger: log, SharedInstance: sharedInstance(*addr)})
	if err := g.Bind(srv); err != nil {
		return err
	}
	invoice, err := invoiceWorkflow()
	if err != nil {
		return err
	}
	if err := g.SetWorkflows([]*workflow.Workflow{invoice}); err != nil {
		return err
	}
	// discharge does the work of the invoice's DISCHARGE step.
	g.Tool(mcp.NewTool("discharge",
		mcp.WithDescription("Pay the approved invoice: records the payment in the ledger, then the invoice is discharged."),
		mcp.WithString("payer", mcp.Required(), mcp.Description("Who pays.")),
	), ledger.discharge).BindState("invoice", []string{"approved"}, "DISCHARGE")

	go g.RunTimers(ctx)
	if *addr == "" {
		return g.ServeStdio(ctx, stdin, stdout)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	h := g.HTTPHandler(gate.HTTPOptions{Hosts: gate.ListenHosts(ln.Addr())})
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	hs.RegisterOnShutdown(h.Close)
	log.Info("serving", "url", "http://"+ln.Addr().String()+"/mcp")
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(shut)
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// sharedInstance is the one invoice every stdio session works on; over
// HTTP each session has its own.
func sharedInstance(addr string) string {
	if addr == "" {
		return gate.DefaultInstance
	}
	return ""
}

// invoiceWorkflow is the invoice: a JSON config (invoice.json) with its
// guard and actions in Go.
func invoiceWorkflow() (*workflow.Workflow, error) {
	reg := xstate.NewRegistry().
		Guard("hasLines", func(a interp.Args, _ any) (bool, error) {
			return len(lines(a.Context)) > 0, nil
		}).
		Assign("addLine", func(a interp.Args, _ any) (map[string]any, error) {
			amount, _ := a.Event.Data["amount"].(float64)
			ls := append(lines(a.Context), map[string]any{"description": a.Event.Data["description"], "amount": amount})
			return map[string]any{"lines": ls, "total": total(a.Context) + amount}, nil
		}).
		Assign("keepReceipt", func(a interp.Args, _ any) (map[string]any, error) {
			return map[string]any{"receipt": a.Event.Data["output"]}, nil
		})
	m, _, err := (&xstate.Loader{Registry: reg}).Parse("invoice.json", invoiceConfig)
	if err != nil {
		return nil, err
	}
	return workflow.New(m, workflow.Options{})
}

func lines(ctx any) []any {
	ls, _ := ctx.(map[string]any)["lines"].([]any)
	return ls
}

func total(ctx any) float64 {
	t, _ := ctx.(map[string]any)["total"].(float64)
	return t
}

// ledger records payments in a file, a JSON line each.
type ledger struct {
	mu   sync.Mutex
	file string
}

// payment is a line of the ledger.
type payment struct {
	Invoice string  `json:"invoice"`
	Payer   string  `json:"payer"`
	Amount  float64 `json:"amount"`
	Time    string  `json:"time"`
}

// discharge pays an approved invoice: the gate calls it only while the
// invoice is approved, with the invoice's state in ctx; its result (the
// payment) becomes the DISCHARGE event's output.
func (l *ledger) discharge(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	st, ok := gate.StateFrom(ctx)
	if !ok {
		return mcp.NewToolResultError("discharge is called through the gate"), nil
	}
	payer := req.GetString("payer", "")
	if payer == "" {
		return mcp.NewToolResultError("payer is required"), nil
	}
	p := payment{Invoice: st.Handle, Payer: payer, Amount: total(st.Context), Time: time.Now().UTC().Format(time.RFC3339)}
	line, _ := json.Marshal(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return mcp.NewToolResultError("the ledger cannot be written: " + err.Error()), nil
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		return mcp.NewToolResultError("the ledger cannot be written: " + err.Error()), nil
	}
	if err := f.Sync(); err != nil {
		return mcp.NewToolResultError("the ledger cannot be written: " + err.Error()), nil
	}
	return mcp.NewToolResultStructured(p, fmt.Sprintf("Paid %.2f for invoice %s by %s.", p.Amount, p.Invoice, p.Payer)), nil
}

// list answers the ledger tool: the payments recorded.
func (l *ledger) list(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	l.mu.Lock()
	data, err := os.ReadFile(l.file)
	l.mu.Unlock()
	if errors.Is(err, os.ErrNotExist) {
		return mcp.NewToolResultText("No payment recorded."), nil
	}
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return mcp.NewToolResultText(string(data)), nil
}
