package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/inspect"
	"github.com/stategate/stategate/workflow"
)

// serve --inspect ADDR: the inspector's pages on a port of their own
// beside a stdio server, for the desktop clients that start stategate
// over stdio (Claude Desktop, Cursor, VS Code): their user watches the
// workflows live in a browser while the client drives them.
//
// The port serves the inspector only (no /mcp: the client's channel is
// stdio), behind the checks of --http's port (gate.HTTPHandler.Guard):
// its Host must name the server (loopback names, its address,
// --allow-host), no other origin's page may load it or post to it, and
// with --token-file or --auth-issuer every request carries the token (a
// browser once as ?token=, then a cookie). With --http the inspector is
// on that port already: --inspect is refused there rather than serving
// the same pages twice behind the same checks.

// listenInspect checks --inspect against the other flags and listens on
// its address (127.0.0.1 unless it names a host), before the store is
// opened: a mistake or a busy port leaves no store behind. Without
// --inspect it returns nil.
func (c *serveCmd) listenInspect() (net.Listener, error) {
	if c.Inspect == "" {
		return nil, nil
	}
	if c.HTTP != "" {
		return nil, fmt.Errorf("--inspect is for a stdio server: with --http the inspector is served at http://%s/inspect already", listenAddr(c.HTTP))
	}
	ln, err := net.Listen("tcp", listenAddr(c.Inspect))
	if err != nil {
		return nil, fmt.Errorf("--inspect %s: %w", c.Inspect, err)
	}
	return ln, nil
}

// serveInspector serves the inspector on ln beside stdio, behind the
// checks --http's port has, until the returned stop is called: it shuts
// the pages down (their event streams ended) and waits. The token is
// --token-file's ("" for none); stdio's principal is the agent whose
// view of the tools the pages give.
func (c *serveCmd) serveInspector(ln net.Listener, g *gate.Gate, inst *workflow.Instances, lib *workflow.Library, pr principals, token string, log *slog.Logger) (stop func()) {
	hopts := gate.HTTPOptions{Hosts: append(gate.ListenHosts(ln.Addr()), c.AllowHost...), Token: token}
	pr.httpOptions(&hopts, c)
	if !loopback(ln.Addr()) && token == "" && pr.verifier == nil {
		log.Warn("serving the inspector on a non-loopback address without authentication: anyone who can reach it can read every workflow (give --token-file)", "addr", ln.Addr().String())
	}
	// The handler of /mcp is made for its checks only: nothing routes
	// to it.
	guard := g.HTTPHandler(hopts)
	caller := pr.stdio
	ins := inspect.New(inspect.Options{Instances: inst, Library: lib, Reset: c.InspReset, Principal: gate.PrincipalFrom, ResetRole: pr.resetRole, Caller: &caller, Logger: log})
	// Headers must arrive within 10 s; an idle keep-alive connection is
	// closed after 2 minutes. There is no write timeout: event streams
	// last.
	srv := &http.Server{Handler: guard.Guard(ins), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	srv.RegisterOnShutdown(ins.Close)
	srv.RegisterOnShutdown(guard.Close)
	log.Info("inspector", "url", inspectURL(ln.Addr(), c.AllowHost), "reset", c.InspReset, "resetRole", pr.resetRole)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("the inspector stopped; MCP over stdio goes on", "err", err)
		}
	}()
	return func() {
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shut); err != nil {
			log.Warn("the inspector did not shut down in time", "err", err)
		}
		<-done
	}
}

// inspectHint is what serve on a terminal says of the inspector beside
// stdio.
func inspectHint(base string) string {
	return fmt.Sprintf("The inspector is at %s: open it to watch the workflows live.\n", base)
}
