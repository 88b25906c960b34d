package xstate

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// flatMachine is a machine of n states (and its root), one per line, each
// with `per` transitions on events E0, E1, ... to the next state; bad
// adds a transition to a state that does not exist at the end, which only
// the compile (interp.New) would report.
func flatMachine(n, per int, bad bool) string {
	var b strings.Builder
	b.WriteString("{\"id\":\"big\",\"initial\":\"s0\",\"states\":{\n")
	for i := range n {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, "\"s%d\":{\"on\":{", i)
		for e := range per {
			if e > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "\"E%d\":\"s%d\"", e, (i+1)%n)
		}
		b.WriteString("}}")
	}
	if bad {
		b.WriteString(",\n\"broken\":{\"on\":{\"GO\":\"nowhere\"}}")
	}
	b.WriteString("\n}}\n")
	return b.String()
}

// TestMachineSizeLimits: a machine of more states or transitions than
// MaxStates and MaxTransitions is refused while its config is read, with
// an error that names the limit, the file, the line and the state where it
// was crossed, and before the compile (the compile's own errors are not
// reported); one at the limits loads.
func TestMachineSizeLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		src    string
		ok     bool
		want   []string
		notAny []string
	}{
		{name: "states at the limit", src: flatMachine(MaxStates-1, 1, false), ok: true},
		{name: "one state over", src: flatMachine(MaxStates, 1, true),
			want:   []string{fmt.Sprintf("big.json:%d:", MaxStates+1), fmt.Sprintf(" state s%d:", MaxStates-1), "more than 5000 states", "xstate.MaxStates"},
			notAny: []string{"nowhere"}},
		{name: "transitions at the limit", src: flatMachine(MaxTransitions/4, 4, false), ok: true},
		{name: "one transition over", src: flatMachine(MaxTransitions/4+1, 4, true),
			want:   []string{fmt.Sprintf("big.json:%d:", MaxTransitions/4+2), fmt.Sprintf(" state s%d:", MaxTransitions/4), "more than 10000 transitions", "xstate.MaxTransitions"},
			notAny: []string{"nowhere"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _, err := ParseJSON("big.json", []byte(tc.src))
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				if m == nil {
					t.Fatal("no machine")
				}
				return
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			var le *LoadError
			if !errors.As(err, &le) || len(le.Diags) != 1 {
				t.Fatalf("want one diagnostic, got %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			for _, w := range tc.notAny {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error %q has %q: the machine was compiled", err, w)
				}
			}
		})
	}
}
