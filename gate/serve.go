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
)

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
