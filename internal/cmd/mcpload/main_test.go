package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeServer is a small MCP server over Streamable HTTP: enough of the
// protocol for mcpload, strict about the headers a client must send, and
// counting what it was sent. Tools by name:
//
//	ok_json    a result as application/json
//	ok_sse     a result in an event stream, between notifications, with a
//	           comment, CRLF line ends and the answer over two data lines
//	is_error   a result with isError
//	rpc_error  a JSON-RPC error
//	http_500   HTTP 500
//	malformed  a body that is not JSON
//	slow       no answer until the client gives up
type fakeServer struct {
	version string // the protocol version it answers initialize with

	mu         sync.Mutex
	sessions   map[string]*fakeSession
	deletes    int
	violations []string // what a client did wrong
}

type fakeSession struct {
	initialized bool
	calls       map[string]int // tools/call by tool name
	okCalls     int
	lists       int
	remotes     map[string]bool // the client's addresses: one per connection
}

func newFakeServer(version string) *fakeServer {
	return &fakeServer{version: version, sessions: map[string]*fakeSession{}}
}

func (f *fakeServer) violate(format string, a ...any) {
	f.violations = append(f.violations, fmt.Sprintf(format, a...))
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	locked := true
	unlock := func() {
		if locked {
			locked = false
			f.mu.Unlock()
		}
	}
	defer unlock()
	sid := r.Header.Get("Mcp-Session-Id")
	if r.Method == http.MethodDelete {
		if f.sessions[sid] == nil {
			f.violate("DELETE of unknown session %q", sid)
			http.Error(w, "unknown session", http.StatusNotFound)
			return
		}
		if v := r.Header.Get("MCP-Protocol-Version"); v != f.version {
			f.violate("DELETE with MCP-Protocol-Version %q", v)
		}
		f.deletes++
		delete(f.sessions, sid)
		return
	}
	if r.Method != http.MethodPost {
		f.violate("method %s", r.Method)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		f.violate("Content-Type %q", ct)
	}
	if a := r.Header.Get("Accept"); !strings.Contains(a, "application/json") || !strings.Contains(a, "text/event-stream") {
		f.violate("Accept %q", a)
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ProtocolVersion string          `json:"protocolVersion"`
			Name            string          `json:"name"`
			Arguments       json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		f.violate("body: %v", err)
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	result := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": v})
	}
	if req.Method == "initialize" {
		if sid != "" || r.Header.Get("MCP-Protocol-Version") != "" {
			f.violate("initialize with session headers")
		}
		if req.Params.ProtocolVersion != "2025-06-18" {
			f.violate("initialize asks for %q", req.Params.ProtocolVersion)
		}
		sid = fmt.Sprintf("session-%d", len(f.sessions)+f.deletes+1)
		f.sessions[sid] = &fakeSession{calls: map[string]int{}, remotes: map[string]bool{r.RemoteAddr: true}}
		w.Header().Set("Mcp-Session-Id", sid)
		result(map[string]any{"protocolVersion": f.version, "capabilities": map[string]any{"tools": map[string]any{}}, "serverInfo": map[string]any{"name": "fake", "version": "0"}})
		return
	}
	s := f.sessions[sid]
	if s == nil {
		f.violate("%s with session %q", req.Method, sid)
		http.Error(w, "unknown session", http.StatusNotFound)
		return
	}
	s.remotes[r.RemoteAddr] = true
	if v := r.Header.Get("MCP-Protocol-Version"); v != f.version {
		f.violate("%s with MCP-Protocol-Version %q", req.Method, v)
		http.Error(w, "bad protocol version", http.StatusBadRequest)
		return
	}
	switch req.Method {
	case "notifications/initialized":
		s.initialized = true
		w.WriteHeader(http.StatusAccepted)
		return
	case "tools/list":
		s.lists++
		result(map[string]any{"tools": []any{map[string]any{"name": "ok_json"}}})
		return
	case "tools/call":
	default:
		f.violate("method %q", req.Method)
		http.Error(w, "unknown method", http.StatusBadRequest)
		return
	}
	if !s.initialized {
		f.violate("tools/call before notifications/initialized")
	}
	if string(req.Params.Arguments) != `{"reason":"fix it"}` {
		f.violate("arguments %s", req.Params.Arguments)
	}
	s.calls[req.Params.Name]++
	switch req.Params.Name {
	case "ok_json":
		s.okCalls++
		result(map[string]any{"content": []any{map[string]any{"type": "text", "text": "ok"}}})
	case "ok_sse":
		s.okCalls++
		w.Header().Set("Content-Type", "text/event-stream")
		answer := fmt.Sprintf("{\"jsonrpc\":\"2.0\",\r\ndata: \"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}}", req.ID)
		fmt.Fprint(w, ": a comment\r\n\r\n")
		fmt.Fprint(w, "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\r\n\r\n")
		fmt.Fprintf(w, "id: 7\r\nevent: message\r\ndata: %s\r\n\r\n", answer)
		fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"after\"}}\r\n\r\n")
	case "is_error":
		result(map[string]any{"isError": true, "content": []any{map[string]any{"type": "text", "text": "no such state"}}})
	case "rpc_error":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"unknown tool"}}`, req.ID)
	case "http_500":
		http.Error(w, "it broke", http.StatusInternalServerError)
	case "malformed":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":`)
	case "slow":
		unlock()
		<-r.Context().Done()
	default:
		result(map[string]any{"isError": true, "content": []any{map[string]any{"type": "text", "text": "unknown tool " + req.Params.Name}}})
	}
}

func runLoad(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errw bytes.Buffer
	code = run(context.Background(), args, &out, &errw)
	return code, out.String(), errw.String()
}

func parseLine(t *testing.T, stdout string) line {
	t.Helper()
	if strings.Count(stdout, "\n") != 1 {
		t.Fatalf("stdout %q, want one line", stdout)
	}
	var l line
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		t.Fatalf("stdout %q: %v", stdout, err)
	}
	return l
}

func TestLoad(t *testing.T) {
	f := newFakeServer("2025-03-26") // a version other than the one asked: later requests carry this one
	srv := httptest.NewServer(f)
	defer srv.Close()
	const sessions, duration = 3, 300 * time.Millisecond
	code, stdout, stderr := runLoad(t, "-url", srv.URL, "-sessions", fmt.Sprint(sessions),
		"-duration", duration.String(), "-warmup", "0s", "-cycle", "ok_json, ok_sse",
		"-args", `{"reason":"fix it"}`, "-list-every", "3")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	l := parseLine(t, stdout)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.violations) > 0 {
		t.Errorf("the server saw: %q", f.violations)
	}
	if f.deletes != sessions || len(f.sessions) != 0 {
		t.Errorf("%d sessions deleted, %d left, want %d and none", f.deletes, len(f.sessions), sessions)
	}
	if l.Sessions != sessions || l.Errors != 0 {
		t.Errorf("line %+v: want %d sessions and no errors", l, sessions)
	}
	if l.Calls == 0 || l.CallsPerS != math.Round(float64(l.Calls)/duration.Seconds()*10)/10 {
		t.Errorf("calls %d, calls_per_s %v: want some, and calls over the duration", l.Calls, l.CallsPerS)
	}
	if !(0 < l.P50us && l.P50us <= l.P90us && l.P90us <= l.P99us && l.P99us <= l.MaxUs) || l.ListP50us <= 0 {
		t.Errorf("line %+v: want 0 < p50 <= p90 <= p99 <= max and a list_p50", l)
	}
}

// With no warm-up, every successful call but the last of each session
// (which may end after the window) is counted; every session keeps one
// connection; the cycle and the lists go as asked.
func TestLoadCounts(t *testing.T) {
	f := newFakeServer("2025-06-18")
	var seen []*fakeSession
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete { // keep the session's counts for the test
			f.mu.Lock()
			if s := f.sessions[r.Header.Get("Mcp-Session-Id")]; s != nil {
				seen = append(seen, s)
			}
			f.mu.Unlock()
		}
		f.ServeHTTP(w, r)
	}))
	defer srv.Close()
	const sessions = 4
	code, stdout, stderr := runLoad(t, "-url", srv.URL, "-sessions", fmt.Sprint(sessions),
		"-duration", "250ms", "-warmup", "0s", "-cycle", "ok_sse,ok_json,ok_json",
		"-args", `{"reason":"fix it"}`, "-list-every", "4")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	l := parseLine(t, stdout)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.violations) > 0 {
		t.Errorf("the server saw: %q", f.violations)
	}
	if len(seen) != sessions {
		t.Fatalf("%d sessions ended with DELETE, want %d", len(seen), sessions)
	}
	served := 0
	addrs := map[string]bool{}
	for i, s := range seen {
		served += s.okCalls
		if len(s.remotes) != 1 {
			t.Errorf("session %d came over %d connections, want 1", i, len(s.remotes))
		}
		for a := range s.remotes {
			if addrs[a] {
				t.Errorf("session %d shares connection %s", i, a)
			}
			addrs[a] = true
		}
		// The cycle in order: ok_sse once for every two ok_json, give or
		// take the last round.
		if sse, js := s.calls["ok_sse"], s.calls["ok_json"]; js < 2*(sse-1) || js > 2*sse {
			t.Errorf("session %d: %d ok_sse and %d ok_json calls, want the cycle", i, sse, js)
		}
		// A list after every 4 calls, but not once the window is over.
		if want := s.okCalls / 4; s.lists != want && s.lists != want-1 {
			t.Errorf("session %d: %d lists after %d calls, want %d", i, s.lists, s.okCalls, want)
		}
	}
	if l.Calls > served || l.Calls < served-sessions {
		t.Errorf("%d calls counted, the server answered %d: want at most one a session uncounted", l.Calls, served)
	}
}

// slowTimeout is the -timeout of the slow tool's case. It bounds every
// request of the run, not only the slow tool's, so it must be far longer
// than a request to the local fake server takes on a loaded machine (the
// slow tool never answers, so any value makes it fail); the case's window
// is as long, so that its first ok_json call lands in it.
const slowTimeout = 2 * time.Second

func TestLoadFailures(t *testing.T) {
	tests := []struct {
		tool, want string
		// extra flags: the slow tool's case times out each request after
		// slowTimeout, with no warm-up and a window as long.
		extra []string
	}{
		{tool: "is_error", want: "tools/call is_error: isError: no such state"},
		{tool: "rpc_error", want: "JSON-RPC error -32602: unknown tool"},
		{tool: "http_500", want: "HTTP 500: it broke"},
		{tool: "malformed", want: "malformed JSON body"},
		{tool: "slow", want: "context deadline exceeded", extra: []string{
			"-timeout", slowTimeout.String(), "-duration", slowTimeout.String(), "-warmup", "0s"}},
		{tool: "missing", want: "unknown tool missing"},
	}
	for _, tc := range tests {
		t.Run(tc.tool, func(t *testing.T) {
			f := newFakeServer("2025-06-18")
			var failed int
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodDelete {
					f.mu.Lock()
					if s := f.sessions[r.Header.Get("Mcp-Session-Id")]; s != nil {
						failed += s.calls[tc.tool]
					}
					f.mu.Unlock()
				}
				f.ServeHTTP(w, r)
			}))
			defer srv.Close()
			args := []string{"-url", srv.URL, "-sessions", "2", "-duration", "150ms", "-warmup", "50ms",
				"-cycle", "ok_json," + tc.tool, "-args", `{"reason":"fix it"}`, "-list-every", "2"}
			args = append(args, tc.extra...) // the later of a repeated flag counts
			code, stdout, stderr := runLoad(t, args...)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			l := parseLine(t, stdout)
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.violations) > 0 {
				t.Errorf("the server saw: %q", f.violations)
			}
			if failed == 0 || l.Errors != failed {
				t.Errorf("%d errors counted, the server had %d calls of %s (warm-up included): want them all", l.Errors, failed, tc.tool)
			}
			if l.Calls == 0 {
				t.Errorf("no successful calls counted: %s", stdout)
			}
			if !strings.Contains(stderr, fmt.Sprintf("mcpload: %d failed requests; first: ", l.Errors)) || !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q, want the count and %q", stderr, tc.want)
			}
		})
	}
}

func TestOpenFails(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not today", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	code, stdout, stderr := runLoad(t, "-url", srv.URL, "-sessions", "2", "-cycle", "a")
	if code != 1 || stdout != "" {
		t.Errorf("exit %d, stdout %q: want 1 and no line", code, stdout)
	}
	if !strings.Contains(stderr, "session 0: initialize: HTTP 503: not today") {
		t.Errorf("stderr %q, want the session and the status", stderr)
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{}, "-cycle"},
		{[]string{"-cycle", " , "}, "-cycle"},
		{[]string{"-cycle", "a", "-args", "[1]"}, "-args"},
		{[]string{"-cycle", "a", "-args", "null"}, "-args"},
		{[]string{"-cycle", "a", "-sessions", "0"}, "-sessions"},
		{[]string{"-cycle", "a", "-duration", "0s"}, "-duration"},
		{[]string{"-cycle", "a", "-warmup", "-1s"}, "-warmup"},
		{[]string{"-cycle", "a", "-list-every", "-1"}, "-list-every"},
		{[]string{"-cycle", "a", "-timeout", "0s"}, "-timeout"},
		{[]string{"-cycle", "a", "extra"}, "extra"},
		{[]string{"-nonsense"}, "-nonsense"},
	}
	for _, tc := range tests {
		code, stdout, stderr := runLoad(t, tc.args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q: want 2 and a message naming %s", tc.args, code, stdout, stderr, tc.want)
		}
	}
	if code, _, stderr := runLoad(t, "-h"); code != 0 || !strings.Contains(stderr, "-list-every") {
		t.Errorf("-h: exit %d, stderr %q: want 0 and the flags", code, stderr)
	}
}

func TestPercentile(t *testing.T) {
	us := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Microsecond+999*time.Nanosecond) // rounded down
		}
		return d
	}
	tests := []struct {
		samples []time.Duration
		p       float64
		want    int64
	}{
		{nil, 50, 0},
		{us(7), 50, 7},
		{us(7), 99, 7},
		{us(1, 2), 50, 1},
		{us(1, 2, 3, 4), 50, 2},
		{us(1, 2, 3, 4), 51, 3},
		{us(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 90, 9},
		{us(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10},
		{us(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 100, 10},
		{us(1, 2, 3), 0, 1},
	}
	for _, tc := range tests {
		if got := percentile(tc.samples, tc.p); got != tc.want {
			t.Errorf("percentile(%v, %v) = %d, want %d", tc.samples, tc.p, got, tc.want)
		}
	}
}

// Requests that end before the window or after it are not sampled;
// failures count whenever they happen, and the first one is kept.
func TestTally(t *testing.T) {
	t0 := time.Now()
	w := window{start: t0.Add(time.Second), end: t0.Add(2 * time.Second)}
	var tl tally
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tl.note(w, &tl.calls, "a", at(900), at(999), nil)             // in the warm-up
	tl.note(w, &tl.calls, "a", at(990), at(1000), nil)            // at the start
	tl.note(w, &tl.calls, "a", at(1500), at(1600), nil)           // inside
	tl.note(w, &tl.calls, "a", at(1990), at(2000), nil)           // at the end
	tl.note(w, &tl.calls, "a", at(1990), at(2001), nil)           // after
	tl.note(w, &tl.calls, "a", at(100), at(200), errors.New("x")) // a failure in the warm-up
	tl.note(w, &tl.lists, "b", at(1100), at(1130), errors.New("y"))
	want := []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, 10 * time.Millisecond}
	if !slices.Equal(tl.calls, want) || tl.lists != nil {
		t.Errorf("calls %v, lists %v: want %v and none", tl.calls, tl.lists, want)
	}
	if tl.errors != 2 || tl.first != "a: x" {
		t.Errorf("errors %d, first %q: want 2 and %q", tl.errors, tl.first, "a: x")
	}
	// The earliest failure of all sessions is the one reported.
	later := &tally{errors: 1, first: "late", firstAt: at(5000)}
	s := summarize(&options{sessions: 2, duration: time.Second}, []*tally{later, &tl})
	if s.first != "a: x" || s.line.Errors != 3 || s.line.Calls != 3 || s.line.CallsPerS != 3 || s.line.P50us != 10000 || s.line.MaxUs != 100000 {
		t.Errorf("summary %+v", s)
	}
}

func TestEventReader(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"one event", "data: {\"a\":1}\n\n", []string{`{"a":1}`}},
		{"two data lines", "data: {\"a\":\ndata: 1}\n\n", []string{"{\"a\":\n1}"}},
		{"CRLF, fields, comments", ": hi\r\n\r\nevent: message\r\nid: 3\r\ndata:x\r\nretry: 10\r\n\r\n", []string{"x"}},
		{"one space taken off", "data:  two\n\n", []string{" two"}},
		{"no empty line at the end", "data: a\n\ndata: b", []string{"a", "b"}},
		{"no data", "event: ping\n\n: only a comment\n\n", nil},
		{"empty data", "data\n\ndata:\n\n", []string{"", ""}},
		{"nothing", "", nil},
	}
	for _, tc := range tests {
		e := newEventReader(strings.NewReader(tc.in))
		var got []string
		for {
			d, err := e.next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			got = append(got, string(d))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: events %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestAnswers(t *testing.T) {
	tests := []struct {
		name, body string
		stream     bool
		wantErr    string
		wantResult string
	}{
		{name: "json", body: `{"jsonrpc":"2.0","id":5,"result":{"x":1}}`, wantResult: `{"x":1}`},
		{name: "json string id", body: `{"jsonrpc":"2.0","id":"5","result":{}}`, wantResult: `{}`},
		{name: "json other id", body: `{"jsonrpc":"2.0","id":4,"result":{}}`, wantErr: "an answer to id 4, want 5"},
		{name: "batch", body: `[{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":5,"result":[]}]`, wantResult: `[]`},
		{name: "batch without", body: `[{"jsonrpc":"2.0","id":4,"result":[]}]`, wantErr: "no answer to id 5"},
		{name: "json broken", body: `{"id":5,`, wantErr: "malformed JSON body"},
		{name: "stream", stream: true, body: "data: {\"method\":\"n\",\"id\":5}\n\ndata: {\"id\":5,\"result\":true}\n\ndata: {\"method\":\"after\"}\n\n", wantResult: `true`},
		{name: "stream without", stream: true, body: "data: {\"method\":\"n\"}\n\n", wantErr: "ended with no answer to id 5"},
		{name: "stream broken", stream: true, body: "data: {\"id\":\n\n", wantErr: "malformed event data"},
	}
	for _, tc := range tests {
		read := answerFromJSON
		if tc.stream {
			read = answerFromStream
		}
		m, err := read(strings.NewReader(tc.body), "5")
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case string(m.Result) != tc.wantResult:
			t.Errorf("%s: result %s, want %s", tc.name, m.Result, tc.wantResult)
		}
	}
}
