package gate

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
)

// wallClock is the clock of the actors a call runs: it tells the real
// time and never fires; the scheduler fires due timers.
type wallClock struct {
	now float64
	seq interp.TimerID
}

func newWallClock() *wallClock { return &wallClock{now: float64(time.Now().UnixMilli())} }

func (c *wallClock) Now() float64 { return c.now }
func (c *wallClock) SetTimeout(func(), float64) interp.TimerID {
	c.seq++
	return c.seq
}
func (c *wallClock) ClearTimeout(interp.TimerID) {}

// scheduler fires the stored timers of instances when they are due, on the
// real clock, including timers that fell due while the server was down.
type scheduler struct {
	mu   sync.Mutex
	due  map[store.Key][]store.Timer
	wake chan struct{}
}

func newScheduler() *scheduler {
	return &scheduler{due: map[store.Key][]store.Timer{}, wake: make(chan struct{}, 1)}
}

// set replaces an instance's pending timers.
func (s *scheduler) set(k store.Key, ts []store.Timer) {
	s.mu.Lock()
	if len(ts) == 0 {
		delete(s.due, k)
	} else {
		s.due[k] = ts
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// next returns the earliest timer.
func (s *scheduler) next() (store.Key, store.Timer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var key store.Key
	var first store.Timer
	found := false
	for k, ts := range s.due {
		for _, t := range ts {
			if !found || t.Due.Before(first.Due) {
				key, first, found = k, t, true
			}
		}
	}
	return key, first, found
}

// RunTimers loads the pending timers of every stored instance and fires
// timers as they fall due, until ctx ends. Overdue timers fire at once.
func (x *Instances) RunTimers(ctx context.Context) error {
	keys, err := x.store.List(ctx)
	if err != nil {
		return err
	}
	for _, k := range keys {
		rec, _, err := x.store.Load(ctx, k)
		if err == nil && len(rec.Timers) > 0 {
			x.sched.set(k, rec.Timers)
		}
	}
	s := x.sched
	for {
		k, t, ok := s.next()
		var wait <-chan time.Time
		if ok {
			d := time.Until(t.Due)
			if d <= 0 {
				x.fireTimer(ctx, k, t)
				continue
			}
			timer := time.NewTimer(d)
			wait = timer.C
			select {
			case <-ctx.Done():
				timer.Stop()
				return nil
			case <-s.wake:
				timer.Stop()
			case <-wait:
				x.fireTimer(ctx, k, t)
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		}
	}
}

// fireTimer delivers a due timer's event to its instance, stores the
// result and tells the sessions that see the instance.
func (x *Instances) fireTimer(ctx context.Context, k store.Key, t store.Timer) {
	m := x.workflow(k.Machine)
	drop := func() {
		x.sched.mu.Lock()
		ts := x.sched.due[k]
		for i, x := range ts {
			if x.Same(t) && x.Due.Equal(t.Due) {
				ts = append(ts[:i:i], ts[i+1:]...)
				break
			}
		}
		if len(ts) == 0 {
			delete(x.sched.due, k)
		} else {
			x.sched.due[k] = ts
		}
		x.sched.mu.Unlock()
	}
	if m == nil {
		drop() // the machine is not served (now)
		return
	}
	unlock := x.locks.lock(instanceKey(m, k.Handle))
	defer unlock()
	in, err := x.load(ctx, m, k.Handle)
	if err != nil {
		x.log.Error("timer: cannot load instance", "machine", m.ID, "handle", k.Handle, "err", err)
		drop()
		return
	}
	var current *store.Timer
	for i := range in.timers {
		if in.timers[i].Same(t) {
			current = &in.timers[i]
		}
	}
	if current == nil || !current.Due.Equal(t.Due) {
		drop() // cancelled or moved meanwhile
		x.sched.set(k, in.timers)
		return
	}
	ev, _ := interp.EventFromObject(current.Event)
	out := x.step(ctx, in, ev, current)
	if out.crash != nil {
		// Dropped, so that it does not fire (and fail) again and again.
		out = stepOutcome{snap: in.snap, timers: withoutTimer(in.timers, *current)}
	} else if out.snap.Status == interp.StatusError && in.snap.Status != interp.StatusError {
		x.log.Error("timer: the machine failed; the instance keeps its state", "machine", m.ID, "handle", k.Handle, "event", ev.Type, "err", out.snap.Err())
		out = stepOutcome{snap: in.snap, timers: withoutTimer(in.timers, *current)}
	}
	if _, err := x.save(ctx, in, out.snap, out.timers, &store.AuditEntry{Tool: "(timer)", Event: ev.Object()}); err != nil {
		x.log.Error("timer: cannot store instance", "machine", m.ID, "handle", k.Handle, "err", err)
		drop()
		return
	}
	attrs := []any{"machine", m.ID, "handle", k.Handle, "event", ev.Type}
	if len(t.Path) > 0 {
		attrs = append(attrs, "child", strings.Join(t.Path, "/"))
	}
	if t.To != "" {
		attrs = append(attrs, "to", t.To)
	}
	x.log.Info("timer fired", attrs...)
	x.notify(ctx, m, k.Handle)
}

func withoutTimer(ts []store.Timer, gone store.Timer) []store.Timer {
	var out []store.Timer
	for _, t := range ts {
		if !t.Same(gone) {
			out = append(out, t)
		}
	}
	return out
}
