package gate

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/mark3labs/mcp-go/server"

	"stategate/xstate"
)

// LoadDir loads every machine file under dir (subfolders included; dot
// folders, dotfiles, backups, cases and implementations modules skipped).
// A file that fails is reported and skipped, so one broken file does not
// keep the others from being served.
func LoadDir(l *xstate.Loader, dir, handleKey string, log *slog.Logger) ([]*Machine, []error) {
	files, err := machineFiles(dir)
	if err != nil {
		return nil, []error{err}
	}
	var ms []*Machine
	errs := map[string]error{}
	for _, f := range files {
		m, warns, err := LoadMachine(l, f, handleKey)
		for _, w := range warns {
			log.Warn(w.String())
		}
		if errors.Is(err, xstate.ErrNoMachine) {
			continue // a helper module
		}
		if err != nil {
			errs[f] = err
			continue
		}
		ms = append(ms, m)
	}
	// A file another machine is built from is part of it (as Reload).
	imported := importedBy(ms)
	var out []*Machine
	for _, m := range ms {
		if !imported[absPath(m.File)] {
			out = append(out, m)
		}
	}
	var errList []error
	for _, f := range files {
		if err := errs[f]; err != nil && !imported[absPath(f)] {
			errList = append(errList, err)
		}
	}
	return out, errList
}

// ServeStdio serves MCP over standard input and output until ctx ends or
// the input closes.
func (g *Gate) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	s := server.NewStdioServer(g.srv)
	s.SetErrorLogger(slog.NewLogLogger(g.log.Handler(), slog.LevelError))
	err := s.Listen(ctx, in, out)
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// HTTPHandler serves MCP over Streamable HTTP at /mcp (see httpTransport).
// Session ids are ones this process issued (an unknown or old id gets 404,
// so the client starts a new session); the protocol is pinned to the
// session-based revisions (up to 2025-11-25), since tool lists are per
// session; requests from a foreign Origin are refused. Close it when the
// HTTP server shuts down, so that its streams end.
func (g *Gate) HTTPHandler() *HTTPHandler {
	t := newHTTPTransport(g.srv, g.log, g)
	mux := http.NewServeMux()
	mux.Handle("/mcp", t)
	return &HTTPHandler{h: originGuard(mux), t: t}
}

// HTTPHandler is the gate's Streamable HTTP endpoint.
type HTTPHandler struct {
	h http.Handler
	t *httpTransport
}

func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.h.ServeHTTP(w, r) }

// Close ends every session and its stream, and refuses new sessions.
func (h *HTTPHandler) Close() { h.t.Close() }

// originGuard refuses requests whose Origin is not the server's own host
// or a loopback host: a web page elsewhere may not drive local tools.
func originGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && !allowedOrigin(o, r.Host) {
			http.Error(w, "Forbidden: foreign Origin", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func allowedOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, host) {
		return true
	}
	h := u.Hostname()
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
