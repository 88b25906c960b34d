// Command tracediff compares two conformance traces (the format of
// scripts/xstate/trace.mjs; see README, Correctness) and prints one line
// per difference:
//
//	go run ./internal/cmd/tracediff EXPECTED.trace.json ACTUAL.trace.json
//
// Steps are compared in order, field by field (value, context, status,
// tags, enabled, emitted, output, error), as JSON: objects without regard
// to key order, numbers by value (1 and 1.0 agree), a missing field as
// null. A difference reads
//
//	step 2 ({"send": {"type": "PAY"}}) context: expected {"paid": 30}, got {"paid": 0}
//
// and a different number of steps
//
//	steps: expected 7, got 6
//
// with values written as Python's json.dumps writes them (", " and ": ",
// non-ASCII escaped), so its lines read as those of the comparison script
// the traces were first checked with. The exit status is 0 when the traces
// agree, 1 when they differ, 2 when a file cannot be read or is not a
// trace.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"os"
	"strconv"
	"strings"
	"unicode/utf16"
)

// fields are a step's fields, compared in this order.
var fields = []string{"value", "context", "status", "tags", "enabled", "emitted", "output", "error"}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 {
		fmt.Fprintln(stderr, "usage: tracediff EXPECTED.trace.json ACTUAL.trace.json")
		return 2
	}
	expected, err := readTrace(args[0])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	actual, err := readTrace(args[1])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	diffs := differences(expected, actual)
	for _, d := range diffs {
		fmt.Fprintln(stdout, d)
	}
	if len(diffs) > 0 {
		return 1
	}
	return 0
}

// A value is a decoded JSON value: nil, bool, json.Number, string, []value
// or *object (keys in the order of the file, for printing).
type value = any

type object struct {
	keys []string
	vals map[string]value
}

func (o *object) get(k string) value { return o.vals[k] }

// readTrace reads a trace file: an object whose "steps" (missing: none)
// are objects.
func readTrace(path string) ([]*object, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	v, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	top, ok := v.(*object)
	if !ok {
		return nil, fmt.Errorf("%s: not a trace: the top level is not an object", path)
	}
	raw, ok := top.get("steps").([]value)
	if !ok && top.get("steps") != nil {
		return nil, fmt.Errorf("%s: not a trace: steps is not a list", path)
	}
	steps := make([]*object, len(raw))
	for i, s := range raw {
		if steps[i], ok = s.(*object); !ok {
			return nil, fmt.Errorf("%s: not a trace: step %d is not an object", path, i)
		}
	}
	return steps, nil
}

func differences(expected, actual []*object) []string {
	var out []string
	if len(expected) != len(actual) {
		out = append(out, fmt.Sprintf("steps: expected %d, got %d", len(expected), len(actual)))
	}
	for i := range min(len(expected), len(actual)) {
		e, a := expected[i], actual[i]
		for _, f := range fields {
			if !equal(e.get(f), a.get(f)) {
				out = append(out, fmt.Sprintf("step %d (%s) %s: expected %s, got %s",
					i, dumps(e.get("step")), f, dumps(e.get(f)), dumps(a.get(f))))
			}
		}
	}
	return out
}

// decode reads one JSON value, keeping numbers as written and the order of
// object keys.
func decode(data []byte) (value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("invalid JSON: more after the first value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (value, error) {
	t, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("invalid JSON: unexpected end")
		}
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &object{vals: map[string]value{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("invalid JSON: %w", err)
				}
				k := kt.(string) // the decoder allows only strings here
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				if _, dup := o.vals[k]; !dup {
					o.keys = append(o.keys, k)
				}
				o.vals[k] = v // the last of duplicate keys wins, as in Python and JavaScript
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("invalid JSON: %w", err)
			}
			return o, nil
		case '[':
			l := []value{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("invalid JSON: %w", err)
			}
			return l, nil
		}
		return nil, fmt.Errorf("invalid JSON: unexpected %v", t)
	default:
		return t, nil // nil, bool, json.Number, string
	}
}

// equal compares two values as JSON: objects without regard to key order,
// numbers by value.
func equal(a, b value) bool {
	switch a := a.(type) {
	case nil:
		return b == nil
	case bool:
		bb, ok := b.(bool)
		return ok && a == bb
	case string:
		bs, ok := b.(string)
		return ok && a == bs
	case json.Number:
		bn, ok := b.(json.Number)
		return ok && numbersEqual(a, bn)
	case []value:
		bl, ok := b.([]value)
		if !ok || len(a) != len(bl) {
			return false
		}
		for i := range a {
			if !equal(a[i], bl[i]) {
				return false
			}
		}
		return true
	case *object:
		bo, ok := b.(*object)
		if !ok || len(a.vals) != len(bo.vals) {
			return false
		}
		for k, v := range a.vals {
			w, ok := bo.vals[k]
			if !ok || !equal(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

// numbersEqual compares two JSON numbers: two integers exactly, otherwise
// as float64 (what both JavaScript and Python make of a number with a
// fraction or an exponent).
func numbersEqual(a, b json.Number) bool {
	if isInt(a) && isInt(b) {
		x, okx := new(big.Int).SetString(string(a), 10)
		y, oky := new(big.Int).SetString(string(b), 10)
		return okx && oky && x.Cmp(y) == 0
	}
	return float(a) == float(b)
}

// float reads a number as float64; one too large is ±Inf, as in Python
// and JavaScript. (A json.Number is always well-formed.)
func float(n json.Number) float64 {
	f, _ := strconv.ParseFloat(string(n), 64)
	return f
}

func isInt(n json.Number) bool { return !strings.ContainsAny(string(n), ".eE") }

// dumps writes a value as Python's json.dumps does by default.
func dumps(v value) string {
	var b strings.Builder
	writeValue(&b, v)
	return b.String()
}

func writeValue(b *strings.Builder, v value) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case json.Number:
		b.WriteString(pyNumber(v))
	case string:
		writeString(b, v)
	case []value:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			writeValue(b, e)
		}
		b.WriteByte(']')
	case *object:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeString(b, k)
			b.WriteString(": ")
			writeValue(b, v.vals[k])
		}
		b.WriteByte('}')
	}
}

// pyNumber writes a number as Python reads and writes it: an integer as an
// integer, anything with a fraction or an exponent as Python's repr of a
// float (the shortest digits; fixed notation from 1e-4 up to 1e16, with
// ".0" when it is whole, else d.ddde±XX).
func pyNumber(n json.Number) string {
	if isInt(n) {
		if i, ok := new(big.Int).SetString(string(n), 10); ok {
			return i.String()
		}
		return string(n)
	}
	f := float(n)
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	exp := 0
	if f != 0 {
		sci := strconv.FormatFloat(f, 'e', -1, 64)
		exp, _ = strconv.Atoi(sci[strings.IndexByte(sci, 'e')+1:])
	}
	if exp < -4 || exp >= 16 {
		return strconv.FormatFloat(f, 'e', -1, 64) // Go's form is Python's: 1e+16, 1.5e-07
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// writeString writes a string as json.dumps does with ensure_ascii: only
// printable ASCII as is; \" \\ \n \r \t \b \f; anything else as \uXXXX
// (lowercase hex, UTF-16 surrogate pairs above U+FFFF).
func writeString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r >= 0x20 && r <= 0x7e:
				b.WriteRune(r)
			case r > 0xffff:
				hi, lo := utf16.EncodeRune(r)
				fmt.Fprintf(b, `\u%04x\u%04x`, hi, lo)
			default:
				fmt.Fprintf(b, `\u%04x`, r)
			}
		}
	}
	b.WriteByte('"')
}
