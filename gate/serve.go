package gate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
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
	var errs []error
	for _, f := range files {
		m, warns, err := LoadMachine(l, f, handleKey)
		for _, w := range warns {
			log.Warn(w.String())
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ms = append(ms, m)
	}
	return ms, errs
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

// HTTPHandler serves MCP over Streamable HTTP at /mcp. Session ids are
// ones this process issued (an unknown or old id gets 404, so the client
// starts a new session); the protocol is pinned to the session-based
// revisions (up to 2025-11-25), since tool lists are per session; requests
// from a foreign Origin are refused.
func (g *Gate) HTTPHandler() http.Handler {
	ids := &sessionIDs{live: map[string]bool{}}
	h := server.NewStreamableHTTPServer(g.srv,
		server.WithEndpointPath("/mcp"),
		server.WithSessionIdManager(ids),
		server.WithStreamableHTTPProtocolVersions(mcp.LegacyProtocolVersions()...),
		server.WithStreamableHTTPLogger(g.log),
	)
	mux := http.NewServeMux()
	mux.Handle("/mcp", oneWrite(h))
	return originGuard(mux)
}

// oneWrite makes a POST's response go out in one write when the handler
// ends. mcp-go flushes each event of a response it upgraded to SSE (a
// list_changed notification, then the result), which costs a write, a
// chunk and a wakeup each; the gate's calls end promptly and ask nothing
// of the client, so the notification loses nothing by going out with the
// result. GET streams are left alone: they must flush as they go.
func oneWrite(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w = deferredFlush{w}
		}
		next.ServeHTTP(w, r)
	})
}

// deferredFlush is a ResponseWriter whose Flush waits for the handler to
// end (net/http then writes what is buffered, with a Content-Length when
// it is small).
type deferredFlush struct{ http.ResponseWriter }

func (deferredFlush) Flush() {}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (d deferredFlush) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// sessionIDs issues session ids and knows which are live.
type sessionIDs struct {
	mu   sync.Mutex
	live map[string]bool
}

func (s *sessionIDs) Generate() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	s.mu.Lock()
	s.live[id] = true
	s.mu.Unlock()
	return id
}

var errUnknownSession = errors.New("unknown session")

func (s *sessionIDs) Validate(id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.live[id] {
		return false, errUnknownSession
	}
	return false, nil
}

func (s *sessionIDs) Terminate(id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, id)
	return false, nil
}

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
