// Command mcpload loads an MCP server over Streamable HTTP and prints one
// JSON line: successful tool calls per second and their latency
// percentiles.
//
//	go run ./internal/cmd/mcpload -url http://127.0.0.1:3001/mcp -sessions 8 \
//	    -duration 10s -warmup 3s -cycle invoice_submit,invoice_request_changes \
//	    -args '{"reason":"fix it"}' -list-every 10
//
// It opens -sessions MCP sessions, each with its own goroutine and its own
// HTTP connection. A session sends initialize (protocol 2025-06-18), then
// notifications/initialized, and every later request carries its
// Mcp-Session-Id and MCP-Protocol-Version (the version the server chose).
// Once every session is initialized, each calls the -cycle tools in order,
// over and over, as fast as the server answers, with -args as every call's
// arguments, and with -list-every K a tools/list after every K calls. An
// answer may be application/json or text/event-stream; a stream is read to
// its end (notifications on it are skipped), so the connection is reused.
//
// A request fails on an HTTP status other than 200, a JSON-RPC error, a
// tool result with isError, a timeout (-timeout) or a malformed answer.
// The first -warmup is not measured; requests that succeed and complete
// within the -duration after it are the samples. The line:
//
//	{"sessions":8,"calls":11481,"errors":0,"calls_per_s":1148.1,"p50_us":5114,"p90_us":10020,"p99_us":15986,"max_us":29799,"list_p50_us":4811}
//
// calls is the successful tools/calls in the window, calls_per_s that over
// -duration (to 0.1), the percentiles are nearest-rank over every sample
// in µs, from sending a request to having read its answer, list_p50_us
// the median of tools/list, errors the failed requests over the whole run,
// warm-up included. Every session ends with DELETE. The exit status is 0
// when every request succeeded, 1 when one failed (the line is printed
// all the same, and the first failure goes to stderr) or a session could
// not be opened, 2 for bad flags.
//
// It uses only the standard library and no MCP SDK, so it loads any
// server the same way, and it measures as the load generator the
// README's figures were first taken with, so they compare.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// protocolVersion is the MCP revision a session asks for.
const protocolVersion = "2025-06-18"

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags.
type options struct {
	url       string
	sessions  int
	duration  time.Duration
	warmup    time.Duration
	cycle     []string
	args      json.RawMessage
	listEvery int
	timeout   time.Duration
}

func parseOptions(argv []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("mcpload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	var cycle, args string
	fs.StringVar(&o.url, "url", "http://127.0.0.1:3001/mcp", "the server's Streamable HTTP endpoint")
	fs.IntVar(&o.sessions, "sessions", 1, "concurrent sessions, each on its own connection")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "the measured window")
	fs.DurationVar(&o.warmup, "warmup", 3*time.Second, "unmeasured time before the window")
	fs.StringVar(&cycle, "cycle", "", "comma-separated tool names, called in order, cyclically (required)")
	fs.StringVar(&args, "args", "{}", "JSON object sent as every call's arguments")
	fs.IntVar(&o.listEvery, "list-every", 0, "a tools/list after every K calls (0: none)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "the limit for one request")
	if err := fs.Parse(argv); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, name := range strings.Split(cycle, ",") {
		if name = strings.TrimSpace(name); name != "" {
			o.cycle = append(o.cycle, name)
		}
	}
	if len(o.cycle) == 0 {
		return nil, errors.New("-cycle: give the tools to call, comma-separated")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("-args: want a JSON object, got %q", args)
	}
	o.args = json.RawMessage(args)
	switch {
	case o.sessions < 1:
		return nil, fmt.Errorf("-sessions: want at least 1, got %d", o.sessions)
	case o.duration <= 0:
		return nil, fmt.Errorf("-duration: want more than 0, got %v", o.duration)
	case o.warmup < 0:
		return nil, fmt.Errorf("-warmup: want 0 or more, got %v", o.warmup)
	case o.listEvery < 0:
		return nil, fmt.Errorf("-list-every: want 0 or more, got %d", o.listEvery)
	case o.timeout <= 0:
		return nil, fmt.Errorf("-timeout: want more than 0, got %v", o.timeout)
	}
	return o, nil
}

// run is the command: flags in argv, the line on stdout, problems on
// stderr; it returns the exit status.
func run(ctx context.Context, argv []string, stdout, stderr io.Writer) int {
	o, err := parseOptions(argv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "mcpload:", err)
		return 2
	}
	sessions, err := open(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "mcpload:", err)
		return 1
	}
	tallies := drive(ctx, o, sessions)
	closeAll(sessions)
	sum := summarize(o, tallies)
	line, err := json.Marshal(sum.line)
	if err != nil {
		fmt.Fprintln(stderr, "mcpload:", err)
		return 1
	}
	fmt.Fprintln(stdout, string(line))
	if sum.line.Errors > 0 {
		fmt.Fprintf(stderr, "mcpload: %d failed requests; first: %s\n", sum.line.Errors, sum.first)
		return 1
	}
	return 0
}

// open opens every session at once; if one fails, those opened are closed.
func open(ctx context.Context, o *options) ([]*session, error) {
	sessions := make([]*session, o.sessions)
	errs := make([]error, o.sessions)
	var wg sync.WaitGroup
	for i := range sessions {
		sessions[i] = newSession(o)
		wg.Go(func() {
			if err := sessions[i].initialize(ctx); err != nil {
				errs[i] = fmt.Errorf("session %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeAll(sessions)
		return nil, err
	}
	return sessions, nil
}

func closeAll(sessions []*session) {
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(s.close)
	}
	wg.Wait()
}

// window is the measured time.
type window struct{ start, end time.Time }

// holds reports whether a request that completed at t is measured.
func (w window) holds(t time.Time) bool { return !t.Before(w.start) && !t.After(w.end) }

// tally is what one session saw.
type tally struct {
	calls, lists []time.Duration // successful requests completed in the window
	errors       int             // failed requests, warm-up included
	first        string          // the first failure
	firstAt      time.Time
}

// note records one request that began at begin and ended at end.
func (t *tally) note(w window, samples *[]time.Duration, what string, begin, end time.Time, err error) {
	if err != nil {
		t.errors++
		if t.first == "" {
			t.first, t.firstAt = fmt.Sprintf("%s: %v", what, err), end
		}
		return
	}
	if w.holds(end) {
		*samples = append(*samples, end.Sub(begin))
	}
}

// drive runs every session's cycle from now, through the warm-up and the
// window, and returns what each saw.
func drive(ctx context.Context, o *options, sessions []*session) []*tally {
	start := time.Now()
	w := window{start: start.Add(o.warmup), end: start.Add(o.warmup + o.duration)}
	tallies := make([]*tally, len(sessions))
	var wg sync.WaitGroup
	for i, s := range sessions {
		t := &tally{}
		tallies[i] = t
		wg.Go(func() {
			for n := 0; time.Now().Before(w.end) && ctx.Err() == nil; {
				tool := o.cycle[n%len(o.cycle)]
				n++
				begin := time.Now()
				err := s.callTool(ctx, tool)
				t.note(w, &t.calls, "tools/call "+tool, begin, time.Now(), err)
				if o.listEvery > 0 && n%o.listEvery == 0 && time.Now().Before(w.end) {
					begin := time.Now()
					_, err := s.request(ctx, "tools/list", map[string]any{})
					t.note(w, &t.lists, "tools/list", begin, time.Now(), err)
				}
			}
		})
	}
	wg.Wait()
	return tallies
}

// line is the JSON line printed; its fields in this order.
type line struct {
	Sessions  int     `json:"sessions"`
	Calls     int     `json:"calls"`
	Errors    int     `json:"errors"`
	CallsPerS float64 `json:"calls_per_s"`
	P50us     int64   `json:"p50_us"`
	P90us     int64   `json:"p90_us"`
	P99us     int64   `json:"p99_us"`
	MaxUs     int64   `json:"max_us"`
	ListP50us int64   `json:"list_p50_us"`
}

type summary struct {
	line  line
	first string // the earliest failure of all sessions
}

func summarize(o *options, tallies []*tally) summary {
	var calls, lists []time.Duration
	s := summary{line: line{Sessions: o.sessions}}
	var firstAt time.Time
	for _, t := range tallies {
		calls = append(calls, t.calls...)
		lists = append(lists, t.lists...)
		s.line.Errors += t.errors
		if t.first != "" && (s.first == "" || t.firstAt.Before(firstAt)) {
			s.first, firstAt = t.first, t.firstAt
		}
	}
	slices.Sort(calls)
	slices.Sort(lists)
	s.line.Calls = len(calls)
	s.line.CallsPerS = math.Round(float64(len(calls))/o.duration.Seconds()*10) / 10
	s.line.P50us = percentile(calls, 50)
	s.line.P90us = percentile(calls, 90)
	s.line.P99us = percentile(calls, 99)
	s.line.MaxUs = percentile(calls, 100)
	s.line.ListP50us = percentile(lists, 50)
	return s
}

// percentile is the nearest-rank p-th percentile of sorted samples in µs
// (whole µs, rounded down): the smallest sample that at least p% of the
// samples do not exceed. 0 when there are none.
func percentile(sorted []time.Duration, p float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := max(int(math.Ceil(p/100*float64(len(sorted)))), 1)
	return sorted[rank-1].Microseconds()
}

// session is one MCP session on a connection of its own.
type session struct {
	o       *options
	client  *http.Client
	id      string // Mcp-Session-Id, once initialize gave one
	version string // the protocol version the server chose
	opened  bool   // initialize answered: later requests carry the headers
	seq     int64  // the last request id
}

func newSession(o *options) *session {
	// A transport per session: its own connection, kept alive.
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &session{o: o, client: &http.Client{Transport: tr}, version: protocolVersion}
}

func (s *session) initialize(ctx context.Context) error {
	result, err := s.request(ctx, "initialize", map[string]any{
		"protocolVersion": protocolVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "mcpload", "version": "1"},
	})
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(result, &init) == nil && init.ProtocolVersion != "" {
		s.version = init.ProtocolVersion
	}
	if err := s.notify(ctx, "notifications/initialized"); err != nil {
		return fmt.Errorf("notifications/initialized: %w", err)
	}
	return nil
}

// callTool calls a tool with the -args; a result with isError fails.
func (s *session) callTool(ctx context.Context, name string) error {
	result, err := s.request(ctx, "tools/call", map[string]any{"name": name, "arguments": s.o.args})
	if err != nil {
		return err
	}
	var r struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		return fmt.Errorf("malformed result: %v: %s", err, clip(result))
	}
	if r.IsError {
		var text strings.Builder
		for _, c := range r.Content {
			text.WriteString(c.Text)
		}
		return fmt.Errorf("isError: %s", clip([]byte(text.String())))
	}
	return nil
}

// message is a JSON-RPC message as far as mcpload reads it.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// request sends a JSON-RPC request and returns the result of the answer
// with its id, read from a JSON body or an event stream (to its end).
func (s *session) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	s.seq++
	id := s.seq
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.timeout)
	defer cancel()
	resp, err := s.post(ctx, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, clip(b))
	}
	if !s.opened {
		s.id = resp.Header.Get("Mcp-Session-Id")
		s.opened = true
	}
	want := strconv.FormatInt(id, 10)
	var m *message
	switch ct := resp.Header.Get("Content-Type"); {
	case strings.HasPrefix(ct, "text/event-stream"):
		m, err = answerFromStream(resp.Body, want)
	case strings.HasPrefix(ct, "application/json"):
		m, err = answerFromJSON(resp.Body, want)
	default:
		err = fmt.Errorf("Content-Type %q is neither application/json nor text/event-stream", ct)
	}
	if err != nil {
		return nil, err
	}
	if m.Error != nil {
		return nil, fmt.Errorf("JSON-RPC error %d: %s %s", m.Error.Code, m.Error.Message, clip(m.Error.Data))
	}
	if m.Result == nil {
		return nil, errors.New("an answer with neither result nor error")
	}
	return m.Result, nil
}

// notify sends a JSON-RPC notification: 202 (or 200) with no message.
func (s *session) notify(ctx context.Context, method string) error {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.timeout)
	defer cancel()
	resp, err := s.post(ctx, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, clip(b))
	}
	return nil
}

func (s *session) post(ctx context.Context, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.o.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	s.sessionHeaders(req)
	return s.client.Do(req)
}

func (s *session) sessionHeaders(req *http.Request) {
	if !s.opened {
		return
	}
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
	}
	req.Header.Set("MCP-Protocol-Version", s.version)
}

// close ends the session with DELETE (whatever the answer) and its
// connection.
func (s *session) close() {
	defer s.client.CloseIdleConnections()
	if s.id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.o.url, nil)
	if err != nil {
		return
	}
	s.sessionHeaders(req)
	resp, err := s.client.Do(req)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
}

// answerFromJSON reads a JSON body: the answer, or a batch holding it.
func answerFromJSON(r io.Reader, id string) (*message, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var batch []message
		if err := json.Unmarshal(b, &batch); err != nil {
			return nil, fmt.Errorf("malformed JSON body: %v: %s", err, clip(b))
		}
		for i := range batch {
			if batch[i].Method == "" && sameID(batch[i].ID, id) {
				return &batch[i], nil
			}
		}
		return nil, fmt.Errorf("no answer to id %s in the batch: %s", id, clip(b))
	}
	var m message
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("malformed JSON body: %v: %s", err, clip(b))
	}
	if !sameID(m.ID, id) {
		return nil, fmt.Errorf("an answer to id %s, want %s", m.ID, id)
	}
	return &m, nil
}

// answerFromStream reads a server-sent event stream to its end and
// returns the answer with the id; other messages are skipped.
func answerFromStream(r io.Reader, id string) (*message, error) {
	events := newEventReader(r)
	var answer *message
	for {
		data, err := events.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if answer != nil { // the stream broke after the answer
				return answer, nil
			}
			return nil, err
		}
		if answer != nil {
			continue
		}
		var m message
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("malformed event data: %v: %s", err, clip(data))
		}
		if m.Method == "" && sameID(m.ID, id) {
			answer = &m
		}
	}
	if answer == nil {
		return nil, fmt.Errorf("the event stream ended with no answer to id %s", id)
	}
	return answer, nil
}

// eventReader reads the data of server-sent events (the event stream
// format of the HTML standard): the data: lines of an event, joined by
// newlines, dispatched at an empty line; other fields and comments are
// skipped.
type eventReader struct {
	r    *bufio.Reader
	data []byte
	has  bool // a data: line since the last dispatch
}

func newEventReader(r io.Reader) *eventReader {
	return &eventReader{r: bufio.NewReaderSize(r, 16<<10)}
}

// next returns the next event's data, io.EOF at the end of the stream.
func (e *eventReader) next() ([]byte, error) {
	for {
		line, err := e.r.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		end := errors.Is(err, io.EOF)
		if end && len(line) == 0 {
			// An event not closed by an empty line is dropped by the
			// standard; a server that ends its stream right after the
			// data is common enough to take it.
			if e.has {
				return e.dispatch(), nil
			}
			return nil, io.EOF
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		switch {
		case len(line) == 0:
			if e.has {
				return e.dispatch(), nil
			}
		case line[0] == ':': // a comment
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			if string(field) == "data" {
				value = bytes.TrimPrefix(value, []byte(" "))
				if e.has {
					e.data = append(e.data, '\n')
				}
				e.data = append(e.data, value...)
				e.has = true
			}
		}
		if end {
			if e.has {
				return e.dispatch(), nil
			}
			return nil, io.EOF
		}
	}
}

func (e *eventReader) dispatch() []byte {
	d := bytes.Clone(e.data)
	e.data, e.has = e.data[:0], false
	return d
}

// sameID reports whether a message's id is the request's (a number; a
// server that writes it as a string matches too).
func sameID(raw json.RawMessage, id string) bool {
	return string(bytes.Trim(bytes.TrimSpace(raw), `"`)) == id
}

// clip shortens a server's text for a message.
func clip(b []byte) string {
	const most = 400
	s := strings.TrimSpace(string(b))
	if len(s) > most {
		s = s[:most] + "…"
	}
	return s
}
