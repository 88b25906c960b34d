package mcpproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// backend answers with its name; an initialize (no session id) gets a
// session id of its own: routed ("NAME.n") or not ("n").
func backend(t *testing.T, name string, routed bool) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get(sessionHeader) == "" && strings.Contains(string(body), "initialize") {
			id := "42" + name
			if routed {
				id = name + ".42"
			}
			w.Header().Set(sessionHeader, id)
		}
		io.WriteString(w, name+" "+string(body))
	}))
	t.Cleanup(s.Close)
	return s
}

func TestProxy(t *testing.T) {
	a, b := backend(t, "a", true), backend(t, "b", false)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	p, err := New(Backend{Name: "a", URL: a.URL}, Backend{Name: "b", URL: b.URL}, Backend{Name: "c", URL: dead.URL})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	defer front.Close()
	post := func(session, body string) (string, string, int) {
		req, _ := http.NewRequest(http.MethodPost, front.URL+"/mcp", strings.NewReader(body))
		if session != "" {
			req.Header.Set(sessionHeader, session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		return string(got), resp.Header.Get(sessionHeader), resp.StatusCode
	}
	// In turn, past the one that cannot be reached (the body sent again).
	seen := map[string]int{}
	for range 6 {
		got, _, code := post("", "call")
		if code != 200 || !strings.HasSuffix(got, " call") {
			t.Fatalf("%d %q", code, got)
		}
		seen[got[:1]]++
	}
	if seen["a"] != 3 || seen["b"] != 3 || p.Redialed.Load() == 0 {
		t.Fatalf("spread %v, redialed %d", seen, p.Redialed.Load())
	}
	// Sessions go back where they were made: by route, or as learned.
	var ids []string
	for range 4 {
		_, id, _ := post("", "initialize")
		ids = append(ids, id)
	}
	for _, id := range ids {
		want := "a"
		if !strings.Contains(id, ".") {
			want = "b"
		}
		for range 3 {
			if got, _, _ := post(id, "x"); !strings.HasPrefix(got, want+" ") {
				t.Fatalf("session %s went to %q", id, got)
			}
		}
	}
	if _, _, code := post("c.1", "x"); code != http.StatusNotFound {
		t.Fatalf("a session of a replica that cannot be reached: %d", code)
	}
	if _, _, code := post("nobody", "x"); code != http.StatusNotFound {
		t.Fatalf("an unknown session: %d", code)
	}
}
