package inspect

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/workflow"
)

// long is what a test gives a thing it waits for: far more than it takes.
const long = time.Minute

// eventsServer serves an inspector with no workflows and the options
// given; its changes are published by the test (h.hub.publish).
func eventsServer(t *testing.T, o Options) (*Handler, string) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	o.Instances = workflow.NewInstances(workflow.InstancesOptions{Logger: log})
	o.Logger = log
	h := New(o)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close) // first: the streams end
	return h, srv.Listener.Addr().String()
}

// openStream asks for the event stream from a local address (nil: any),
// and returns the connection; with read, after reading the answer's
// headers (a reader), else at once (a client that never reads). It skips
// the test when the local address cannot be used.
func openStream(t *testing.T, addr string, local net.IP, read bool) (net.Conn, *bufio.Reader) {
	t.Helper()
	d := net.Dialer{Timeout: long}
	if local != nil {
		d.LocalAddr = &net.TCPAddr{IP: local}
	}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		if local != nil {
			t.Skipf("cannot connect from %s: %v", local, err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if tc, ok := conn.(*net.TCPConn); ok && !read {
		_ = tc.SetReadBuffer(4096) // fills sooner
	}
	if _, err := fmt.Fprintf(conn, "GET %s/_/events HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", Prefix, addr); err != nil {
		t.Fatal(err)
	}
	if !read {
		return conn, nil
	}
	_ = conn.SetReadDeadline(time.Now().Add(long))
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the event stream: %s", res.Status)
	}
	return conn, bufio.NewReader(res.Body)
}

// untilEnd reads a stream until the server ends it, and returns what it
// read; it fails the test if the stream lasts longer than long.
func untilEnd(t *testing.T, conn net.Conn, r *bufio.Reader) string {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(long))
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("the stream did not end (%v) after: %q", err, b)
	}
	return string(b)
}

func awaitCount(t *testing.T, h *Handler, peer string, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	if err := h.hub.await(ctx, func() bool { return h.hub.countLocked(peer) == want }); err != nil {
		t.Fatalf("streams of %q: %d, want %d", peer, h.hub.count(peer), want)
	}
}

// TestAStreamThatIsNotReadIsDropped: a client that never reads its event
// stream holds no slot once its writes stall for StreamWriteTimeout; a
// new client gets a slot and its events.
func TestAStreamThatIsNotReadIsDropped(t *testing.T) {
	h, addr := eventsServer(t, Options{MaxStreams: 1, StreamWriteTimeout: 100 * time.Millisecond})
	openStream(t, addr, nil, false)
	awaitCount(t, h, "", 1)
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		_ = h.hub.await(t.Context(), func() bool { return len(h.hub.streams) == 0 })
	}()
	// Changes of many instances, until the socket's buffers are full and
	// a write stalls.
	deadline := time.After(long)
	for n := 0; ; {
		select {
		case <-gone:
		case <-deadline:
			t.Fatalf("a stream never read still holds its slot after %d changes", n)
		default:
			for range 200 {
				h.hub.publish(message{Kind: "instance", Workflow: "w", Handle: fmt.Sprint("handle-", n)})
				n++
			}
			time.Sleep(time.Millisecond) // the stream writes them
			continue
		}
		break
	}
	conn, r := openStream(t, addr, nil, true)
	h.hub.publish(message{Kind: "instance", Workflow: "w", Handle: "after"})
	_ = conn.SetReadDeadline(time.Now().Add(long))
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the new stream: %v", err)
		}
		if strings.Contains(line, `"handle":"after"`) {
			break
		}
	}
}

// TestStreamsEndAtTheirAge: a stream ends after MaxStreamAge, telling the
// page to come back within a second, and ends cleanly though it lasted
// longer than a write may take.
func TestStreamsEndAtTheirAge(t *testing.T) {
	_, addr := eventsServer(t, Options{MaxStreamAge: 500 * time.Millisecond, StreamWriteTimeout: 100 * time.Millisecond})
	conn, r := openStream(t, addr, nil, true)
	if got := untilEnd(t, conn, r); !strings.Contains(got, "retry: 1000\n") {
		t.Errorf("the stream said %q, want a retry of 1000 ms", got)
	}
}

// TestOnePeerCannotTakeAllSlots: a peer holds at most its share of the
// streams (its newest takes the place of its oldest), and a newcomer gets
// a slot even when all are taken: the peer with the most gives way.
func TestOnePeerCannotTakeAllSlots(t *testing.T) {
	h, addr := eventsServer(t, Options{MaxStreams: 4, MaxStreamsPerPeer: 2})
	c1, r1 := openStream(t, addr, nil, true)
	c2, r2 := openStream(t, addr, nil, true)
	awaitCount(t, h, "127.0.0.1", 2)
	openStream(t, addr, nil, true)
	if got := untilEnd(t, c1, r1); !strings.Contains(got, "retry: 10000\n") {
		t.Errorf("the oldest stream said %q as it ended, want a retry of 10 s", got)
	}
	awaitCount(t, h, "127.0.0.1", 2)
	// Other peers (loopback addresses other than 127.0.0.1).
	openStream(t, addr, net.IPv4(127, 0, 0, 2), true)
	openStream(t, addr, net.IPv4(127, 0, 0, 2), true)
	awaitCount(t, h, "", 4)
	openStream(t, addr, net.IPv4(127, 0, 0, 3), true)
	untilEnd(t, c2, r2) // 127.0.0.1's oldest: both peers hold 2
	awaitCount(t, h, "127.0.0.3", 1)
	if n := h.hub.count(""); n != 4 {
		t.Errorf("%d streams, want 4", n)
	}
}

// TestHubShares: which stream gives way to a new one.
func TestHubShares(t *testing.T) {
	for _, c := range []struct {
		name         string
		max, perPeer int
		peers        string // one letter a stream, joining in turn; "-N" makes the Nth leave
		evicted      []int  // the streams evicted, in turn
	}{
		{"room for all", 4, 4, "abcd", nil},
		{"a peer's share", 4, 2, "aaa", []int{0}},
		{"a peer's share, again", 8, 2, "aabaa", []int{0, 1}},
		{"the largest peer gives way", 4, 3, "aaabc", []int{0}},
		{"ties: the oldest stream", 3, 3, "bacd", []int{0}},
		{"ties after one gave way", 4, 2, "aabbc" + "d", []int{0, 2}},
		{"one that left frees a slot", 2, 2, "ab-0c", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHub(c.max, c.perPeer)
			var streams []*stream
			for i := 0; i < len(c.peers); i++ {
				if c.peers[i] == '-' {
					i++
					h.leave(streams[c.peers[i]-'0'])
					streams = append(streams, nil)
					continue
				}
				s, ok := h.join(string(c.peers[i]))
				if !ok {
					t.Fatalf("stream %d refused", len(streams))
				}
				streams = append(streams, s)
			}
			var evicted []int
			for i, s := range streams {
				if s == nil {
					continue
				}
				select {
				case <-s.evict:
					evicted = append(evicted, i)
				default:
				}
			}
			if fmt.Sprint(evicted) != fmt.Sprint(c.evicted) {
				t.Errorf("evicted %v, want %v", evicted, c.evicted)
			}
			if n := h.count(""); n > c.max {
				t.Errorf("%d streams, over %d", n, c.max)
			}
		})
	}
	h := newHub(2, 2)
	h.close()
	if _, ok := h.join("a"); ok {
		t.Error("a closed hub took a stream")
	}
}

func TestPeerOf(t *testing.T) {
	for remote, want := range map[string]string{
		"127.0.0.1:5000":                 "127.0.0.1",
		"127.0.0.2:5000":                 "127.0.0.2",
		"[::ffff:10.0.0.7]:80":           "10.0.0.7",
		"[::1]:80":                       "::1",
		"[2001:db8:1:2:3:4:5:6]:443":     "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:443":     "2001:db8:1:2::/64",
		"@":                              "@",
		"[fe80::1%eth0]:80":              "fe80::/64",
		"[2001:db8:1:3::1]:443":          "2001:db8:1:3::/64",
		"192.0.2.1:1":                    "192.0.2.1",
		"[2001:db8:ffff:ffff::2]:65535":  "2001:db8:ffff:ffff::/64",
		"[2001:db8:ffff:ffff:1::2]:6553": "2001:db8:ffff:ffff::/64",
	} {
		if got := peerOf(remote); got != want {
			t.Errorf("peerOf(%q) = %q, want %q", remote, got, want)
		}
	}
}
