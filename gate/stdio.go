package gate

import (
	"bufio"
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
// the input closes. Each line is checked as HTTP bodies are (checkMessage,
// maxLine) before mcp-go's stdio server reads it.
func (g *Gate) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	s := server.NewStdioServer(g.Server())
	s.SetErrorLogger(slog.NewLogLogger(g.log.Handler(), slog.LevelError))
	w := &lineWriter{w: out}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(filterLines(in, pw, w)) }()
	err := s.Listen(context.WithValue(ctx, streamingKey{}, true), pr, w)
	pr.Close()
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// filterLines copies the messages of in, a line each, to out, and answers
// the malformed ones itself on w (as checkMessage says); blank lines are
// dropped.
func filterLines(in io.Reader, out io.Writer, w io.Writer) error {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, tooLong, err := readLine(r, maxLine)
		if len(line) > 0 || tooLong {
			var e *mcp.JSONRPCError
			if tooLong {
				e = rpcError(nil, mcp.INVALID_REQUEST, fmt.Sprintf("Invalid Request: a message may have at most %d bytes", maxLine))
			} else {
				e = checkMessage(line)
			}
			if e != nil {
				b, _ := json.Marshal(e)
				if _, werr := w.Write(append(b, '\n')); werr != nil {
					return werr
				}
			} else if _, werr := out.Write(append(line, '\n')); werr != nil {
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
// newline at once), so that the filter's answers and mcp-go's never
// interleave.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
