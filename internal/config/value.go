package config

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

// Object is an object of a config: a JSON object, or an object a module
// built, whose keys are in the order JavaScript gives them (Object.keys):
// integer-like keys first in ascending order, then the other keys in the
// order written. XState's document order follows it.
type Object struct {
	Keys []string
	Vals map[string]any
	// Undef are the keys a JavaScript object set to undefined, which Vals
	// leaves out (an assign removes them from the context).
	Undef []string
	// All is every key in order, the undefined ones too; nil when no key
	// is undefined (then Keys is every key).
	All  []string
	Line int // the line of the opening brace (0 for a module's)
	col  int // the column of the opening brace (0 for a module's)
	// at is where each key is written, in the order written (a JSON
	// config's; nil for a module's): see Pos.
	at []keyPos
}

// pos is a place in a JSON text: a line, and a column in bytes, from 1.
type pos struct{ line, col int }

// keyPos is where a key of a JSON object is (its opening quote) and, when
// its value is an array, where each element is.
type keyPos struct {
	key string
	pos
	elems []pos
}

// Pos returns where key k is written in the JSON the object was decoded
// from (its last occurrence, the one whose value is kept), and whether
// that is known.
func (o *Object) Pos(k string) (line, col int, ok bool) {
	if kp := o.keyPos(k); kp != nil {
		return kp.line, kp.col, true
	}
	return 0, 0, false
}

// ElemPos returns where element i of the array that is the value of key k
// is written, and whether that is known.
func (o *Object) ElemPos(k string, i int) (line, col int, ok bool) {
	if kp := o.keyPos(k); kp != nil && i >= 0 && i < len(kp.elems) {
		return kp.elems[i].line, kp.elems[i].col, true
	}
	return 0, 0, false
}

func (o *Object) keyPos(k string) *keyPos {
	for i := len(o.at) - 1; i >= 0; i-- {
		if o.at[i].key == k {
			return &o.at[i]
		}
	}
	return nil
}

// AllKeys returns every key in order, those set to undefined included.
func (o *Object) AllKeys() []string {
	if o.All != nil {
		return o.All
	}
	return o.Keys
}

// Get returns the value of a key, and whether the object has it.
func (o *Object) Get(k string) (any, bool) {
	v, ok := o.Vals[k]
	return v, ok
}

// Undefined stands for JavaScript's undefined among the values of a
// module's config (and of a JavaScript runtime's values, for Go).
type Undefined struct{}

// Decode parses JSON into *Object, []any, string, float64, bool and nil.
// A syntax error is a *PosError, which names the line and column.
func Decode(data []byte) (any, error) {
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
	// at and lines are where line counted up to, and the newlines before
	// it: objects come in order, so each line is counted once (counting
	// from the start for each object took 72% of loading a 3.7 MiB
	// machine).
	at    int64
	lines int
	// elems are the positions of the elements of the array read last.
	elems []pos
}

func (p *orderedParser) line(offset int64) int {
	if offset > int64(len(p.data)) {
		offset = int64(len(p.data))
	}
	if offset < p.at {
		return bytes.Count(p.data[:offset], []byte("\n")) + 1
	}
	p.lines += bytes.Count(p.data[p.at:offset], []byte("\n"))
	p.at = offset
	return p.lines + 1
}

// column is the column of offset, in bytes from 1.
func (p *orderedParser) column(offset int64) int {
	if offset > int64(len(p.data)) {
		offset = int64(len(p.data))
	}
	return int(offset) - bytes.LastIndexByte(p.data[:offset], '\n')
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
	return &PosError{Line: p.line(off), Col: p.column(off), Err: err}
}

// PosError is a JSON syntax error, with where it is.
type PosError struct {
	Line, Col int
	Err       error
}

func (e *PosError) Error() string { return fmt.Sprintf("line %d, column %d: %v", e.Line, e.Col, e.Err) }
func (e *PosError) Unwrap() error { return e.Err }

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
			brace := start + p.leadingSpace(start)
			o := &Object{Vals: map[string]any{}, Line: p.line(brace), col: p.column(brace)}
			for p.dec.More() {
				koff := p.dec.InputOffset()
				koff += p.leadingSpace(koff)
				kt, err := p.dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				o.at = append(o.at, keyPos{key: k, pos: pos{p.line(koff), p.column(koff)}})
				v, err := p.value()
				if err != nil {
					return nil, err
				}
				if _, isArr := v.([]any); isArr {
					o.at[len(o.at)-1].elems, p.elems = p.elems, nil
				}
				if _, dup := o.Vals[k]; !dup {
					o.Keys = append(o.Keys, k)
				}
				o.Vals[k] = v
			}
			if _, err := p.dec.Token(); err != nil {
				return nil, err
			}
			o.Keys = KeyOrder(o.Keys)
			return o, nil
		case '[':
			arr := []any{}
			var elems []pos
			for p.dec.More() {
				eoff := p.dec.InputOffset()
				eoff += p.leadingSpace(eoff)
				elems = append(elems, pos{p.line(eoff), p.column(eoff)})
				v, err := p.value()
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			p.elems = elems
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

// KeyOrder orders keys as Object.keys does.
func KeyOrder(keys []string) []string {
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

// Plain converts a config's value to plain Go JSON values (map[string]any
// for an *Object).
func Plain(v any) any {
	switch x := v.(type) {
	case *Object:
		m := make(map[string]any, len(x.Keys))
		for _, k := range x.Keys {
			m[k] = Plain(x.Vals[k])
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Plain(e)
		}
		return out
	case Undefined:
		return nil // in an array; JSON's null
	}
	return v
}
