package js

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/stategate/stategate/interp"
)

// DefaultMemory is the memory budget of a machine's JavaScript: how much
// the Go heap may grow while one call into it (or a module's top-level
// code, as it loads) runs.
const DefaultMemory = 256 << 20

// ErrMemory is wrapped by the error of a call into JavaScript (or a
// module's top-level code) that took more memory than its budget
// (Host.Memory).
var ErrMemory = errors.New("memory budget exceeded")

// The watchdog's tick: how often it looks at the calls in progress while
// JavaScript runs, and how long it waits without any before it stops.
const (
	maxTick      = 5 * time.Millisecond
	watchdogIdle = time.Second
	minForcedGap = 50 * time.Millisecond // between collections the watchdog forces
)

// Heap figures the watchdog reads (runtime/metrics), all cheap to read:
// the bytes of heap objects now, live and dead not yet swept; the bytes
// the last collection found live; and the collections completed.
const (
	metricHeapObjects = "/memory/classes/heap/objects:bytes"
	metricHeapLive    = "/gc/heap/live:bytes"
	metricGCCycles    = "/gc/cycles/total:gc-cycles"
	metricHeapGoal    = "/gc/heap/goal:bytes"
)

// watchdog bounds the JavaScript of a Host's modules: while a call into
// a runtime runs, it interrupts the call once it has run longer than the
// time limit, once the context of its step has ended, or once the Go heap
// has grown past the memory budget since the call began. It runs only
// while calls do: a module's first call after a quiet spell starts it, and
// it stops by itself when no call has run for watchdogIdle.
//
// The heap is the process's, not the call's: goja cannot say what one
// runtime holds. So a call's budget counts the growth of the live heap
// since the call began. At each tick the watchdog reads, cheaply, the
// bytes of heap objects (live, and garbage not yet collected) and the
// live bytes the last collection found: a call is interrupted once a
// collection since it began found the live heap past its start plus its
// budget. When the cheap figure passes that mark and no collection came
// since the last tick, the watchdog forces one: ordinary garbage does not
// trip it. A call that began later than another counts from later, so the
// call that keeps allocating is the one interrupted. A runtime that was
// interrupted is not used again (what it keeps in module variables goes
// with it).
type watchdog struct {
	timeout time.Duration
	budget  uint64 // 0: none
	tick    time.Duration

	mu      sync.Mutex
	mods    map[*jsModule]time.Time // modules watched, with when one of their calls last ran
	running bool

	// The watchdog goroutine's own: its samples, and the heap objects as
	// of the previous tick, which calls first seen at this tick count
	// from. (The bytes of objects, not of live ones: those are known only
	// as of the last collection, which may be long past, and a call would
	// then count what others kept since as its own. Counting from the
	// objects errs the other way, by the garbage not yet collected.)
	samples []metrics.Sample
	// confirming is set while a collection forced to confirm heavy calls
	// runs.
	confirming  atomic.Bool
	prevObjects uint64
	prevLive    uint64
	prevGCs     uint64 // collections completed as of the previous tick
	prevGoal    uint64 // the heap's goal as of the previous tick
}

func newWatchdog(timeout time.Duration, budget int64) *watchdog {
	d := &watchdog{timeout: timeout, mods: map[*jsModule]time.Time{}}
	if budget > 0 {
		d.budget = uint64(budget)
	}
	d.tick = min(maxTick, max(time.Millisecond, timeout/10))
	d.samples = []metrics.Sample{{Name: metricHeapObjects}, {Name: metricHeapLive}, {Name: metricGCCycles}, {Name: metricHeapGoal}}
	return d
}

// budgetString says the budget for messages: "256 MiB".
func (d *watchdog) budgetString() string { return humanize.IBytes(d.budget) }

// watch makes sure the watchdog looks after m's calls; it is called as a
// top-level call begins, and costs an atomic load once m is watched.
func (m *jsModule) watch() {
	if m.watching.Load() || !m.watching.CompareAndSwap(false, true) {
		return
	}
	d := m.dog
	d.mu.Lock()
	d.mods[m] = time.Now()
	start := !d.running
	d.running = true
	d.mu.Unlock()
	if start {
		go d.run()
	}
}

// run is the watchdog goroutine.
func (d *watchdog) run() {
	metrics.Read(d.samples)
	d.prevObjects, d.prevLive, d.prevGCs, d.prevGoal = d.samples[0].Value.Uint64(), d.samples[1].Value.Uint64(), d.samples[2].Value.Uint64(), d.samples[3].Value.Uint64()
	t := time.NewTicker(d.tick)
	defer t.Stop()
	var mods []*jsModule
	var lastForced time.Time
	for now := range t.C {
		mods = mods[:0]
		d.mu.Lock()
		for m := range d.mods {
			mods = append(mods, m)
		}
		d.mu.Unlock()
		metrics.Read(d.samples)
		h := heap{objects: d.samples[0].Value.Uint64(), live: d.samples[1].Value.Uint64(), gcs: d.samples[2].Value.Uint64(), goal: d.samples[3].Value.Uint64()}
		var heavy []*jsRuntime // calls past their budget by the cheap figure
		anyBusy := false
		for _, m := range mods {
			busy := d.look(m, now, h, &heavy)
			anyBusy = anyBusy || busy
			d.mu.Lock()
			if busy {
				d.mods[m] = now
			} else if now.Sub(d.mods[m]) > watchdogIdle {
				d.retire(m)
			}
			d.mu.Unlock()
		}
		if len(heavy) > 0 && h.gcs == d.prevGCs && now.Sub(lastForced) >= minForcedGap && d.confirming.CompareAndSwap(false, true) {
			// No collection since the last tick to tell: force one, beside
			// the ticks (a collection waits for a huge copy to end, and
			// meanwhile the ticks go on and may interrupt at twice the
			// budget). While a call allocates fast, collections come by
			// themselves, and the next tick reads the live heap they found.
			// Not more often than minForcedGap: in a busy process, other
			// goroutines' garbage makes calls look heavy, and a collection
			// costs the whole process.
			lastForced = now
			go func() {
				defer d.confirming.Store(false)
				d.confirm(slices.Clone(heavy))
			}()
		}
		d.prevObjects, d.prevLive, d.prevGCs, d.prevGoal = h.objects, h.live, h.gcs, h.goal
		d.mu.Lock()
		if len(d.mods) == 0 {
			d.running = false
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
	}
}

// callBase is the heap a call first seen now counts its growth from: the
// heap's objects as of the previous tick, live and garbage, but no more
// garbage than half the budget over the live heap the last collection
// found (after a call that took much, its garbage would be counted as
// room for the next; and the watchdog collects after such a call, so that
// the next does not start from its garbage). What other goroutines kept
// since the last collection counts as garbage then, and so as the call's
// own growth once a collection finds it live.
func (d *watchdog) callBase() uint64 {
	return min(d.prevObjects, d.prevLive+d.budget/2)
}

// heap is what a tick reads: the bytes of heap objects (live, and garbage
// not yet collected), the live bytes the last collection found, the
// collections completed, and the heap size at which the next collection
// is to be done.
type heap struct{ objects, live, gcs, goal uint64 }

// look examines m's calls in progress: it interrupts those past the time
// limit, those whose step's context ended, and those past their memory
// budget by the live heap a collection found since they began; it adds to
// heavy those past it by the cheap figure only. It reports whether a call
// runs.
func (d *watchdog) look(m *jsModule, now time.Time, h heap, heavy *[]*jsRuntime) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	busy := false
	for _, rt := range m.all {
		c := rt.calls.Load()
		if c%2 == 0 {
			continue
		}
		busy = true
		if c != rt.seen {
			// A call first seen: it began after the previous tick.
			rt.seen, rt.since, rt.base, rt.gcs, rt.goal = c, now, d.callBase(), d.prevGCs, d.prevGoal
			continue
		}
		switch {
		case rt.interrupted:
		case now.Sub(rt.since) >= d.timeout-d.tick/2:
			rt.interrupt(ErrInterrupted)
		case rt.ctx != nil && rt.ctx.Err() != nil:
			rt.interrupt(context.Cause(rt.ctx))
		case d.budget > 0 && h.gcs > rt.gcs && h.live > rt.base+d.budget:
			rt.interrupt(ErrMemory)
		case d.budget > 0 && h.objects > max(rt.base+d.budget+d.budget/2, satAdd(rt.goal, d.budget)):
			// Past one and a half budgets, and past the heap's goal when
			// the call began by a budget: the collector lets garbage, the
			// call's or other goroutines', grow the heap up to its goal
			// before it collects (and then stops who allocates faster than
			// it collects), so a heap that far past it has grown in a few
			// huge allocations, faster than any collection: waiting for one
			// to confirm would let a call that doubles what it holds at
			// every step (s = s + s) take gigabytes meanwhile. (Past its
			// start by one and a half budgets only, a busy process's
			// garbage, with a goal far above the call's start, would
			// interrupt a call that took nothing; past the goal as it is
			// now, the doubling call, which raises the goal with every
			// collection, would go on.)
			rt.interrupt(ErrMemory)
		case d.budget > 0 && h.objects > rt.base+d.budget:
			*heavy = append(*heavy, rt)
		}
	}
	return busy
}

// interrupt stops the runtime's call in progress with reason (under its
// module's lock); the runtime is not used again. A regular expression
// waiting for its match returns at once (jsregexp.go).
func (rt *jsRuntime) interrupt(reason error) {
	if rt.interrupted {
		return
	}
	rt.interrupted = true
	rt.tookTooMuch = errors.Is(reason, ErrMemory)
	rt.vm.Interrupt(reason)
	close(rt.stop)
}

// confirm forces a collection and interrupts the calls of heavy (still in
// progress) that are past their budget by the live heap it found.
func (d *watchdog) confirm(heavy []*jsRuntime) {
	live := collect()
	for _, rt := range heavy {
		m := rt.mod
		m.mu.Lock()
		if rt.calls.Load() == rt.seen && !rt.interrupted && live > rt.base+d.budget {
			rt.interrupt(ErrMemory)
		}
		m.mu.Unlock()
	}
}

// collect forces a collection and returns the live heap it found.
func collect() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: metricHeapLive}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// retire stops watching m (under d.mu). A call that began as it retired
// may have seen m still watched and not asked for the watchdog: it is
// looked at once more.
func (d *watchdog) retire(m *jsModule) {
	delete(d.mods, m)
	m.watching.Store(false)
	if m.busy() && m.watching.CompareAndSwap(false, true) {
		d.mods[m] = time.Now()
	}
}

// busy reports whether a top-level call runs in one of the module's
// runtimes.
func (m *jsModule) busy() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, rt := range m.all {
		if rt.calls.Load()%2 == 1 {
			return true
		}
	}
	return false
}

// interruptError is the error of a call the watchdog interrupted, naming
// the function (what) as the time limit's does.
func (rt *jsRuntime) interruptError(what string, reason any) error {
	d := rt.mod.dog
	switch r := reason.(type) {
	case error:
		switch {
		case errors.Is(r, ErrMemory):
			return fmt.Errorf("%s: %w: the Go heap grew by more than %s while it ran", what, ErrMemory, d.budgetString())
		case errors.Is(r, ErrInterrupted):
			return fmt.Errorf("%s: %w: ran longer than %v", what, ErrInterrupted, d.timeout)
		default: // the context of the step ended
			return fmt.Errorf("%s: %w: %w", what, interp.ErrStopped, r)
		}
	}
	return fmt.Errorf("%s: %w", what, ErrInterrupted)
}

// satAdd is a+b, or the largest uint64 if that overflows (the heap's goal
// is that large when collections are off).
func satAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}
