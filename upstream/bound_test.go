package upstream

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	mcpserver "github.com/mark3labs/mcp-go/server"
)

var errOver = errors.New("over")

func TestBoundReaders(t *testing.T) {
	tests := []struct {
		name   string
		events bool // an event stream's body; else a child's lines
		body   bool // a JSON body
		in     string
		read   string // what gets through of one over, read in one piece
		over   bool
		lines  bool // over for the cost of the event's lines
		limit  int  // 10 if 0
	}{
		{name: "lines within", in: "0123456789\nabc\n\n0123456789"},
		{name: "a line over", in: "ab\n0123456789X\nnever", read: "ab\n", over: true},
		{name: "a first line over", in: "0123456789X", read: "", over: true},
		{name: "body within", body: true, in: "0123456789"},
		{name: "body over", body: true, in: "01234\n6789X", over: true},
		{name: "events within, more in all", events: true, in: "data:12\n\ndata:45\r\n\r\ndata:78\n\r\n"},
		{name: "an event of lines over", events: true, in: "data:1\ndata:2\ndata:3\n\n", over: true},
		{name: "an event's line over", events: true, in: "data:12345678\n\n", over: true},
		{name: "a line of \\r is blank", events: true, in: "data:12\n\r\r\ndata:34\n\n"},
		{name: "\\r then text is no blank line", events: true, in: "data:1234\n\rx\ndata:12\n\n", over: true},
		// Lines of 1 byte, with a bound of 1000 bytes: joining 253 of them
		// copies 1+2+...+253 > 32000 bytes, in 506 bytes.
		{name: "an event of too many lines", limit: 1000, events: true, in: strings.Repeat("x\n", 200) + "\n" + strings.Repeat("x\n", 260) + "\n", over: true, lines: true},
		{name: "events of lines within", limit: 1000, events: true, in: strings.Repeat(strings.Repeat("x\n", 250)+"\r\n", 3)},
	}
	for _, tt := range tests {
		for _, oneByte := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/onebyte=%v", tt.name, oneByte), func(t *testing.T) {
				limit := tt.limit
				if limit == 0 {
					limit = 10
				}
				var src io.Reader = strings.NewReader(tt.in)
				if oneByte {
					src = iotest.OneByteReader(src)
				}
				overs := 0
				var gotLines bool
				over := func(lines bool) error { overs++; gotLines = lines; return errOver }
				var r io.Reader
				if tt.events || tt.body {
					r = &boundBody{ReadCloser: io.NopCloser(src), limit: limit, over: over, events: tt.events}
				} else {
					r = &lines{r: src, limit: limit, over: over}
				}
				got, err := io.ReadAll(r)
				if !tt.over {
					if err != nil || string(got) != tt.in || overs != 0 {
						t.Fatalf("read %q, %v (over called %d times), want all of it", got, err, overs)
					}
					return
				}
				if overs != 1 || gotLines != tt.lines {
					t.Fatalf("over called %d times (lines: %v), want once (lines: %v)", overs, gotLines, tt.lines)
				}
				if tt.events || tt.body {
					if !errors.Is(err, errOver) {
						t.Fatalf("err %v, want the bound's", err)
					}
				} else if err != nil {
					t.Fatalf("err %v, want none (an end)", err)
				}
				// What got through: the start, no line longer than the
				// bound (up to the bound of the line over it, read a byte
				// at a time).
				if !strings.HasPrefix(tt.in, string(got)) || len(got) >= len(tt.in) {
					t.Fatalf("read %q of %q", got, tt.in)
				}
				for _, l := range strings.Split(string(got), "\n") {
					if len(l) > limit {
						t.Fatalf("read a line of %d bytes: %q", len(l), got)
					}
				}
				if !oneByte && tt.read != "" && string(got) != tt.read {
					t.Fatalf("read %q, want %q", got, tt.read)
				}
				if n, err := r.Read(make([]byte, 10)); n != 0 || err == nil {
					t.Fatalf("read on after the end: %d %v", n, err)
				}
			})
		}
	}
}

// checkTooLarge checks a call's error when its server sent a message over
// the bound.
func checkTooLarge(t *testing.T, err error, server string, says ...string) {
	t.Helper()
	if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err %v, want ErrTooLarge and ErrUnavailable", err)
	}
	if says == nil {
		says = []string{"4 MiB", strconv.Itoa(MaxMessage)}
	}
	for _, s := range append(says, `"`+server+`"`) {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("err %q does not say %s", err, s)
		}
	}
}

// backUp waits for a server to answer again, from another process than
// before (pid "" for an HTTP one).
func backUp(t *testing.T, m *Manager, server, pid string) {
	t.Helper()
	eventually(t, server+" back up", func() bool {
		res, err := m.Call(context.Background(), server, callReq("pid", nil))
		return err == nil && (pid == "" || text(res) != pid)
	})
}

// TestTooLargeStdio: a child that writes one line of 64 MiB without a
// newline is read no further than the bound: its call fails naming it and
// the bound, and it is restarted. The child's count of the bytes it could
// write (the pipe holds a few kilobytes more than were read) shows where
// the reading stopped.
func TestTooLargeStdio(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.m.Apply(context.Background(), config(stdioServer(t, "big")))
	f.up(t, "big")
	pid := pidOf(t, f.m, "big")
	marker := filepath.Join(t.TempDir(), "written")
	const total = 64 << 20
	_, err := f.m.Call(context.Background(), "big", callReq("flood", map[string]any{"bytes": total, "marker": marker}))
	checkTooLarge(t, err, "big")
	backUp(t, f.m, "big", pid) // the child that flooded has exited
	b, err := os.ReadFile(marker)
	if err != nil {
		t.Fatal(err)
	}
	written, _ := strconv.Atoi(string(b))
	if written > MaxMessage+1<<20 {
		t.Fatalf("the child wrote %d bytes: read on past the bound of %d", written, MaxMessage)
	}
	if !strings.Contains(f.log.String(), "upstream down") || !strings.Contains(f.log.String(), "4 MiB") {
		t.Fatalf("not logged: %s", f.log.String())
	}
}

// flooded is what the flooding HTTP server could write.
type flooded struct {
	written int
	failed  bool // a write failed: the client closed the connection
}

// TestTooLargeHTTP: an HTTP server whose answer to a call is over the
// bound (a JSON body, one event, an event of many lines) is read no
// further: the call fails naming it and the bound, the connection is
// closed under the server's writes, and it is connected again. An event
// stream of many events, each within the bound, more than it in all, is
// read to its end.
func TestTooLargeHTTP(t *testing.T) {
	bigJSON := `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`
	tests := []struct {
		name, contentType, head string
		chunk                   string // written until total
		total                   int
		tail                    string
		ok                      bool
		says                    []string // the error's words; nil: the bound's
	}{
		{name: "json body", contentType: "application/json", head: bigJSON, chunk: strings.Repeat("x", 64<<10)},
		{name: "one event", contentType: "text/event-stream", head: "event: message\ndata: " + bigJSON, chunk: strings.Repeat("x", 64<<10)},
		{name: "an event of many lines", contentType: "text/event-stream", head: "event: message\n", chunk: "data: " + strings.Repeat("x", 128<<10) + "\n"},
		{name: "an event of many short lines", contentType: "text/event-stream", head: "event: message\n", chunk: "data: x\n", total: MaxMessage,
			says: []string{"more data lines", "128 MiB"}},
		{name: "many events", contentType: "text/event-stream", ok: true, total: 2 * MaxMessage,
			chunk: `data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"nobody's","progress":1,"message":"` +
				strings.Repeat("x", 64<<10) + "\"}}\n\n",
			tail: `data: {"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"done"}]}}` + "\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			done := make(chan flooded, 1)
			mcpHTTP := mcpserver.NewStreamableHTTPServer(testServer(false))
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				var msg struct {
					ID     json.RawMessage `json:"id"`
					Params struct {
						Name string `json:"name"`
					} `json:"params"`
				}
				_ = json.Unmarshal(body, &msg)
				if r.Method != http.MethodPost || msg.Params.Name != "flood" {
					r.Body = io.NopCloser(strings.NewReader(string(body)))
					mcpHTTP.ServeHTTP(w, r)
					return
				}
				id := string(msg.ID)
				w.Header().Set("Content-Type", tt.contentType)
				w.WriteHeader(http.StatusOK)
				var res flooded
				defer func() { done <- res }()
				total := cmp.Or(tt.total, 32<<20)
				write := func(s string) bool {
					n, err := io.WriteString(w, s)
					res.written += n
					if err == nil {
						err = http.NewResponseController(w).Flush()
					}
					res.failed = err != nil
					return err == nil
				}
				if tt.head != "" && !write(fmt.Sprintf(tt.head, id)) {
					return
				}
				for res.written < total {
					if !write(tt.chunk) {
						return
					}
				}
				if tt.tail != "" {
					write(fmt.Sprintf(tt.tail, id))
				}
			}))
			t.Cleanup(func() {
				ts.CloseClientConnections()
				ts.Close()
			})
			f := newFixture(t)
			f.m.Apply(context.Background(), config(Server{Name: "web", URL: ts.URL + "/mcp", Timeout: 10 * time.Second}))
			f.up(t, "web")
			began := time.Now()
			res, err := f.m.Call(context.Background(), "web", callReq("flood", nil))
			t.Logf("call returned after %v", time.Since(began))
			var got flooded
			select {
			case got = <-done:
				t.Logf("server done after %v: %+v", time.Since(began), got)
			case <-time.After(time.Minute):
				t.Fatal("the server is still writing")
			}
			if tt.ok {
				if err != nil || text(res) != "done" || got.failed {
					t.Fatalf("%v %v (the server: %+v)", res, err, got)
				}
				return
			}
			checkTooLarge(t, err, "web", tt.says...)
			if !got.failed {
				t.Fatalf("the server wrote %d bytes (failed: %v): read on past the bound", got.written, got.failed)
			}
			backUp(t, f.m, "web", "")
		})
	}
}
