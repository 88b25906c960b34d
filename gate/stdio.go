package gate

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// maxLine bounds a message over stdio, as DefaultMaxBody bounds one over
// HTTP: a longer line is answered with an error and skipped.
const maxLine = DefaultMaxBody

// ServeStdio serves MCP over standard input and output until ctx ends or
// the input closes. Each line is checked as HTTP bodies are (readEnvelope,
// maxLine) before mcp-go's stdio server reads it.
//
// What is promised over stdio:
//   - Closing the input is the client's way to end: every request read
//     before the end of the input is answered, then ServeStdio returns
//     (nothing in flight is cancelled). Ending ctx cancels what is in
//     flight.
//   - Calls of tools that act on one instance are taken in the order they
//     arrive: a call waits until the calls before it on that instance are
//     answered (mcp-go runs calls on a pool of goroutines, which would
//     otherwise race for the instance). Calls on other instances, and
//     other requests, go on meanwhile.
func (g *Gate) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	s := server.NewStdioServer(g.Server())
	s.SetErrorLogger(slog.NewLogLogger(g.log.Handler(), slog.LevelError))
	pr, pw := io.Pipe()
	f := &stdioFlow{g: g, ctx: ctx, inflight: map[string]string{}, held: map[string][][]byte{}, keyOf: map[string]string{}, pending: map[string]bool{},
		fixes: map[string]func([]byte) ([]byte, bool){}, wake: make(chan struct{}, 1)}
	f.idle = sync.NewCond(&f.mu)
	w := &lineWriter{w: out, fix: f.fix, answered: f.answered}
	written := make(chan error, 1)
	go func() { written <- f.write(pw) }()
	go func() {
		err := f.read(in, w)
		f.drain(ctx)
		f.close()
		if werr := <-written; err == nil {
			err = werr
		}
		pw.CloseWithError(err)
	}()
	err := s.Listen(context.WithValue(ctx, streamingKey{}, true), pr, w)
	w.end()
	pr.Close()
	f.stop()
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// stdioFlow hands a client's messages to mcp-go, holding back a call on
// an instance while an earlier one on it is unanswered, and knows the
// requests not answered yet.
type stdioFlow struct {
	g   *Gate
	ctx context.Context

	mu sync.Mutex
	// out are the lines to hand to mcp-go, in order, written by write
	// (never under mu: mcp-go may answer on the goroutine that reads
	// them); closed once the input is drained.
	out    [][]byte
	wake   chan struct{}
	closed bool
	// pending are the ids (JSON) of the requests handed to mcp-go and not
	// answered yet.
	pending map[string]bool
	// inflight is, by instance, the id of the call handed on; held its
	// calls waiting behind it, in order; keyOf the instance of each call
	// handed on, by id.
	inflight map[string]string
	held     map[string][][]byte
	keyOf    map[string]string
	idle     *sync.Cond // told when a request is answered
	stopped  bool
	// fixes rewrite the answers to requests (fixAnswer), by id.
	fixes map[string]func([]byte) ([]byte, bool)
}

// stdioSessionID is the id of mcp-go's one stdio session.
const stdioSessionID = "stdio"

// fix rewrites an answer as its request's fix says (fixAnswer).
func (f *stdioFlow) fix(msg []byte) []byte {
	if !bytes.Contains(msg, []byte(`"error"`)) {
		return msg
	}
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(msg, &m) != nil || m.ID == nil {
		return msg
	}
	f.mu.Lock()
	fix := f.fixes[idKey(m.ID)]
	f.mu.Unlock()
	if fix == nil {
		return msg
	}
	out, _ := fix(msg)
	return out
}

// read checks the messages of in, a line each, answers the malformed ones
// itself on w (as readEnvelope says), and hands on the others (blank lines
// are dropped), until the input ends.
func (f *stdioFlow) read(in io.Reader, w io.Writer) error {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, tooLong, err := readLine(r, maxLine)
		if len(line) > 0 || tooLong {
			var e *mcp.JSONRPCError
			var env *envelope
			if tooLong {
				e = rpcError(nil, mcp.INVALID_REQUEST, fmt.Sprintf("Invalid Request: a message may have at most %d bytes", maxLine))
			} else {
				env, e = readEnvelope(line)
			}
			if e != nil {
				b, _ := json.Marshal(e)
				if _, werr := w.Write(append(b, '\n')); werr != nil {
					return werr
				}
			} else if werr := f.hand(env, append(line, '\n')); werr != nil {
				return werr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// hand hands a message on, or holds it behind an earlier call on its
// instance.
func (f *stdioFlow) hand(env *envelope, line []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := idKey(env.ID)
	isRequest := env.ID != nil && env.method != ""
	if env.method == string(mcp.MethodNotificationCancelled) {
		f.unhold(env.Params)
	}
	if isRequest && env.method == string(mcp.MethodToolsCall) {
		if key := f.g.callInstance(env.Params); key != "" {
			if _, busy := f.inflight[key]; busy {
				f.pending[id] = true
				f.held[key] = append(f.held[key], line)
				return nil
			}
			f.inflight[key], f.keyOf[id] = id, key
		}
	}
	if isRequest {
		f.pending[id] = true
		if fix := f.g.fixAnswer(f.ctx, env, f.g.sessionByID(stdioSessionID), mcp.IsModernProtocol(env.protocolVersion())); fix != nil {
			f.fixes[id] = fix
		}
	}
	f.send(line)
	return nil
}

// send queues a line for mcp-go (under mu).
func (f *stdioFlow) send(line []byte) {
	f.out = append(f.out, line)
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// write writes the queued lines to mcp-go's input, in order, until the
// flow is closed and nothing is left.
func (f *stdioFlow) write(pipe io.Writer) error {
	for range f.wake {
		f.mu.Lock()
		lines, closed := f.out, f.closed
		f.out = nil
		f.mu.Unlock()
		for _, l := range lines {
			if _, err := pipe.Write(l); err != nil {
				return err
			}
		}
		if closed {
			return nil
		}
	}
	return nil
}

// close ends the flow: what is queued is written, then write returns.
func (f *stdioFlow) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// unhold drops a held call that its client cancelled: it gets no answer.
func (f *stdioFlow) unhold(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || p.RequestID == nil {
		return
	}
	want := idKey(p.RequestID)
	for key, lines := range f.held {
		for i, l := range lines {
			if env, e := readEnvelope(bytes.TrimSpace(l)); e == nil && idKey(env.ID) == want {
				f.held[key] = append(lines[:i:i], lines[i+1:]...)
				delete(f.pending, want)
				f.idle.Broadcast()
				return
			}
		}
	}
}

// answered is told of every message written to the client: an answer
// ends its request, and hands on the next call held on its instance.
func (f *stdioFlow) answered(msg []byte) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	if json.Unmarshal(msg, &m) != nil || m.ID == nil || m.Method != nil {
		return // a notification, or a request of the server's
	}
	id := idKey(m.ID)
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pending, id)
	delete(f.fixes, id)
	if key, ok := f.keyOf[id]; ok {
		delete(f.keyOf, id)
		delete(f.inflight, key)
		if next := f.held[key]; len(next) > 0 && !f.stopped {
			line := next[0]
			f.held[key] = next[1:]
			if len(f.held[key]) == 0 {
				delete(f.held, key)
			}
			if env, e := readEnvelope(bytes.TrimSpace(line)); e == nil {
				f.inflight[key], f.keyOf[idKey(env.ID)] = idKey(env.ID), key
			}
			f.send(line)
		}
	}
	f.idle.Broadcast()
}

// idKey is a request id as a key: the same for the id a client sent and
// the one mcp-go answers with (which may write a number otherwise, 1.0 as
// 1).
func idKey(id json.RawMessage) string {
	var v any
	if json.Unmarshal(id, &v) != nil {
		return string(id)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// drain waits, once the input ended, until every request read is
// answered (or ctx ends).
func (f *stdioFlow) drain(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() {
		f.mu.Lock()
		f.stopped = true
		f.idle.Broadcast()
		f.mu.Unlock()
	})
	defer stop()
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.pending) > 0 && !f.stopped {
		f.idle.Wait()
	}
}

// stop ends a drain: mcp-go stopped serving.
func (f *stdioFlow) stop() {
	f.mu.Lock()
	f.stopped = true
	f.idle.Broadcast()
	f.mu.Unlock()
}

// callInstance names the instance a tools/call of one of the gate's
// tools acts on, by its workflow and handle argument ("" for another
// tool, or when the arguments name none the gate could read).
func (g *Gate) callInstance(params json.RawMessage) string {
	var p struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	ref, ok := g.lookup(p.Name)
	if !ok || ref.m == nil {
		return ""
	}
	h, _ := p.Arguments[ref.m.ModernHandleKey()].(string)
	if ref.m.HandleKey != "" {
		h, _ = p.Arguments[ref.m.HandleKey].(string)
	}
	return ref.m.ID + "\x00" + h
}

// readLine reads one line without its end, at most max bytes of it: the
// rest of a longer line is read and dropped, and tooLong is set.
func readLine(r *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		frag, err := r.ReadSlice('\n')
		if len(line)+len(frag) > max+1 {
			tooLong = true
			line = nil
		} else if !tooLong {
			line = append(line, frag...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if n := len(line); n > 0 && line[n-1] == '\n' {
			line = line[:n-1]
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[:n-1]
			}
		}
		if len(trimSpace(line)) == 0 {
			line = nil
		}
		return line, tooLong, err
	}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

// lineWriter serializes whole writes (mcp-go writes a message and its
// newline at once), so that the gate's answers and mcp-go's never
// interleave, and tells answered of each message written.
type lineWriter struct {
	mu       sync.Mutex
	w        io.Writer
	fix      func([]byte) []byte
	answered func([]byte)
	// ended is set once ServeStdio returns: mcp-go's goroutine that writes
	// notifications may still hold one, which is dropped (the caller may
	// be reading the output by then).
	ended bool
}

// end drops every write from now on (see ended).
func (l *lineWriter) end() {
	l.mu.Lock()
	l.ended = true
	l.mu.Unlock()
}

func (l *lineWriter) Write(p []byte) (int, error) {
	q := p
	if l.fix != nil {
		q = l.fix(p)
	}
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return len(p), nil
	}
	_, err := l.w.Write(q)
	l.mu.Unlock()
	n := len(p)
	if err != nil {
		n = 0
	}
	if l.answered != nil && err == nil {
		l.answered(p)
	}
	return n, err
}
