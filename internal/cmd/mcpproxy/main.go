// Command mcpproxy serves internal/mcpproxy in front of stategate
// replicas, for scripts/compare-replicas.sh:
//
//	go run ./internal/cmd/mcpproxy -listen 127.0.0.1:3110 \
//	    -backend a=http://127.0.0.1:3111 -backend b=http://127.0.0.1:3112
//
// Each -backend is NAME=URL, NAME the replica's serve --route (sessions
// go back to the replica their id's prefix names; empty: learned from
// initialize's answers). It logs nothing but its address and errors, and
// runs until interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/stategate/stategate/internal/mcpproxy"
)

type backends []mcpproxy.Backend

func (b *backends) String() string { return fmt.Sprint(*b) }

func (b *backends) Set(v string) error {
	name, u, ok := strings.Cut(v, "=")
	if !ok {
		name, u = "", v
	}
	*b = append(*b, mcpproxy.Backend{Name: name, URL: u})
	return nil
}

func main() {
	var bs backends
	listen := flag.String("listen", "127.0.0.1:3110", "address to listen on")
	flag.Var(&bs, "backend", "a replica, NAME=URL (repeatable)")
	flag.Parse()
	p, err := mcpproxy.New(bs...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "mcpproxy: listening on", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Handler: p}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
