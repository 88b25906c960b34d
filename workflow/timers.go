package workflow

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
)

// actorClock is the clock of the actors a step runs: it tells the time of
// the instances' clock as the step begins, and never fires; the scheduler
// fires due timers.
type actorClock struct {
	now float64
	seq interp.TimerID
}

func (x *Instances) actorClock() *actorClock {
	return &actorClock{now: float64(x.clock.Now().UnixMilli())}
}

func (c *actorClock) Now() float64 { return c.now }
func (c *actorClock) SetTimeout(func(), float64) interp.TimerID {
	c.seq++
	return c.seq
}
func (c *actorClock) ClearTimeout(interp.TimerID) {}

// scheduler knows the pending timers of instances, to fire them when
// they are due, including timers that fell due while the server was down.
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

// drop forgets one timer of an instance (one that fired, or cannot).
func (s *scheduler) drop(k store.Key, t store.Timer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.due[k]
	for i, x := range ts {
		if x.Same(t) && x.Due.Equal(t.Due) {
			ts = append(ts[:i:i], ts[i+1:]...)
			break
		}
	}
	if len(ts) == 0 {
		delete(s.due, k)
	} else {
		s.due[k] = ts
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
// timers as they fall due on the instances' clock, until ctx ends.
// Overdue timers fire at once. On a store.Shared it loads nothing: it
// claims the instances whose timers are due from the store, with the
// other replicas, and keeps this replica's run alive (shared.go).
func (x *Instances) RunTimers(ctx context.Context) error {
	if x.shared != nil {
		return x.runSharedTimers(ctx)
	}
	if err := x.loadStored(ctx); err != nil {
		return err
	}
	s := x.sched
	for {
		k, t, ok := s.next()
		if !ok {
			select {
			case <-ctx.Done():
				return nil
			case <-s.wake:
			}
			continue
		}
		d := t.Due.Sub(x.clock.Now())
		if d <= 0 {
			x.fireTimer(ctx, k, t)
			continue
		}
		timer := x.clock.NewTimer(d)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-s.wake:
			timer.Stop()
		case <-timer.Chan():
			x.fireTimer(ctx, k, t)
		}
	}
}

// loadStored learns, once, the pending timers and the waiting calls of
// every stored instance (those this process stores are known as it
// stores them).
func (x *Instances) loadStored(ctx context.Context) error {
	x.loadMu.Lock()
	defer x.loadMu.Unlock()
	if x.loaded {
		return nil
	}
	keys, err := x.store.List(ctx)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if k.IsMeta() {
			continue
		}
		rec, _, err := x.store.Load(ctx, k)
		if err != nil {
			continue
		}
		if len(rec.Timers) > 0 {
			x.sched.set(k, rec.Timers)
		}
		if rec.Pending != nil {
			x.setPending(k, rec.Pending)
		}
	}
	x.loaded = true
	return nil
}

// fireTimer delivers a due timer's event to its instance and stores the
// result (subscribers are told).
func (x *Instances) fireTimer(ctx context.Context, k store.Key, t store.Timer) {
	w := x.Workflow(k.Machine)
	if w == nil {
		x.sched.drop(k, t) // the workflow is not served (now)
		return
	}
	h, err := x.Hold(ctx, w, k.Handle)
	if err != nil {
		x.sched.drop(k, t) // ended, or a handle no longer valid
		return
	}
	defer h.Release()
	x.fireHeld(ctx, h, t)
}

// fireHeld fires a timer of a held instance, if it is still one of its
// timers, due when it was (else the timer was cancelled or moved, and the
// scheduler is told the instance's timers); it reports whether it fired
// it and stored the result.
func (x *Instances) fireHeld(ctx context.Context, h *Hold, t store.Timer) bool {
	w, k := h.w, instanceKey(h.w, h.handle)
	in, err := h.Load(ctx)
	if err != nil {
		x.log.Error("timer: cannot load instance", "machine", w.ID, "handle", k.Handle, "err", err)
		x.dropTimer(k, t)
		return false
	}
	var current *store.Timer
	for i := range in.Timers {
		if in.Timers[i].Same(t) {
			current = &in.Timers[i]
		}
	}
	if current == nil || !current.Due.Equal(t.Due) {
		x.dropTimer(k, t) // cancelled or moved meanwhile
		x.setTimers(k, in.Timers)
		return false
	}
	ev, _ := interp.EventFromObject(current.Event)
	sys := SystemPrincipal()
	ev.Data = maps.Clone(ev.Data)
	if ev.Data == nil {
		ev.Data = map[string]any{}
	}
	ev.Data["principal"] = eventPrincipal(sys)
	out := x.step(ctx, in, ev, current)
	if out.crash != nil {
		// Dropped, so that it does not fire (and fail) again and again.
		out = stepOutcome{snap: in.Snapshot, timers: withoutTimer(in.Timers, *current)}
	} else if out.snap.Status == interp.StatusError && in.Snapshot.Status != interp.StatusError {
		x.log.Error("timer: the machine failed; the instance keeps its state", "machine", w.ID, "handle", k.Handle, "event", ev.Type, "err", out.snap.Err())
		out = stepOutcome{snap: in.Snapshot, timers: withoutTimer(in.Timers, *current)}
	}
	if _, err := h.save(ctx, in, out.snap, out.timers, in.Pending, &store.AuditEntry{Tool: TimerTool, Event: ev.Object(), Principal: &sys}); err != nil {
		if x.shared != nil && errors.Is(err, store.ErrConflict) {
			// Another replica moved it first (fired it, or an event):
			// its next claim tells.
			return false
		}
		x.log.Error("timer: cannot store instance", "machine", w.ID, "handle", k.Handle, "err", err)
		x.dropTimer(k, t)
		return false
	}
	attrs := []any{"machine", w.ID, "handle", k.Handle, "event", ev.Type}
	if len(t.Path) > 0 {
		attrs = append(attrs, "child", strings.Join(t.Path, "/"))
	}
	if t.To != "" {
		attrs = append(attrs, "to", t.To)
	}
	x.log.Info("timer fired", attrs...)
	return true
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
