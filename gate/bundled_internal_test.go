package gate

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
	"github.com/stategate/stategate/xstate/js"
)

// The walk of the bundled machines: every machine the machines folder
// serves is explored breadth-first from its initial state, over every
// event tool the gate lists (called with arguments that its input schema
// accepts) and over its timers (the earliest pending one fires). Reached
// states are told apart by their persisted snapshot and by when their
// timers fall due from now.
const (
	// walkDepth is how many calls and timers deep the states checked
	// are; each is then explored walkAhead further to find a way out.
	walkDepth = 6
	walkAhead = 10
	// walkLimit bounds the states explored per machine.
	walkLimit = 50000
)

// walkNode is one reached state of an instance: its snapshot, its pending
// timers and the simulated time.
type walkNode struct {
	snap   *interp.Snapshot
	timers []interp.PendingTimer
	now    float64
	depth  int
	path   []string // the calls and timers that reached it
	next   []int    // the states one call or timer away
	goal   bool     // done or failed: the reset tool is listed
	listed []string // the event tools listed
}

// TestBundledMachinesNeverStrand walks every bundled machine and fails when
// a reachable state strands an agent: the instance is active but lists no
// event tool and has no timer pending, or no sequence of calls and timers
// leads from it to a state where the reset tool is listed (the workflow is
// done or failed).
func TestBundledMachinesNeverStrand(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	g := New(Options{Store: store.NewMemory(), Logger: log})
	lib := workflow.NewLibrary(workflow.LibraryOptions{Dir: "../machines", Loader: &xstate.Loader{Modules: &js.Host{}}, Logger: log, Serve: g.Reloaded})
	if err := lib.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if errs := lib.Errors(); len(errs) > 0 {
		t.Fatalf("bundled machines that fail to load: %v", errs)
	}
	ms := g.Workflows()
	if len(ms) == 0 {
		t.Fatal("no bundled machine is served")
	}
	for _, m := range ms {
		t.Run(m.ID, func(t *testing.T) {
			for _, p := range walkMachine(t, g, m) {
				t.Error(p)
			}
		})
	}
}

// TestWalkFindsStrandedStates checks the walk on a machine that strands
// an agent both ways: in stuck nothing is listed and no timer is pending;
// from loop, waiting and its timer lead only back to loop.
func TestWalkFindsStrandedStates(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "bad.json")
	src := `{"id":"bad","initial":"start","states":{
		"start":{"on":{"STICK":"stuck","LOOP":"loop","FINISH":"end"}},
		"stuck":{},
		"loop":{"on":{"WAIT":"waiting"}},
		"waiting":{"after":{"1000":"loop"}},
		"end":{"type":"final"}}}`
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	m, _, err := workflow.Load(&xstate.Loader{Modules: &js.Host{}}, f, "")
	if err != nil {
		t.Fatal(err)
	}
	g := New(Options{Store: store.NewMemory(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	got := strings.Join(walkMachine(t, g, m), "\n")
	for _, want := range []string{
		"stranded in state stuck after bad_stick {}",
		"no way to a final state or the reset tool from state loop",
		"no way to a final state or the reset tool from state waiting",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the walk did not report %q; it reported:\n%s", want, got)
		}
	}
	if strings.Contains(got, "state start") || strings.Contains(got, "state end") {
		t.Errorf("the walk reported a state that can finish:\n%s", got)
	}
}

// walkMachine walks a machine and returns what strands an agent.
func walkMachine(t *testing.T, g *Gate, m *workflow.Workflow) (problems []string) {
	args := map[string][]map[string]any{}
	for _, tl := range m.Tools {
		args[tl.Name] = argumentSets(t, m, tl)
	}
	var nodes []*walkNode
	seen := map[string]int{}
	add := func(n *walkNode) int {
		k := nodeKey(t, n)
		if i, ok := seen[k]; ok {
			return i
		}
		v := g.viewOf(g.served.Load(), m, n.snap)
		n.goal = slices.Contains(v.tools, m.ResetTool)
		for _, name := range v.tools {
			if name != m.StatusTool && name != m.ResetTool {
				n.listed = append(n.listed, name)
			}
		}
		seen[k] = len(nodes)
		nodes = append(nodes, n)
		return len(nodes) - 1
	}
	start := interp.NewActor(m.Machine, interp.ActorOptions{ID: m.ID})
	start.Start()
	add(&walkNode{snap: detachedSnapshot(start), timers: start.PendingTimers()})
	start.Stop()

	for i := 0; i < len(nodes); i++ {
		n := nodes[i]
		if n.depth >= walkDepth+walkAhead || n.snap.Status != interp.StatusActive {
			continue
		}
		if len(nodes) > walkLimit {
			t.Fatalf("more than %d states within %d steps: walk a smaller depth", walkLimit, walkDepth+walkAhead)
		}
		for _, name := range n.listed {
			tl := toolNamed(m, name)
			for _, a := range args[name] {
				ev := eventOf(tl.Event, a, m.HandleKey, anonymous())
				if ok, err := n.snap.Can(ev); err != nil || !ok {
					continue // REJECTED: the instance stays where it is
				}
				next := walkStep(n, m, ev, false)
				if next.snap.Status == interp.StatusError {
					t.Fatalf("after %s, %s with %v fails the machine: %v", walkPath(n), name, a, next.snap.Err())
				}
				js, _ := json.Marshal(a)
				next.path = append(slices.Clip(n.path), fmt.Sprintf("%s %s", name, js))
				n.next = append(n.next, add(next))
			}
		}
		if len(n.timers) > 0 {
			next := walkStep(n, m, interp.Event{}, true)
			if next.snap.Status == interp.StatusError {
				t.Fatalf("after %s, a timer fails the machine: %v", walkPath(n), next.snap.Err())
			}
			next.path = append(slices.Clip(n.path), "(timer)")
			n.next = append(n.next, add(next))
		}
	}

	// Which states lead to one where the reset tool is listed.
	out := make([]bool, len(nodes))
	for changed := true; changed; {
		changed = false
		for i, n := range nodes {
			if !out[i] && (n.goal || slices.ContainsFunc(n.next, func(j int) bool { return out[j] })) {
				out[i], changed = true, true
			}
		}
	}
	checked := 0
	for i, n := range nodes {
		if n.depth > walkDepth {
			continue
		}
		checked++
		if n.snap.Status == interp.StatusActive && len(n.listed) == 0 && len(n.timers) == 0 {
			problems = append(problems, fmt.Sprintf("stranded in state %s after %s: active, no event tool listed, no timer pending", workflow.StateString(n.snap), walkPath(n)))
		} else if !out[i] {
			problems = append(problems, fmt.Sprintf("no way to a final state or the reset tool from state %s (reached by %s) within %d calls or timers; tools listed: %v",
				workflow.StateString(n.snap), walkPath(n), walkAhead, n.listed))
		}
	}
	t.Logf("%s: %d states checked (%d explored)", m.ID, checked, len(nodes))
	return problems
}

// walkStep runs one call (or, with timer set, the earliest pending timer)
// on a state and returns the state it leads to.
func walkStep(n *walkNode, m *workflow.Workflow, ev interp.Event, timer bool) *walkNode {
	clock := interp.NewSimClock()
	clock.Advance(n.now)
	a := interp.NewActor(m.Machine, interp.ActorOptions{ID: m.ID, Snapshot: n.snap, Timers: n.timers, Clock: clock})
	a.Start()
	if timer {
		due := math.Inf(1)
		for _, tm := range n.timers {
			due = min(due, tm.Due)
		}
		clock.Advance(max(due-n.now, 0))
	} else {
		a.Send(ev)
	}
	next := &walkNode{snap: detachedSnapshot(a), timers: a.PendingTimers(), now: clock.Now(), depth: n.depth + 1}
	a.Stop()
	return next
}

// nodeKey tells states apart: the persisted snapshot, and the pending
// timers with the time until they fall due.
func nodeKey(t *testing.T, n *walkNode) string {
	data, err := n.snap.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	ts := slices.Clone(n.timers)
	slices.SortFunc(ts, func(a, b interp.PendingTimer) int {
		return cmp.Or(cmp.Compare(a.Due, b.Due), strings.Compare(a.ID, b.ID))
	})
	var b strings.Builder
	b.Write(data)
	for _, tm := range ts {
		fmt.Fprintf(&b, "|%s %s %s %g", tm.ID, strings.Join(tm.Path, "/"), tm.To, tm.Due-n.now)
	}
	return b.String()
}

func walkPath(n *walkNode) string {
	if len(n.path) == 0 {
		return "the start"
	}
	return strings.Join(n.path, ", ")
}

func toolNamed(m *workflow.Workflow, name string) *workflow.Tool {
	for _, tl := range m.Tools {
		if tl.Name == name {
			return tl
		}
	}
	return nil
}

// argumentSets makes the arguments a walk calls a tool with: every
// combination of values for the properties of its input schema, each
// property's `examples` when it has some, else its `enum`, else a value of
// its type within its bounds; properties that are not required are left
// out unless they have examples. Each set must pass the tool's schema.
func argumentSets(t *testing.T, m *workflow.Workflow, tl *workflow.Tool) []map[string]any {
	props, _ := tl.Schema["properties"].(map[string]any)
	required := map[string]bool{}
	if r, ok := tl.Schema["required"].([]any); ok {
		for _, x := range r {
			if s, ok := x.(string); ok {
				required[s] = true
			}
		}
	}
	sets := []map[string]any{{}}
	for _, name := range slices.Sorted(maps.Keys(props)) {
		p, _ := props[name].(map[string]any)
		var values []any
		switch {
		case name == m.HandleKey:
			values = []any{"walk"}
		case p["examples"] != nil:
			values, _ = p["examples"].([]any)
		case !required[name]:
			continue
		case p["enum"] != nil:
			values, _ = p["enum"].([]any)
		default:
			values = []any{valueOf(p)}
		}
		var grown []map[string]any
		for _, s := range sets {
			for _, v := range values {
				c := maps.Clone(s)
				c[name] = v
				grown = append(grown, c)
			}
		}
		sets = grown
	}
	for _, s := range sets {
		// As the arguments arrive over the wire.
		data, _ := json.Marshal(s)
		var wire map[string]any
		_ = json.Unmarshal(data, &wire)
		if err := tl.Validate(wire); err != nil {
			t.Fatalf("the walk's arguments %v: %v (give the property `examples` in meta.tool.inputSchema)", s, err)
		}
	}
	return sets
}

// valueOf makes a value of a property's type within its simple bounds.
func valueOf(p map[string]any) any {
	num := func(k string) (float64, bool) { f, ok := p[k].(float64); return f, ok }
	switch p["type"] {
	case "string":
		n, _ := num("minLength")
		return strings.Repeat("x", max(int(n), 1))
	case "number", "integer":
		v := 1.0
		if lo, ok := num("minimum"); ok {
			v = max(v, lo)
		}
		if lo, ok := num("exclusiveMinimum"); ok && v <= lo {
			v = math.Floor(lo) + 1
		}
		if hi, ok := num("maximum"); ok {
			v = min(v, hi)
		}
		return v
	case "boolean":
		return true
	case "array":
		return []any{}
	case "object":
		return map[string]any{}
	}
	return nil
}

// detachedSnapshot is an actor's snapshot with its children as they are
// persisted, as the instances store it.
func detachedSnapshot(a *interp.Actor) *interp.Snapshot {
	s := a.Snapshot()
	if d, err := s.Detach(); err == nil {
		return d
	}
	return s
}
