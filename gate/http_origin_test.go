package gate_test

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stategate/stategate/gate"
)

// TestOriginIsTheServers: a request from a browser page (it has an Origin)
// is served only when the page is the server's own origin: scheme, host
// and port of the request's Host. A page on another port of the same
// host is same-site to a browser, but another server.
func TestOriginIsTheServers(t *testing.T) {
	mcpURL, _ := serveHTTP(t, nil, gate.HTTPOptions{Hosts: []string{"workflows.example"}})
	host := hostOf(t, mcpURL)
	_, port, _ := net.SplitHostPort(host)
	init := strings.Replace(initBody, "%s", "2025-06-18", 1)
	for _, c := range []struct {
		host, origin, proto string
		want                int
	}{
		{host, "http://" + host, "", http.StatusOK},
		{host, "", "", http.StatusOK}, // not a browser
		{host, "http://127.0.0.1:1", "", http.StatusForbidden},
		{host, "http://127.0.0.1", "", http.StatusForbidden},
		{host, "https://" + host, "", http.StatusForbidden},
		{host, "http://localhost:" + port, "", http.StatusForbidden},
		{host, "null", "", http.StatusForbidden},
		{"localhost:" + port, "http://localhost:" + port, "", http.StatusOK},
		{"LocalHost:" + port, "http://localhost:" + port, "", http.StatusOK},
		{"[::1]:" + port, "http://[::1]:" + port, "", http.StatusOK},
		// Behind a proxy that passes the Host on: the scheme's default port.
		{"workflows.example", "http://workflows.example", "", http.StatusOK},
		{"workflows.example", "http://workflows.example:80", "", http.StatusOK},
		{"workflows.example", "https://workflows.example", "", http.StatusForbidden},
		{"workflows.example", "https://workflows.example", "https", http.StatusOK},
		{"workflows.example", "http://workflows.example", "https", http.StatusForbidden},
		{"workflows.example", "https://workflows.example:8443", "https", http.StatusForbidden},
	} {
		req, _ := http.NewRequest(http.MethodPost, mcpURL, strings.NewReader(init))
		req.Host = c.host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		if c.proto != "" {
			req.Header.Set("X-Forwarded-Proto", c.proto)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Errorf("Host %s, Origin %q, X-Forwarded-Proto %q: %s, want %d", c.host, c.origin, c.proto, res.Status, c.want)
		}
	}
}
