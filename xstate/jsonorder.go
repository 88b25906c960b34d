package xstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
)

// object is a JSON object whose keys are in the order JavaScript gives them
// (Object.keys): integer-like keys first in ascending order, then the other
// keys in the order written. XState's document order follows it.
type object struct {
	keys []string
	vals map[string]any
	// undef are the keys a JavaScript object set to undefined, which
	// vals leaves out (an assign removes them from the context).
	undef []string
	// all is every key in order, the undefined ones too; nil when no key
	// is undefined (then keys is every key).
	all  []string
	line int // the line of the opening brace
}

// allKeys returns every key in order, those set to undefined included.
func (o *object) allKeys() []string {
	if o.all != nil {
		return o.all
	}
	return o.keys
}

func (o *object) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// decodeOrdered parses JSON into *object, []any, string, float64, bool and
// nil. Syntax errors name the line and column.
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	p := &orderedParser{dec: dec, data: data}
	v, err := p.value()
	if err != nil {
		return nil, p.position(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, p.position(errors.New("unexpected data after the top-level value"))
	}
	return v, nil
}

type orderedParser struct {
	dec  *json.Decoder
	data []byte
}

func (p *orderedParser) line(offset int64) int {
	if offset > int64(len(p.data)) {
		offset = int64(len(p.data))
	}
	return bytes.Count(p.data[:offset], []byte("\n")) + 1
}

func (p *orderedParser) position(err error) error {
	var se *json.SyntaxError
	off := p.dec.InputOffset()
	if errors.As(err, &se) {
		off = se.Offset
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = errors.New("unexpected end of JSON input")
	}
	if off > int64(len(p.data)) {
		off = int64(len(p.data))
	}
	line := p.line(off)
	col := off - int64(bytes.LastIndexByte(p.data[:off], '\n'))
	return &posError{Line: line, Col: int(col), Err: err}
}

type posError struct {
	Line, Col int
	Err       error
}

func (e *posError) Error() string { return fmt.Sprintf("line %d, column %d: %v", e.Line, e.Col, e.Err) }
func (e *posError) Unwrap() error { return e.Err }

func (p *orderedParser) value() (any, error) {
	start := p.dec.InputOffset()
	tok, err := p.dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &object{vals: map[string]any{}, line: p.line(start + p.leadingSpace(start))}
			for p.dec.More() {
				kt, err := p.dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				v, err := p.value()
				if err != nil {
					return nil, err
				}
				if _, dup := o.vals[k]; !dup {
					o.keys = append(o.keys, k)
				}
				o.vals[k] = v
			}
			if _, err := p.dec.Token(); err != nil {
				return nil, err
			}
			o.keys = jsKeyOrder(o.keys)
			return o, nil
		case '[':
			arr := []any{}
			for p.dec.More() {
				v, err := p.value()
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := p.dec.Token(); err != nil {
				return nil, err
			}
			return arr, nil
		}
	case json.Number:
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			return nil, fmt.Errorf("number %s: %w", t, err)
		}
		return f, nil
	case string, bool, nil:
		return t, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// leadingSpace counts the white space before the next token.
func (p *orderedParser) leadingSpace(off int64) int64 {
	n := int64(0)
	for i := off; i < int64(len(p.data)); i++ {
		switch p.data[i] {
		case ' ', '\t', '\r', '\n', ',', ':':
			n++
			continue
		}
		break
	}
	return n
}

// isArrayIndex reports whether a key is an array index to JavaScript: the
// canonical decimal form of an integer below 2^32-1.
func isArrayIndex(k string) (uint64, bool) {
	if k == "" || len(k) > 10 || (len(k) > 1 && k[0] == '0') || k[0] < '0' || k[0] > '9' {
		return 0, false
	}
	n, err := strconv.ParseUint(k, 10, 64)
	if err != nil || n >= 1<<32-1 {
		return 0, false
	}
	return n, true
}

// jsKeyOrder orders keys as Object.keys does.
func jsKeyOrder(keys []string) []string {
	if !slices.ContainsFunc(keys, func(k string) bool { _, ok := isArrayIndex(k); return ok }) {
		return keys
	}
	var ints []string
	rest := keys[:0:0]
	for _, k := range keys {
		if _, ok := isArrayIndex(k); ok {
			ints = append(ints, k)
		} else {
			rest = append(rest, k)
		}
	}
	if len(ints) == 0 {
		return keys
	}
	sort.Slice(ints, func(i, j int) bool {
		a, _ := isArrayIndex(ints[i])
		b, _ := isArrayIndex(ints[j])
		return a < b
	})
	return append(ints, rest...)
}

// plain converts an ordered value to plain Go JSON values (map[string]any).
func plain(v any) any {
	switch x := v.(type) {
	case *object:
		m := make(map[string]any, len(x.keys))
		for _, k := range x.keys {
			m[k] = plain(x.vals[k])
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plain(e)
		}
		return out
	case undefinedValue:
		return nil // in an array; JSON's null
	}
	return v
}
