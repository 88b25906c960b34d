// Package mcpproxy is a small reverse proxy in front of stategate
// replicas (net/http/httputil's ReverseProxy), for the cluster test and
// the benchmarks: what an operator's HAProxy or nginx does
// (docs/replicas.md). A request that carries an Mcp-Session-Id goes to
// the replica that holds the session: the one its --route prefix names
// (gate.RouteOf), else the one that issued it (learned from the answers to
// initialize); one without (an initialize, or any request of revision
// 2026-07-28) goes to the replicas in turn, and to the next one when a
// replica cannot be reached (nothing was sent to it). A session whose
// replica cannot be reached is answered 404, as its replica's death ended
// it (the client starts a new one). Streams (SSE) pass as they come.
//
// It knows nothing of MCP beyond that header, and nothing of stategate
// beyond the shape of a routed session id.
package mcpproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// sessionHeader is MCP's session header.
const sessionHeader = "Mcp-Session-Id"

// maxBody bounds a request's body: it is kept to be sent again to the
// next replica when one cannot be reached.
const maxBody = 8 << 20

// A Backend is a replica: its route name (serve --route; "" for none) and
// its base URL (http://host:port).
type Backend struct {
	Name string
	URL  string
}

// Proxy routes MCP requests to replicas.
type Proxy struct {
	rp   *httputil.ReverseProxy
	next atomic.Uint64

	mu       sync.Mutex
	backends []*url.URL
	down     []time.Time // a backend that could not be dialled is passed over until then
	names    map[string]int
	sessions map[string]int // session id: the backend that issued it

	// Counts of what it did.
	Requests, Redialed atomic.Uint64
}

// New makes a proxy in front of backends.
func New(backends ...Backend) (*Proxy, error) {
	if len(backends) == 0 {
		return nil, errors.New("mcpproxy: no backend")
	}
	p := &Proxy{names: map[string]int{}, sessions: map[string]int{}}
	for i, b := range backends {
		u, err := url.Parse(b.URL)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("mcpproxy: backend %q: not a URL", b.URL)
		}
		p.backends = append(p.backends, u)
		p.down = append(p.down, time.Time{})
		if b.Name != "" {
			p.names[b.Name] = i
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	p.rp = &httputil.ReverseProxy{
		Rewrite:        func(r *httputil.ProxyRequest) {}, // the transport picks the backend
		Transport:      &redial{p: p, tr: tr},
		FlushInterval:  -1,
		ModifyResponse: p.learn,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Header.Get(sessionHeader) != "" && dialFailed(err) {
				// Its replica is gone, and the session with it: the
				// client starts a new one, as MCP says of a 404.
				http.Error(w, "Not Found: the replica that held this session is gone", http.StatusNotFound)
				return
			}
			http.Error(w, "Bad Gateway: "+err.Error(), http.StatusBadGateway)
		},
	}
	return p, nil
}

// SetBackend points a backend at a new URL (a replica started again on
// another port); the sessions it issued are forgotten.
func (p *Proxy) SetBackend(i int, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("mcpproxy: backend %q: not a URL", rawURL)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backends[i], p.down[i] = u, time.Time{}
	for id, b := range p.sessions {
		if b == i {
			delete(p.sessions, id)
		}
	}
	return nil
}

// backendKey carries the backend a request is sent to, in its context.
type backendKey struct{}

// sticky returns the backend of a session id, -1 when none is known.
func (p *Proxy) sticky(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if route, _, ok := strings.Cut(id, "."); ok {
		if i, ok := p.names[route]; ok {
			return i
		}
	}
	if i, ok := p.sessions[id]; ok {
		return i
	}
	return -1
}

func (p *Proxy) backend(i int) *url.URL {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.backends[i]
}

// order returns the backends to try a request without a session on, the
// next in turn first, those that could not be dialled lately last.
func (p *Proxy) order() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	var up, down []int
	for i := range p.backends {
		if now.Before(p.down[i]) {
			down = append(down, i)
		} else {
			up = append(up, i)
		}
	}
	if len(up) > 0 {
		k := int(p.next.Add(1) % uint64(len(up)))
		up = append(up[k:], up[:k]...)
	}
	return append(up, down...)
}

// failed marks a backend that could not be dialled.
func (p *Proxy) failed(i int) {
	p.mu.Lock()
	p.down[i] = time.Now().Add(passOver)
	p.mu.Unlock()
}

// passOver is how long a backend that could not be dialled is tried last.
const passOver = time.Second

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.Requests.Add(1)
	first := -1
	if id := r.Header.Get(sessionHeader); id != "" {
		if first = p.sticky(id); first < 0 {
			http.Error(w, "Not Found: no replica holds this session", http.StatusNotFound)
			return
		}
	}
	if r.Body != nil && r.Body != http.NoBody {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil || len(body) > maxBody {
			http.Error(w, "Bad Request: the body cannot be read, or is over 8 MiB", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), backendKey{}, first)))
}

// learn records the replica that issued a session id.
func (p *Proxy) learn(resp *http.Response) error {
	id := resp.Header.Get(sessionHeader)
	if id == "" || resp.Request.Header.Get(sessionHeader) != "" {
		return nil
	}
	if i, ok := resp.Request.Context().Value(sentKey{}).(int); ok {
		p.mu.Lock()
		p.sessions[id] = i
		p.mu.Unlock()
	}
	return nil
}

// sentKey carries the backend a request went to (for learn).
type sentKey struct{}

// redial sends a request to its session's backend, or to the backends in
// turn, to the next one while a backend cannot be dialled.
type redial struct {
	p  *Proxy
	tr *http.Transport
}

func (t *redial) RoundTrip(r *http.Request) (*http.Response, error) {
	p := t.p
	fixed, _ := r.Context().Value(backendKey{}).(int)
	order := []int{fixed}
	if fixed < 0 {
		order = p.order()
	}
	var err error
	for n, i := range order {
		u := p.backend(i)
		out := r.Clone(context.WithValue(r.Context(), sentKey{}, i))
		out.URL.Scheme, out.URL.Host, out.Host = u.Scheme, u.Host, ""
		if n > 0 {
			p.Redialed.Add(1)
			if r.GetBody != nil {
				if out.Body, err = r.GetBody(); err != nil {
					return nil, err
				}
			}
		}
		var resp *http.Response
		resp, err = t.tr.RoundTrip(out)
		if err == nil || !dialFailed(err) {
			return resp, err
		}
		p.failed(i)
	}
	return nil, err
}

// dialFailed reports whether err is a failure to connect: nothing of the
// request was sent.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
