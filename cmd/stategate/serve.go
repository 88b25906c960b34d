package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"golang.org/x/term"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/inspect"
	"github.com/stategate/stategate/internal/watch"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/store/badger"
	"github.com/stategate/stategate/upstream"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
	"github.com/stategate/stategate/xstate/js"
)

type serveCmd struct {
	Machines  string        `default:"machines" help:"Folder of machine files to serve (subfolders too)."`
	Data      string        `default:".stategate" help:"Folder of the store."`
	Store     string        `placeholder:"URL" env:"STATEGATE_STORE" help:"${storeHelp}"`
	Route     string        `placeholder:"NAME" help:"Name of this replica among several behind a proxy: the HTTP session ids it issues begin with NAME and a dot, for the proxy to route a session by (docs/replicas.md)."`
	HTTP      string        `name:"http" placeholder:"ADDR" help:"Serve Streamable HTTP at ADDR/mcp (bound to 127.0.0.1 unless ADDR names a host) instead of stdio."`
	Inspect   string        `name:"inspect" placeholder:"ADDR" help:"Beside stdio, serve the inspector's pages at ADDR/inspect (bound to 127.0.0.1 unless ADDR names a host), behind the checks of --http (--allow-host, --token-file, --auth-issuer), to watch a desktop client's workflows live; that port serves no /mcp. (With --http they are on its port.)"`
	AllowHost []string      `name:"allow-host" placeholder:"NAME" help:"A host name (or address) HTTP clients may reach the server by, besides loopback names and the addresses it listens on (repeatable)."`
	TokenFile string        `name:"token-file" type:"existingfile" placeholder:"FILE" help:"Require every HTTP request (--http, --inspect) to carry 'Authorization: Bearer TOKEN', TOKEN being the file's first line (a browser: the page opened once with ?token=TOKEN)."`
	Sessions  int           `name:"max-sessions" default:"1024" help:"HTTP sessions at most (and 2026-07-28 listen streams); at the bound, a new one replaces only one unused for 10 minutes, or one beyond another client address's quarter."`
	InspReset bool          `name:"inspect-reset" help:"Let the inspector's pages (ADDR/inspect) reset an instance that is done or failed, as 'state reset' does; without it they change nothing."`
	HandleKey string        `placeholder:"NAME" help:"Argument that picks a workflow instance (a machine's meta.handleKey overrides it)."`
	Instance  string        `default:"default" help:"The instance that stdio uses for machines with no handle key."`
	JSTimeout time.Duration `name:"js-timeout" default:"1s" help:"Time limit of one call into a machine's JavaScript."`
	JSMemory  byteSize      `name:"js-memory" default:"256MiB" help:"Memory budget of one call into a machine's JavaScript (and of a module's top-level code as it loads): past it the call is interrupted."`
	EventTime time.Duration `name:"event-timeout" default:"5s" help:"Time limit of one event on an instance (a call's or a timer's, all its steps): past it the call fails and the instance keeps its state."`
	Upstreams string        `placeholder:"FILE" help:"Upstreams file: the MCP servers whose tools the machines gate, in the mcpServers shape of Claude Desktop, Cursor and VS Code (default: ./upstreams.json, else upstreams.json in the user's config folder, when there is one; 'none': none)."`
	Pprof     string        `hidden:"" placeholder:"ADDR" help:"Serve net/http/pprof at ADDR (loopback), for profiling."`
	NoSync    bool          `help:"Answer calls before their state reaches the disk (faster; a power cut may lose the last calls, a killed server does not)."`
	Memory    bool          `help:"Keep workflow state in memory only: nothing is written (--data is not used) and a restart starts every workflow afresh. For tests and demos."`
	AuditKeep int           `default:"1000" help:"Audit entries kept per instance."`
	MaxInst   int           `name:"max-instances" default:"100000" help:"Instances each workflow may store: a call that would create one more (a start, a new handle's or session's first call) is refused with LIMIT and stores nothing (0: no cap)."`
	StartRate float64       `name:"start-rate" default:"20" help:"Instances each workflow may create a second, in bursts of ten seconds' worth: a creation past it is refused with LIMIT (0: no limit)."`
	MinFree   byteSize      `default:"128MiB" placeholder:"SIZE" help:"Free disk space the store keeps in reserve: a call that would leave less is refused (the instance unchanged) until space is freed (e.g. 128MiB, 1GiB; 0: none)."`
	// SmallTables is for tests that want the store's flushes and
	// compactions frequent.
	SmallTables bool     `hidden:"" help:"Size the store's memtables and tables tiny (tests)."`
	Procs       int      `placeholder:"N" help:"Cores the server runs on (GOMAXPROCS); 0: half of those Go would use, at least one (or the GOMAXPROCS variable), as a local server shares its machine with its clients."`
	MemLimit    byteSize `name:"mem-limit" default:"128MiB" placeholder:"SIZE" help:"Soft limit of the server's Go memory, with the store on disk (GOMEMLIMIT, which wins when set): near it the heap is collected more often, so a burst does not grow the process; it refuses nothing (0: none; --memory sets none: its instances and audit trails live in the heap)."`
	// The flags of principals (auth.go).
	AuthFlags `embed:""`
}

func (c *serveCmd) Run(stdout io.Writer) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if n := procsFor(c.Procs, os.Getenv("GOMAXPROCS"), runtime.GOMAXPROCS(0)); n > 0 {
		runtime.GOMAXPROCS(n)
	}
	if os.Getenv("GOMEMLIMIT") == "" && c.MemLimit > 0 && !c.Memory {
		debug.SetMemoryLimit(int64(c.MemLimit))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if c.Pprof != "" {
		go func() {
			mux := http.NewServeMux()
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			log.Info("pprof", "err", http.ListenAndServe(listenAddr(c.Pprof), mux))
		}()
	}
	// The flags, the machines folder and the HTTP port are checked first:
	// a mistake or a busy port must not leave a new store behind.
	if c.Memory && c.NoSync {
		return errors.New("--memory and --no-sync cannot be combined (--memory writes nothing to sync)")
	}
	if c.Route != "" {
		if err := gate.CheckRoute(c.Route); err != nil {
			return fmt.Errorf("--route: %w", err)
		}
	}
	if info, err := os.Stat(c.Machines); err != nil || !info.IsDir() {
		return fmt.Errorf("--machines %s: not a folder", c.Machines)
	}
	var token string
	if c.TokenFile != "" {
		var err error
		if token, err = readToken(c.TokenFile); err != nil {
			return err
		}
	}
	pr, err := c.principals(ctx, log)
	if err != nil {
		return err
	}
	var ln net.Listener
	if c.HTTP != "" {
		var err error
		if ln, err = net.Listen("tcp", listenAddr(c.HTTP)); err != nil {
			return fmt.Errorf("--http %s: %w", c.HTTP, err)
		}
		defer ln.Close()
	}
	iln, err := c.listenInspect()
	if err != nil {
		return err
	}
	if iln != nil {
		defer iln.Close()
	}
	st, where, err := c.openStore(log)
	if err != nil {
		return err
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.Error("closing the store", "err", err)
		}
		if b, ok := st.(interface{ Stats() (uint64, uint64) }); ok {
			saves, commits := b.Stats()
			log.Info("store closed", "saves", saves, "commits", commits)
		}
	}()
	maxInst, startRate := c.MaxInst, c.StartRate
	if maxInst <= 0 {
		maxInst = -1 // none
	}
	if startRate <= 0 {
		startRate = -1
	}
	inst := workflow.NewInstances(workflow.InstancesOptions{Store: st, Logger: log, EventTimeout: c.EventTime, MaxInstances: maxInst, StartRate: startRate})
	opts := gate.Options{Instances: inst, Logger: log, ConfirmTimeout: c.ConfirmTime, Mermaid: mermaid}
	var inspectBase string
	if c.HTTP == "" {
		opts.SharedInstance = c.Instance
		if iln != nil {
			inspectBase = inspectURL(iln.Addr(), c.AllowHost)
			opts.InspectLink = func(w, h string) string { return inspect.Link(inspectBase, w, h) }
		}
	} else {
		inspectBase = inspectURL(ln.Addr(), c.AllowHost)
		opts.InspectLink = func(w, h string) string { return inspect.Link(inspectBase, w, h) }
	}
	upFile, upCfg, err := loadUpstreams(c.Upstreams)
	if err != nil {
		return err
	}
	var ups *upstream.Manager
	if upCfg != nil {
		ups = upstream.New(upstream.Options{Log: log})
		defer ups.Close() // upstream servers stop with stategate
		opts.Upstreams = ups
	}
	g := gate.New(opts)
	mcpSrv := server.NewMCPServer("stategate", version, server.WithInstructions(gate.Instructions), server.WithRecovery())
	if err := g.Bind(mcpSrv); err != nil {
		return err
	}
	loader := &xstate.Loader{Root: c.Machines, Modules: &js.Host{Timeout: c.JSTimeout, Memory: int64(c.JSMemory), Console: log}}
	lib := workflow.NewLibrary(workflow.LibraryOptions{Dir: c.Machines, Loader: loader, HandleKey: c.HandleKey, Logger: log, Serve: g.Reloaded})
	if err := lib.Reload(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped (a signal) while the machines loaded
		}
		return err
	}
	if ups != nil {
		// Servers start in the background; the first tool lists should
		// have their tools, so they get a few seconds.
		ups.Apply(ctx, upCfg)
		ready, cancel := context.WithTimeout(ctx, upstreamsReady)
		_ = ups.Ready(ready)
		cancel()
		for _, s := range ups.Servers() {
			log.Info("upstream", "upstream", s.Name, "up", s.Up, "tools", len(s.Tools), "err", s.Err)
		}
		go func() {
			if err := watch.File(ctx, upFile, watch.Debounce, log, func() { _ = ups.ApplyFile(ctx, upFile) }); err != nil {
				log.Error("not watching the upstreams file", "file", upFile, "err", err)
			}
		}()
	}
	ms := g.Workflows()
	for _, m := range ms {
		log.Info("serving", "machine", m.ID, "file", m.File, "tools", len(m.ToolNames()), "handleKey", m.HandleKey)
	}
	if len(ms) == 0 {
		log.Warn("no machine to serve", "folder", c.Machines)
	}
	go func() {
		err := watch.Tree(ctx, c.Machines, 0, log, func() {
			if err := lib.Reload(ctx); err != nil && !errors.Is(err, context.Canceled) {
				log.Error("reloading machines", "err", err)
			}
		})
		if err != nil {
			log.Error("not watching the machines folder", "err", err)
		}
	}()
	go func() {
		if err := g.RunTimers(ctx); err != nil {
			log.Error("timers stopped", "err", err)
		}
	}()
	go trimWhenIdle(ctx, g.Activity, idleTrimAfter, debug.FreeOSMemory)
	if c.HTTP == "" {
		// A client that goes away closes our stdout: writing to it must be
		// an error to shut down on, not a SIGPIPE that kills the process
		// before the store is closed.
		signal.Ignore(syscall.SIGPIPE)
		log.Info("serving MCP over stdio", "store", where, "cores", runtime.GOMAXPROCS(0))
		if iln != nil {
			defer c.serveInspector(iln, g, inst, lib, pr, token, log)()
		}
		if term.IsTerminal(int(os.Stdin.Fd())) {
			// A person started it, not a client: say what to do next.
			dir, _ := filepath.Abs(c.Machines)
			fmt.Fprintf(os.Stderr, "\nThis is an MCP server: it speaks JSON-RPC on stdin and stdout, for an MCP client to start it. Ctrl-C stops it.\n\n%s\n", nextSteps(dir, false))
			if iln != nil {
				fmt.Fprint(os.Stderr, inspectHint(inspectBase))
			}
		}
		return g.ServeStdio(gate.WithPrincipal(ctx, pr.stdio), os.Stdin, stdout)
	}
	hopts := gate.HTTPOptions{Hosts: append(gate.ListenHosts(ln.Addr()), c.AllowHost...), MaxSessions: c.Sessions, Token: token, Route: c.Route}
	pr.httpOptions(&hopts, c)
	if !loopback(ln.Addr()) && token == "" && pr.verifier == nil {
		log.Warn("serving HTTP on a non-loopback address without authentication: anyone who can reach it can drive every workflow (give --token-file)", "addr", ln.Addr().String())
	}
	h := g.HTTPHandler(hopts)
	// The inspector's pages, behind the checks of /mcp.
	ins := inspect.New(inspect.Options{Instances: inst, Library: lib, Reset: c.InspReset, Principal: gate.PrincipalFrom, ResetRole: pr.resetRole, Logger: log})
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	if pr.verifier != nil {
		mux.Handle(gate.MetadataPath, h.Metadata())
		mux.Handle(gate.MetadataPath+"/mcp", h.Metadata())
	}
	mux.Handle("/", h.Guard(ins))
	// Headers must arrive within 10 s (bodies: gate.DefaultBodyTimeout);
	// an idle keep-alive connection is closed after 2 minutes. There is no
	// write timeout: GET streams last.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	srv.RegisterOnShutdown(h.Close)
	srv.RegisterOnShutdown(ins.Close)
	log.Info("serving MCP over Streamable HTTP", "url", fmt.Sprintf("http://%s/mcp", ln.Addr()), "store", where, "cores", runtime.GOMAXPROCS(0))
	log.Info("inspector", "url", inspectBase, "reset", c.InspReset, "resetRole", pr.resetRole)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// inspectURL is the inspector's address as the status tool links to it:
// the listener's address, or, when it listens on every address, the first
// --allow-host name (else localhost).
func inspectURL(a net.Addr, allow []string) string {
	host := a.String()
	if ap, err := netip.ParseAddrPort(host); err == nil && ap.Addr().IsUnspecified() {
		name := "localhost"
		if len(allow) > 0 {
			name = allow[0]
		}
		host = net.JoinHostPort(name, strconv.Itoa(int(ap.Port())))
	}
	return "http://" + host + inspect.Prefix
}

// upstreamsReady is how long serve waits for upstream servers to come up
// before it serves (they keep trying after that).
const upstreamsReady = 10 * time.Second

// loadUpstreams reads the upstreams file: the one given, else
// ./upstreams.json, else upstreams.json in the user's config folder
// (~/.config/stategate on Linux), when there is one. No file, or "none",
// is no upstreams (nil).
func loadUpstreams(flag string) (string, *upstream.Config, error) {
	file := flag
	switch file {
	case "none":
		return "", nil, nil
	case "":
		candidates := []string{"upstreams.json"}
		if dir, err := os.UserConfigDir(); err == nil {
			candidates = append(candidates, filepath.Join(dir, "stategate", "upstreams.json"))
		}
		for _, f := range candidates {
			if _, err := os.Stat(f); err == nil {
				file = f
				break
			}
		}
		if file == "" {
			return "", nil, nil
		}
	}
	cfg, err := upstream.Load(file)
	if err != nil {
		return "", nil, fmt.Errorf("--upstreams: %w", err)
	}
	return file, cfg, nil
}

// openStore opens the store the flags ask for, and says where it is for
// the log.
func (c *serveCmd) openStore(log *slog.Logger) (store.Store, string, error) {
	if c.Store != "" {
		return c.openServeStore(log) // shared.go
	}
	if c.Memory {
		m := store.NewMemory()
		if c.AuditKeep > 0 {
			m.Retention = c.AuditKeep
		}
		return m, "memory (nothing is kept after the server stops)", nil
	}
	minFree := int64(c.MinFree)
	if minFree == 0 {
		minFree = -1 // no reserve
	}
	b, err := badger.Open(c.Data, badger.Options{NoSync: c.NoSync, AuditRetention: c.AuditKeep, MinFree: minFree, SmallTables: c.SmallTables, Logger: log})
	if err != nil {
		return nil, "", err
	}
	return b, c.Data, nil
}

// readToken reads a bearer token: the file's first line.
func readToken(file string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	tok, _, _ := strings.Cut(string(data), "\n")
	if tok = strings.TrimSpace(tok); tok == "" {
		return "", fmt.Errorf("--token-file %s: the first line is empty", file)
	}
	return tok, nil
}

// loopback reports whether a listener's address is a loopback one.
func loopback(a net.Addr) bool {
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && ap.Addr().IsLoopback()
}

// listenAddr binds to 127.0.0.1 unless the address names a host: "8080"
// and ":8080" listen on loopback only.
func listenAddr(a string) string {
	if !strings.Contains(a, ":") {
		return "127.0.0.1:" + a
	}
	if strings.HasPrefix(a, ":") {
		return "127.0.0.1" + a
	}
	return a
}

// idleTrimAfter is how long the server waits, idle after work, before it
// gives memory back to the system.
const idleTrimAfter = 30 * time.Second

// trimWhenIdle calls trim once the gate has been idle for a whole tick of
// `after` (so between one and two ticks after it last worked), and again
// only after more work: a burst of calls
// grows the Go heap (Badger's compactions most), which Go would otherwise
// keep while the server waits for its next client.
func trimWhenIdle(ctx context.Context, activity func() uint64, after time.Duration, trim func()) {
	t := time.NewTicker(after)
	defer t.Stop()
	last, trimmed := activity(), true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := activity()
		switch {
		case now != last:
			last, trimmed = now, false
		case !trimmed:
			trim()
			trimmed = true
		}
	}
}

// procsFor returns the GOMAXPROCS that serve sets (0: leave Go's): the
// --procs flag when given, else Go's choice when the GOMAXPROCS variable
// makes it, else half the cores Go would use (avail), at least one. A
// local MCP server shares its machine with the clients that call it (and
// the agents behind them): on a two-core machine shared with a load
// generator, the server on one core answered 12% more calls per second at
// 64 sessions (median of five alternating runs) and a single session
// sooner, as Go's idle threads no longer spin on the core the clients
// need.
func procsFor(flag int, env string, avail int) int {
	switch {
	case flag > 0:
		return flag
	case env != "":
		return 0
	default:
		return max(1, avail/2)
	}
}
