package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/stategate/stategate/interp"
)

// Validate checks a call's arguments against the tool's input schema.
func (t *Tool) Validate(args map[string]any) error {
	if err := validate(t.schema, args); err != nil {
		return fmt.Errorf("the arguments of %s do not match its input schema: %w", t.Name, err)
	}
	return nil
}

// validate checks arguments against a compiled schema; the error says
// what is wrong, by argument.
func validate(schema *jsonschema.Schema, args map[string]any) error {
	var inst any = map[string]any{}
	if plainJSON(args) {
		inst = args
	} else if args != nil {
		// The validator wants plain JSON values.
		data, err := json.Marshal(args)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &inst); err != nil {
			return err
		}
	}
	if err := schema.Validate(inst); err != nil {
		return errors.New(schemaError(err))
	}
	return nil
}

// plainJSON reports whether v holds only the values encoding/json decodes
// to (as arguments that came over the wire do), which the validator takes
// as they are.
func plainJSON(v any) bool {
	switch x := v.(type) {
	case nil, bool, string, float64, json.Number:
		return true
	case map[string]any:
		if x == nil {
			return false
		}
		for _, e := range x {
			if !plainJSON(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range x {
			if !plainJSON(e) {
				return false
			}
		}
		return true
	}
	return false
}

// schemaError renders a validation error without the schema's URL.
func schemaError(err error) string {
	lines := strings.Split(err.Error(), "\n")
	var out []string
	for _, l := range lines[1:] {
		if l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "-")); l != "" {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return lines[0]
	}
	return strings.Join(out, "; ")
}

// MaxHandle bounds the length of a handle, in bytes.
const MaxHandle = 256

// ErrBadHandle is wrapped by CheckHandle's errors.
var ErrBadHandle = errors.New("invalid handle")

// CheckHandle reports whether a string may be a handle: 1 to MaxHandle
// bytes of UTF-8 text, with no control characters.
func CheckHandle(h string) error {
	switch {
	case h == "":
		return fmt.Errorf("%w: is required and must be a non-empty string", ErrBadHandle)
	case len(h) > MaxHandle:
		return fmt.Errorf("%w: must be at most %d bytes (it has %d)", ErrBadHandle, MaxHandle, len(h))
	case !utf8.ValidString(h):
		return fmt.Errorf("%w: must be valid UTF-8", ErrBadHandle)
	}
	for i, r := range h {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return fmt.Errorf("%w: must be printable text (a control character at byte %d)", ErrBadHandle, i)
		}
	}
	return nil
}

// Accepts reports whether a snapshot would take an event now, as a
// tool's listing decides it: the instance is active, and XState's
// snapshot.can says yes, or a guard said no after reading the event's
// payload (the call's arguments decide).
func Accepts(s *interp.Snapshot, event string) bool {
	if s.Status != interp.StatusActive {
		return false
	}
	ev, probe := interp.ProbeEvent(event)
	ok, _ := s.Can(ev)
	return ok || probe.Read()
}

// Limits of what an event carries from outside the machine (a call's
// arguments, a bound tool's output): as JSON, at most MaxEventSize bytes,
// nested at most MaxEventDepth levels, as the machine's own values are
// (the JavaScript host's rule). The event goes into the instance's audit
// trail, whose entries the store bounds at 4 MiB, and often into its
// context.
const (
	MaxEventSize  = 1 << 20
	MaxEventDepth = 1000
)

// ErrEventTooLarge is wrapped by CheckEventValue's errors.
var ErrEventTooLarge = errors.New("too large for an event")

// CheckEventValue checks a value an event would carry against
// MaxEventSize and MaxEventDepth; what names it in the error.
func CheckEventValue(what string, v any) error {
	n, depth := jsonMeasure(v, MaxEventSize, MaxEventDepth, 0)
	switch {
	case depth > MaxEventDepth:
		return fmt.Errorf("%w: %s is nested more than %d levels deep", ErrEventTooLarge, what, MaxEventDepth)
	case n > MaxEventSize:
		return fmt.Errorf("%w: %s takes more than %d bytes as JSON; the limit is %d (%d KiB)", ErrEventTooLarge, what, MaxEventSize, MaxEventSize, MaxEventSize>>10)
	}
	return nil
}

// jsonMeasure estimates the size of a JSON-like value as JSON (from above
// for strings, escapes aside) and its depth, stopping past the limits.
func jsonMeasure(v any, sizeLimit, depthLimit, depth int) (size, deepest int) {
	if depth > depthLimit {
		return 0, depth
	}
	switch x := v.(type) {
	case string:
		return len(x) + 2, depth
	case map[string]any:
		n, d := 2, depth+1
		for k, e := range x {
			s, ed := jsonMeasure(e, sizeLimit-n, depthLimit, depth+1)
			n += len(k) + 4 + s
			d = max(d, ed)
			if n > sizeLimit || d > depthLimit {
				break
			}
		}
		return n, d
	case []any:
		n, d := 2, depth+1
		for _, e := range x {
			s, ed := jsonMeasure(e, sizeLimit-n, depthLimit, depth+1)
			n += 1 + s
			d = max(d, ed)
			if n > sizeLimit || d > depthLimit {
				break
			}
		}
		return n, d
	}
	return 24, depth // a number, a boolean, null
}

// ArgsChecker returns what checks a call's arguments against a tool's
// input schema (JSON, as a tool lists it), as event tools' are checked:
// for tools whose schema the machine does not give (a Go handler's, an
// upstream server's).
func ArgsChecker(tool string, schema []byte) (func(args map[string]any) error, error) {
	var s any = map[string]any{"type": "object"}
	if len(schema) > 0 {
		if err := json.Unmarshal(schema, &s); err != nil {
			return nil, fmt.Errorf("tool %s: inputSchema: %w", tool, err)
		}
	}
	m, ok := s.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("tool %s: inputSchema is not an object", tool)
	}
	compiled, err := compileSchema(tool, m)
	if err != nil {
		return nil, fmt.Errorf("tool %s: inputSchema: %w", tool, err)
	}
	t := &Tool{Name: tool, schema: compiled}
	return t.Validate, nil
}
