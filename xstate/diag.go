package xstate

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// ErrInvalid is wrapped by every error about a machine file that cannot be
// loaded.
var ErrInvalid = errors.New("invalid machine")

// Diagnostic is one problem found in a machine file.
type Diagnostic struct {
	File    string
	Line    int    // 0 when unknown
	Column  int    // 0 when unknown
	State   string // the state's path, "(root)" for the root; "" when none
	Msg     string
	Warning bool
	// Source is the text of the line the problem is on, when known: for
	// the server's log and check, never for MCP clients (Public).
	Source string
	// Quotes is set when Msg may quote the file (a parser's own words:
	// Expected ";" but found "..."): Public leaves out what it quotes.
	Quotes bool
	// lead is 1 + the bytes of white space Source was trimmed of at its
	// start (for Pretty's caret); 0 when unknown.
	lead int
}

// String renders the diagnostic on one line, for the server's log: the
// file, the line and column (file:line:column, as compilers write them),
// the state, the message, and the line's text when known.
func (d Diagnostic) String() string {
	s := d.render(d.Msg)
	if d.Source != "" {
		s += " (at: " + d.Source + ")"
	}
	return s
}

// Pretty renders the diagnostic for a terminal, as check prints it: as
// String without the line's text on the first line, then, when known,
// the line's text and a caret under the column.
func (d Diagnostic) Pretty() []string {
	out := []string{d.render(d.Msg)}
	if d.Source == "" {
		return out
	}
	out = append(out, "    "+d.Source)
	if lead := d.lead - 1; d.Column > 0 && lead >= 0 && d.Column-1 >= lead {
		before := d.Column - 1 - lead
		if before <= len(d.Source) {
			out = append(out, "    "+strings.Repeat(" ", utf8.RuneCountInString(d.Source[:before]))+"^")
		}
	}
	return out
}

// SetSource sets the diagnostic's Source to the text of its line in data
// (the file's contents), trimmed, when it has a line and the line is
// short enough to show (a minified file's is not).
//
// It reads data from its start: for many diagnostics of one file, use
// SetSources.
func (d *Diagnostic) SetSource(data []byte) {
	if d.Line <= 0 {
		return
	}
	d.setLine(nthLine(data, d.Line))
}

// SetSources sets the Source of each diagnostic about file (by its File)
// that has a line and no Source, from data, the file's contents, read
// once.
func SetSources(ds []Diagnostic, file string, data []byte) {
	var starts []int // the offset of each line, from line 1
	for i := range ds {
		d := &ds[i]
		if d.File != file || d.Line <= 0 || d.Source != "" {
			continue
		}
		if starts == nil {
			starts = append(starts, 0)
			for j, c := range data {
				if c == '\n' {
					starts = append(starts, j+1)
				}
			}
		}
		if d.Line > len(starts) {
			continue
		}
		line := data[starts[d.Line-1]:]
		if j := bytes.IndexByte(line, '\n'); j >= 0 {
			line = line[:j]
		}
		d.setLine(line)
	}
}

// setLine sets Source to line's text, trimmed, when it is short enough to
// show (a minified file's is not).
func (d *Diagnostic) setLine(line []byte) {
	if line == nil || len(line) > maxSourceLine {
		return
	}
	text := strings.TrimRight(string(line), " \t\r")
	trimmed := strings.TrimLeft(text, " \t")
	if trimmed == "" || !utf8.ValidString(trimmed) {
		return
	}
	d.Source = trimmed
	d.lead = 1 + len(text) - len(trimmed)
}

// maxSourceLine bounds the text of a line a diagnostic quotes.
const maxSourceLine = 240

// nthLine returns line n (from 1) of data, without its newline; nil when
// there is none.
func nthLine(data []byte, n int) []byte {
	for i := 1; i < n; i++ {
		j := bytes.IndexByte(data, '\n')
		if j < 0 {
			return nil
		}
		data = data[j+1:]
	}
	if j := bytes.IndexByte(data, '\n'); j >= 0 {
		data = data[:j]
	}
	return data
}

// Public renders the diagnostic for MCP clients: as String, without the
// line's text and without what Msg quotes of the file (Quotes).
func (d Diagnostic) Public() string {
	msg := d.Msg
	if d.Quotes {
		msg = elideQuotes(msg)
	}
	return d.render(msg)
}

func (d Diagnostic) render(msg string) string {
	var b strings.Builder
	b.WriteString(d.File)
	if d.Line > 0 {
		fmt.Fprintf(&b, ":%d", d.Line)
		if d.Column > 0 {
			fmt.Fprintf(&b, ":%d", d.Column)
		}
	}
	b.WriteString(": ")
	if d.Warning {
		b.WriteString("warning: ")
	}
	if d.State != "" {
		fmt.Fprintf(&b, "state %s: ", d.State)
	}
	b.WriteString(msg)
	return b.String()
}

// quoted matches what a message quotes: "..." (esbuild, the bundler of
// package xstate/js, quotes tokens and names so).
var quoted = regexp.MustCompile(`"[^"]*"`)

// elideQuotes replaces what a message quotes by "…", but for one or two
// characters (punctuation: Expected ";").
func elideQuotes(msg string) string {
	return quoted.ReplaceAllStringFunc(msg, func(q string) string {
		if len([]rune(q)) <= 4 {
			return q
		}
		return `"…"`
	})
}

// LoadError lists the errors that stop a machine file from loading.
type LoadError struct {
	File  string
	Diags []Diagnostic // errors only
	Err   error        // the error behind them, when there is one
	// Machine is the id of the machine the file makes, when it was read
	// that far (it compiled, but its implementations are missing).
	Machine string
}

func (e *LoadError) Error() string {
	lines := make([]string, len(e.Diags))
	for i, d := range e.Diags {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// Public renders the error for MCP clients: each diagnostic's Public.
func (e *LoadError) Public() string {
	lines := make([]string, len(e.Diags))
	for i, d := range e.Diags {
		lines[i] = d.Public()
	}
	return strings.Join(lines, "\n")
}

// PublicError renders a machine file's load error for MCP clients: a
// LoadError's Public (no line of the file, nothing it quotes of it), any
// other error as it is.
func PublicError(err error) string {
	var le *LoadError
	if errors.As(err, &le) {
		return strings.Replace(err.Error(), le.Error(), le.Public(), 1)
	}
	return err.Error()
}

// Unwrap lets errors.Is match ErrInvalid, and the error behind the
// diagnostics (ErrNoMachine, say).
func (e *LoadError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}
