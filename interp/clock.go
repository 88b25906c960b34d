package interp

import (
	"cmp"
	"slices"
)

// Clock schedules the delayed events of actors. Times are in milliseconds,
// as in XState.
type Clock interface {
	Now() float64
	SetTimeout(fn func(), ms float64) TimerID
	ClearTimeout(id TimerID)
}

// TimerID identifies a timer of a Clock.
type TimerID uint64

// SimClock is a clock that moves only when told, with the semantics of
// XState's SimulatedClock: Advance moves the time first, then fires the
// timers that are due in order of due time (ties in the order they were
// set). A timer set or cleared while they fire restarts the round, so a
// timer set meanwhile counts from the new time and fires in the same
// Advance only when it is already due and the round had timers left, as in
// XState. A SimClock is not safe for concurrent use.
type SimClock struct {
	now         float64
	seq         TimerID
	timers      []simTimer
	flushing    bool
	invalidated bool
	round       []simTimer // reused by flush
}

type simTimer struct {
	id    TimerID
	start float64
	ms    float64
	fn    func()
}

// NewSimClock returns a simulated clock at time 0.
func NewSimClock() *SimClock { return &SimClock{} }

// Now returns the simulated time.
func (c *SimClock) Now() float64 { return c.now }

// SetTimeout schedules fn to run ms after now.
func (c *SimClock) SetTimeout(fn func(), ms float64) TimerID {
	c.invalidated = c.flushing
	c.seq++
	c.timers = append(c.timers, simTimer{id: c.seq, start: c.now, ms: ms, fn: fn})
	return c.seq
}

// ClearTimeout cancels a timer.
func (c *SimClock) ClearTimeout(id TimerID) {
	c.invalidated = c.flushing
	c.remove(id)
}

func (c *SimClock) remove(id TimerID) bool {
	for i := range c.timers {
		if c.timers[i].id == id {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return true
		}
	}
	return false
}

// Pending returns the number of timers not yet fired.
func (c *SimClock) Pending() int { return len(c.timers) }

// Advance moves the clock on by ms and fires the timers that are due.
func (c *SimClock) Advance(ms float64) {
	c.now += ms
	c.flush()
}

// maxFlushRounds bounds the rounds of one Advance: timers that keep
// setting timers already due (a zero delay that reenters its state while
// another timer waits) restart the round without end. XState's
// SimulatedClock recurses until its stack overflows; stategate stops
// firing, and the timers left stay pending.
const maxFlushRounds = 10_000

func (c *SimClock) flush() {
	if c.flushing {
		c.invalidated = true
		return
	}
	c.flushing = true
	defer func() { c.flushing = false }()
	for range maxFlushRounds {
		due := false
		for _, t := range c.timers {
			if c.now-t.start >= t.ms {
				due = true
				break
			}
		}
		if !due {
			return
		}
		round := append(c.round[:0], c.timers...)
		c.round = round
		slices.SortStableFunc(round, func(a, b simTimer) int {
			return cmp.Compare(a.start+a.ms, b.start+b.ms)
		})
		restart := false
		for _, t := range round {
			if c.invalidated {
				// A timer was set or cleared: the round starts over.
				c.invalidated, restart = false, true
				break
			}
			if c.now-t.start >= t.ms {
				c.remove(t.id)
				t.fn()
			}
		}
		if !restart {
			return
		}
	}
}
