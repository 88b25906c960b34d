// Package conformance runs the cases that check stategate against the
// real XState (testdata/conformance): a case names a machine, its
// implementations and input, and the steps to run (events to send, time
// to pass). Run gives the trace of what the machine shows after each
// step, in the format the oracle records (scripts/oracle.sh), and Bench
// times a case as scripts/bench-xstate.sh times XState. stategate's trace
// and bench commands, and the tests, use it.
package conformance

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/stategate/stategate/internal/config"
	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/xstate"
)

// Case is a conformance case (see testdata/conformance): a machine, its
// optional implementations and input, and the steps to run.
type Case struct {
	Path            string
	Description     string
	Machine         string // relative to the case file, or absolute
	Implementations string
	Input           any
	HasInput        bool
	Steps           []Step
}

// Step is one step of a case: an event to send, or milliseconds to advance
// the clock by.
type Step struct {
	Send    json.RawMessage // the event as written in the case
	Event   interp.Event
	Advance float64
}

// ReadCase reads a case file.
func ReadCase(path string) (*Case, error) {
	data, err := xstate.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw struct {
		Description     string            `json:"description"`
		Machine         string            `json:"machine"`
		Implementations string            `json:"implementations"`
		Input           json.RawMessage   `json:"input"`
		Steps           []json.RawMessage `json:"steps"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if raw.Machine == "" {
		return nil, fmt.Errorf("%s: the case names no machine", path)
	}
	c := &Case{Path: path, Description: raw.Description, Machine: raw.Machine, Implementations: raw.Implementations}
	if raw.Input != nil {
		c.HasInput = true
		if c.Input, err = decodePlain(raw.Input); err != nil {
			return nil, fmt.Errorf("%s: input: %w", path, err)
		}
	}
	for i, s := range raw.Steps {
		var step struct {
			Send    json.RawMessage `json:"send"`
			Advance *float64        `json:"advance"`
		}
		if err := json.Unmarshal(s, &step); err != nil {
			return nil, fmt.Errorf("%s: step %d: %w", path, i, err)
		}
		switch {
		case step.Send != nil:
			v, err := decodePlain(step.Send)
			if err != nil {
				return nil, fmt.Errorf("%s: step %d: %w", path, i, err)
			}
			obj, _ := v.(map[string]any)
			ev, ok := interp.EventFromObject(obj)
			if !ok {
				return nil, fmt.Errorf("%s: step %d: send needs an event object with a string type", path, i)
			}
			c.Steps = append(c.Steps, Step{Send: step.Send, Event: ev})
		case step.Advance != nil:
			c.Steps = append(c.Steps, Step{Advance: *step.Advance})
		default:
			return nil, fmt.Errorf("%s: step %d: unknown step %s", path, i, s)
		}
	}
	return c, nil
}

// decodePlain decodes JSON as the oracle's JSON.parse does: numbers are
// float64, and an object's keys are in JavaScript's order.
func decodePlain(data []byte) (any, error) {
	v, err := config.Decode(data)
	if err != nil {
		return nil, err
	}
	return config.Plain(v), nil
}

// Load loads the case's machine, with its implementations, as the oracle
// does: createMachine(json).provide(impl), or the module's machine. Each
// file is read in the Loader's Root, else in its own folder (a module
// imports files of its folder, and below). A case whose machine or
// implementations are JavaScript or TypeScript needs a Loader with
// Modules (package xstate/js); nil is a Loader without.
func (c *Case) Load(l *xstate.Loader) (*interp.Machine, error) {
	if l == nil {
		l = &xstate.Loader{}
	}
	file := c.resolve(c.Machine)
	var m *interp.Machine
	if strings.EqualFold(filepath.Ext(file), ".json") {
		// The config alone: not the implementations module beside it,
		// nor the Loader's Registry (the oracle's createMachine).
		root, err := xstate.OpenRoot(cmp.Or(l.Root, filepath.Dir(file)))
		if err != nil {
			return nil, err
		}
		data, err := root.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("%s: the case's machine: %w", c.Path, err)
		}
		if m, _, err = xstate.ParseJSON(file, data); err != nil {
			return nil, err
		}
	} else {
		var err error
		if m, _, err = l.LoadModule(file); err != nil {
			return nil, err
		}
	}
	if c.Implementations != "" {
		impl, err := l.LoadImplementations(c.resolve(c.Implementations))
		if err != nil {
			return nil, err
		}
		m = m.Provide(impl)
	}
	return m, nil
}

// Trace is what a case shows after each step, in the conformance format.
type Trace struct {
	Case  string      `json:"case"`
	Steps []TraceStep `json:"steps"`
}

// TraceStep is one step of a trace.
type TraceStep struct {
	Step    any      `json:"step"`
	Value   any      `json:"value"`
	Context any      `json:"context"`
	Status  string   `json:"status"`
	Tags    []string `json:"tags"`
	Enabled []string `json:"enabled"`
	Emitted []any    `json:"emitted"`
	Output  *any     `json:"output,omitempty"`
	Error   *string  `json:"error,omitempty"`
}

// JSON renders the trace as the oracle prints it.
func (t *Trace) JSON() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(t); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// resolve names a file the case names, as the oracle's path.resolve does:
// relative to the case file, unless absolute.
func (c *Case) resolve(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(filepath.Dir(c.Path), name)
}

// Run runs the case on a machine and returns its trace.
func (c *Case) Run(m *interp.Machine) *Trace {
	clock := interp.NewSimClock()
	var emitted []any
	actor := interp.NewActor(m, interp.ActorOptions{
		Input: c.Input, Clock: clock,
		OnEmit: func(e interp.Event) { emitted = append(emitted, e.Object()) },
	})
	actor.Start()
	view := func(step any) TraceStep {
		s := actor.Snapshot()
		ts := TraceStep{Step: step, Value: s.Value(), Context: s.Context, Status: s.Status.String(), Tags: s.Tags(), Enabled: []string{}, Emitted: emitted}
		if ts.Tags == nil {
			ts.Tags = []string{}
		}
		if ts.Emitted == nil {
			ts.Emitted = []any{}
		}
		emitted = nil
		for _, t := range m.EventTypes {
			if ok, err := s.Can(interp.Event{Type: t}); ok && err == nil {
				ts.Enabled = append(ts.Enabled, t)
			}
		}
		switch s.Status {
		case interp.StatusDone:
			out := s.Output()
			ts.Output = &out
		case interp.StatusError:
			msg := "undefined"
			if err := s.Err(); err != nil {
				msg = err.Error()
			}
			ts.Error = &msg
		}
		return ts
	}
	tr := &Trace{Case: c.Description, Steps: []TraceStep{view("start")}}
	for _, st := range c.Steps {
		if st.Send != nil {
			actor.Send(st.Event)
			tr.Steps = append(tr.Steps, view(map[string]json.RawMessage{"send": st.Send}))
		} else {
			clock.Advance(st.Advance)
			tr.Steps = append(tr.Steps, view(map[string]float64{"advance": st.Advance}))
		}
	}
	return tr
}

// Round runs the case once as scripts/bench-xstate.sh does: a fresh actor, every step,
// then stop; nothing is recorded. As in scripts/bench-xstate.sh, whose loop never yields
// to the microtasks that would deliver them, the outcomes of promise
// actors are not delivered (interp.ActorOptions.HoldPromises).
func (c *Case) Round(m *interp.Machine) {
	clock := interp.NewSimClock()
	a := interp.NewActor(m, interp.ActorOptions{Input: c.Input, Clock: clock, HoldPromises: true})
	a.Start()
	for _, st := range c.Steps {
		if st.Send != nil {
			a.Send(st.Event)
		} else {
			clock.Advance(st.Advance)
		}
	}
	a.Stop()
}

// BenchResult is the line scripts/bench-xstate.sh prints for a case.
type BenchResult struct {
	Case       string   `json:"case"`
	Rounds     int      `json:"rounds"`
	Steps      int      `json:"steps"`
	NsPerStep  *float64 `json:"ns_per_step"`
	NsPerRound float64  `json:"ns_per_round"`
}

// Bench times the case as scripts/bench-xstate.sh times XState: each round creates and
// starts a fresh actor, runs every step and stops it; rounds run for a
// quarter of the time to warm up, then are counted for d.
func (c *Case) Bench(m *interp.Machine, d time.Duration) BenchResult {
	round := func() { c.Round(m) }
	for warm := time.Now().Add(d / 4); time.Now().Before(warm); {
		round()
	}
	rounds := 0
	t0 := time.Now()
	end := t0.Add(d)
	now := t0
	for now.Before(end) {
		for range 16 {
			round()
		}
		rounds += 16
		now = time.Now()
	}
	ns := float64(now.Sub(t0).Nanoseconds())
	r := BenchResult{Case: lastTwo(c.Path), Rounds: rounds, Steps: len(c.Steps), NsPerRound: roundNs(ns / float64(rounds))}
	if len(c.Steps) > 0 {
		v := roundNs(ns / float64(rounds*len(c.Steps)))
		r.NsPerStep = &v
	}
	return r
}

func roundNs(f float64) float64 { return float64(int64(f + 0.5)) }

func lastTwo(p string) string {
	abs, err := filepath.Abs(p)
	if err == nil {
		p = abs
	}
	dir, file := filepath.Split(p)
	return filepath.Base(dir) + "/" + file
}
