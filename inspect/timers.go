package inspect

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/stategate/stategate/graph"
	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
)

// timerView is a pending timer as the pages show it: Label says what it
// does in the machine's words ("after 30m: review → expired"), Title the
// timer's own id (the page's tooltip).
type timerView struct {
	store.Timer
	Label string
	Title string
}

// timerViews labels an instance's pending timers by the machine whose
// timers they are (nil when its workflow is not served).
func timerViews(m *interp.Machine, ts []store.Timer) []timerView {
	if len(ts) == 0 {
		return nil
	}
	out := make([]timerView, len(ts))
	for i, t := range ts {
		out[i] = timerView{Timer: t, Label: timerLabel(m, t), Title: t.ID}
	}
	return out
}

// timerLabel says what a timer does. An `after` timer of the machine
// itself (XState's xstate.after.DELAY.STATE, which interp compiles into a
// delayed raise on the state's entry) reads "after DELAY: SOURCE →
// TARGET": the delay as a duration ("30m"; a named delay by its name, and
// its duration when the implementation is a number), the state that set
// it and where its transitions go (several: "a → b [guard] | c", the
// guard as the diagram names it; none: "(stays)"). Any other timer (a
// delayed raise or sendTo, a child machine's) reads as its event: "sends
// REMIND".
func timerLabel(m *interp.Machine, t store.Timer) string {
	typ, _ := t.Event["type"].(string)
	if len(t.Path) == 0 && m != nil && strings.HasPrefix(typ, "xstate.after.") {
		if n, r := afterSource(m, typ); n != nil {
			return "after " + afterDelay(m, r, typ, n) + ": " + n.PathString() + " → " + afterTargets(n.Transitions(typ))
		}
	}
	if rest, ok := strings.CutPrefix(typ, "xstate.after."); ok {
		// A child machine's, or a machine that changed since: its delay
		// and state from the id alone.
		delay, node, _ := strings.Cut(rest, ".")
		if ms, err := strconv.ParseFloat(delay, 64); err == nil {
			delay = duration(ms)
		}
		if node != "" {
			return "after " + delay + " in " + node
		}
		return "after " + delay
	}
	if typ == "" {
		return "a timer"
	}
	return "sends " + typ
}

// afterSource finds the state whose entry sets an `after` timer, and its
// raise.
func afterSource(m *interp.Machine, event string) (*interp.StateNode, *interp.RaiseAction) {
	for _, n := range m.Nodes {
		if !strings.HasSuffix(event, "."+n.ID) {
			continue
		}
		for _, a := range n.Entry {
			r, ok := a.(*interp.RaiseAction)
			if ok && r.ID != nil && r.ID.Fn == nil && r.ID.Value == event {
				return n, r
			}
		}
	}
	return nil, nil
}

// afterDelay says an `after` timer's delay: "30m", or a named delay's
// name ("window"), with its duration when its implementation is a
// number ("window (30m)").
func afterDelay(m *interp.Machine, r *interp.RaiseAction, event string, n *interp.StateNode) string {
	if r.DelayName != "" {
		if d := m.Impl.Delays[r.DelayName]; d != nil && d.Fn == nil {
			if ms, ok := number(d.Value); ok {
				return r.DelayName + " (" + duration(ms) + ")"
			}
		}
		return r.DelayName
	}
	if r.Delay != nil && r.Delay.Fn == nil {
		if ms, ok := number(r.Delay.Value); ok {
			return duration(ms)
		}
	}
	// (the id holds it: xstate.after.DELAY.ID)
	d := strings.TrimSuffix(strings.TrimPrefix(event, "xstate.after."), "."+n.ID)
	if ms, err := strconv.ParseFloat(d, 64); err == nil {
		return duration(ms)
	}
	return d
}

// afterTargets says where an `after` timer's transitions go.
func afterTargets(ts []*interp.Transition) string {
	var alts []string
	for _, t := range ts {
		var to []string
		for _, target := range t.Targets {
			to = append(to, target.PathString())
		}
		s := strings.Join(to, ", ")
		if s == "" {
			s = "(stays)"
		}
		if t.Guard != nil {
			s += " [" + graph.GuardName(t.Guard) + "]"
		}
		alts = append(alts, s)
	}
	if len(alts) == 0 {
		return "(stays)"
	}
	return strings.Join(alts, " | ")
}

// number is a delay's milliseconds.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// duration says milliseconds as a short duration: 1800000 is "30m",
// 5400000 "1h30m", 1500 "1.5s", 250 "250ms".
func duration(ms float64) string {
	d := time.Duration(ms * float64(time.Millisecond))
	if d <= 0 {
		return "0s"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
