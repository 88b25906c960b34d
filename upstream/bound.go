package upstream

import (
	"bytes"
	"io"
	"mime"
	"net/http"
)

// The readers here stand between a server and mcp-go's client, which
// reads a child's lines, an HTTP body and an event stream's events without
// a bound. Each one counts the message being read, and at the bound it
// calls over (which ends the connection, its cause the error it returns;
// lines says an event's lines cost too much, rather than its bytes) and
// reads no further.

// lines bounds the lines of a child's stdout. At the bound it returns
// io.EOF, not the error: mcp-go's stdio transport would log it at error
// level, and the connection's cause already says why.
type lines struct {
	r     io.Reader
	limit int
	line  int // bytes of the line being read, so far
	over  func(lines bool) error
	ended bool
}

func (l *lines) Read(p []byte) (int, error) {
	if l.ended {
		return 0, io.EOF
	}
	n, err := l.r.Read(p)
	for i := 0; i < n; {
		j := bytes.IndexByte(p[i:n], '\n')
		seg := n - i
		if j >= 0 {
			seg = j
		}
		if l.line+seg > l.limit {
			l.ended = true
			_ = l.over(false)
			return i, io.EOF // the lines before, whole
		}
		if j < 0 {
			l.line += seg
			break
		}
		l.line = 0
		i += j + 1
	}
	return n, err
}

// boundHTTP wraps an HTTP client's transport: the body of each response
// is bounded, as one message (JSON), or event by event (an event stream).
type boundHTTP struct {
	rt    http.RoundTripper
	limit int
	over  func(lines bool) error
}

func (b *boundHTTP) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := b.rt.RoundTrip(r)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	resp.Body = &boundBody{ReadCloser: resp.Body, limit: b.limit, over: b.over, events: mt == "text/event-stream"}
	return resp, nil
}

// linesCost bounds what the lines of one event cost mcp-go, as a multiple
// of the bound: it joins an event's data lines one at a time, copying what
// it has each time (a cost that grows with the square of their number),
// so an event of 4 MiB in lines of a few bytes would take minutes of CPU.
// MCP servers send a message in one data line.
const linesCost = 32

// boundBody bounds a response's body: all of it, or each of its events
// (the lines up to a blank one, as mcp-go reads them: a line of '\r's only
// is blank too), their bytes and the cost of their lines. At the bound it
// returns over's error.
type boundBody struct {
	io.ReadCloser
	limit  int
	over   func(lines bool) error
	events bool

	n       int  // bytes of the body, or of the event being read
	content bool // the line being read has more than '\r's
	line    int  // bytes of the line being read
	joined  int  // an event's bytes of lines, as mcp-go has joined them
	cost    int  // the bytes mcp-go copied joining them
	err     error
}

func (b *boundBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.ReadCloser.Read(p)
	if !b.events {
		if b.n += n; b.n > b.limit {
			b.err = b.over(false)
			return 0, b.err
		}
		return n, err
	}
	for i := 0; i < n; {
		j := bytes.IndexByte(p[i:n], '\n')
		end := n
		if j >= 0 {
			end = i + j
		}
		if len(bytes.TrimRight(p[i:end], "\r")) > 0 {
			b.content = true
		}
		b.line += end - i
		if b.n += end - i; b.n > b.limit {
			b.err = b.over(false)
			return 0, b.err
		}
		if j < 0 {
			break
		}
		if b.content {
			b.n++ // the newline, within the event
			b.joined += b.line
			if b.cost += b.joined; b.cost > linesCost*b.limit {
				b.err = b.over(true)
				return 0, b.err
			}
		} else { // a blank line: the event ended
			b.n, b.joined, b.cost = 0, 0, 0
		}
		b.content, b.line = false, 0
		i = end + 1
	}
	return n, err
}
