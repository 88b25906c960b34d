package workflow

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stategate/stategate/store"
)

// The instances on a store.Shared: several server processes (replicas)
// keep the same instances, and none of them may trust what it holds in
// memory. What changes from the single-process case:
//
//   - every write path checks the cached instance against the store
//     before it steps (Hold: LoadIfChanged, one round trip; the record
//     moves only when it changed), and the compare-and-swap of the save
//     catches what is left; a conflict is tried again until the event
//     deadline (with a short random backoff), not a fixed five times;
//   - the change feed (store.Shared.Watch) forgets what another replica
//     changed, tells Subscribe's subscribers (the gate refreshes its
//     sessions' tool lists, the inspector its pages), and on Resync
//     forgets everything;
//   - timers are claimed from the store (ClaimTimers, with a lease) and
//     fired through the same compare-and-swap save: no replica loads
//     every instance at start, a timer fires once, and when the replica
//     that armed it died another fires it past the grace;
//   - an intent (a bound tool's call under way) of another replica keeps
//     the instance's other work waiting while that replica's run is
//     alive (store.Shared.Live), and is in doubt only once it is not;
//   - the calls waiting for an operator's approval are read from the
//     store, not from a load of every instance.

// Defaults of the replicas' timers and runs.
const (
	// DefaultTimerGrace is InstancesOptions.TimerGrace's default.
	DefaultTimerGrace = 2 * time.Second
	// timerLease is how long a claim of an instance's timers holds: a
	// replica that claimed and died delays them that long at most.
	timerLease = 30 * time.Second
	// timerPoll bounds the timer loop's sleep: a timer no change told of
	// fires at most this late past its claimable time.
	timerPoll = time.Second
	// claimMax bounds the instances claimed at once.
	claimMax = 64
	// runTTL is how long a replica's registration keeps it alive, and
	// runBeat how often it renews it.
	runTTL  = 10 * time.Second
	runBeat = 2 * time.Second
	// liveFor is how long a read of the live runs is used.
	liveFor = time.Second
)

// ErrBusy is wrapped by the error of work on an instance that a call of
// another replica's bound tool holds (its intent is open, and that
// replica's run is alive) past the event deadline: nothing changed; try
// again.
var ErrBusy = errors.New("another replica's call holds the instance")

// replicas is what Instances keep on a store.Shared.
type replicas struct {
	st    store.Shared
	grace time.Duration

	// gens count the changes of other replicas told by the feed, by a
	// hash of the key: a load that began before one of its key's does not
	// cache what it read (it may be older than the change).
	seed maphash.Seed
	gens [64]atomic.Uint64

	// The timer loop: armed is the earliest time told since it last
	// planned (armedSet; zero: now); planned is when it wakes, while it
	// sleeps.
	wakeMu   sync.Mutex
	armed    time.Time
	armedSet bool
	planned  time.Time
	sleeping bool
	wake     chan struct{}

	// The runs alive, as last read (at liveAt, on the instances' clock),
	// and until when this replica's run is registered.
	liveMu     sync.Mutex
	live       []string
	liveAt     time.Time
	aliveUntil time.Time

	// waiters wait for a change of an instance another replica's call
	// holds.
	waitMu  sync.Mutex
	waiters map[store.Key]map[chan struct{}]struct{}

	// down is set while the timer loop cannot reach the store (said once).
	down atomic.Bool
}

// share makes the instances those of a replica on sh.
func (x *Instances) share(sh store.Shared, o InstancesOptions) {
	r := &replicas{st: sh, grace: o.TimerGrace, seed: maphash.MakeSeed(), wake: make(chan struct{}, 1),
		waiters: map[store.Key]map[chan struct{}]struct{}{}}
	if r.grace <= 0 {
		r.grace = DefaultTimerGrace
	}
	x.run, x.shared = sh.Run(), r
	sh.Watch(x.onChange) // ends with the store
}

// gen returns the count of changes told of a key's stripe (0 on a store
// this process alone writes).
func (r *replicas) gen(k store.Key) uint64 {
	if r == nil {
		return 0
	}
	return r.stripe(k).Load()
}

func (r *replicas) stripe(k store.Key) *atomic.Uint64 {
	var h maphash.Hash
	h.SetSeed(r.seed)
	h.WriteString(k.Machine)
	h.WriteByte(0)
	h.WriteString(k.Handle)
	return &r.gens[h.Sum64()%uint64(len(r.gens))]
}

// rememberAt caches an instance read or saved when its key's stripe was
// at gen; when another replica's change was told since, it is not cached
// (it may be older than that change).
func (x *Instances) rememberAt(key store.Key, in *Instance, gen uint64) {
	if x.shared == nil || x.shared.gen(key) == gen {
		x.remember(key, in)
		return
	}
	x.forget(key)
}

// setTimers tells the timers' scheduler an instance's timers: on a
// store.Shared, only when the earliest is due (the store keeps them).
func (x *Instances) setTimers(k store.Key, ts []store.Timer) {
	if x.shared == nil {
		x.sched.set(k, ts)
		return
	}
	if due := store.NextDueOf(ts); !due.IsZero() {
		x.shared.arm(due)
	}
}

// dropTimer forgets a timer that fired or cannot (the store forgets it
// itself on a store.Shared).
func (x *Instances) dropTimer(k store.Key, t store.Timer) {
	if x.shared == nil {
		x.sched.drop(k, t)
	}
}

// retries returns whether a save that conflicted is tried again, at its
// attempt (from 0): at most maxSaveRetries times on a store this process
// alone writes (only an operator's reset conflicts); on a store.Shared,
// where replicas contend for an instance, until the event deadline, after
// a short random backoff.
func (r *replicas) retries(timeout time.Duration) func(ctx context.Context, attempt int) bool {
	if r == nil {
		return func(_ context.Context, attempt int) bool { return attempt < maxSaveRetries }
	}
	deadline := time.Now().Add(timeout)
	return func(ctx context.Context, attempt int) bool {
		back := time.Duration(1<<min(attempt, 5)) * time.Millisecond
		back = back/2 + rand.N(back)
		if time.Now().Add(back).After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(back):
			return true
		}
	}
}

// alive registers this replica's run (store.Shared.RegisterRun) unless
// its registration holds for more than half its time yet: before an
// intent is written, so that other replicas take it for a call under way.
func (r *replicas) alive(ctx context.Context, now time.Time) error {
	if r == nil {
		return nil
	}
	r.liveMu.Lock()
	fresh := now.Add(runTTL / 2).Before(r.aliveUntil)
	r.liveMu.Unlock()
	if fresh {
		return nil
	}
	return r.register(ctx, now)
}

// register registers this replica's run until now+runTTL.
func (r *replicas) register(ctx context.Context, now time.Time) error {
	if err := r.st.RegisterRun(ctx, now, runTTL); err != nil {
		return err
	}
	r.liveMu.Lock()
	r.aliveUntil = now.Add(runTTL)
	r.liveMu.Unlock()
	return nil
}

// isLive reports whether a run is alive (false on a store this process
// alone writes, whose other runs are over; true when the store cannot
// tell: an intent is not said in doubt on a guess).
func (r *replicas) isLive(ctx context.Context, run string, now time.Time) bool {
	if r == nil {
		return false
	}
	live, err := r.liveRun(ctx, run, now)
	return live || err != nil
}

// liveRun reports whether a run is alive at now (the runs read at most
// liveFor before).
func (r *replicas) liveRun(ctx context.Context, run string, now time.Time) (bool, error) {
	r.liveMu.Lock()
	live, at := r.live, r.liveAt
	r.liveMu.Unlock()
	if at.IsZero() || now.Before(at) || !now.Before(at.Add(liveFor)) {
		var err error
		if live, err = r.st.Live(ctx, now); err != nil {
			return false, err
		}
		r.liveMu.Lock()
		r.live, r.liveAt = live, now
		r.liveMu.Unlock()
	}
	_, found := slices.BinarySearch(live, run)
	return found, nil
}

// validate loads an instance for a write path on a store.Shared: the
// cached instance checked against the store (its record read only when
// another replica changed it), or as stored, or as it starts. While an
// intent of another replica's live run holds it, it waits (wait: up to
// the event deadline) for a change of it, then answers ErrBusy.
func (x *Instances) validate(ctx context.Context, w *Workflow, handle string, wait bool) (*Instance, error) {
	r, key := x.shared, instanceKey(w, handle)
	var until time.Time
	for {
		ch := r.waitFor(key) // before the load: a change after it wakes the wait
		in, intent, err := x.check(ctx, w, handle, key)
		if err == nil && intent.Version != 0 && intent.Run != x.run {
			var live bool
			if live, err = r.liveRun(ctx, intent.Run, x.clock.Now()); err == nil && !live {
				// Its replica died: the intent is in doubt (the status
				// tool says so), and the instance goes on.
				intent = store.OpenIntent{}
			}
		}
		if err != nil || intent.Version == 0 || intent.Run == x.run {
			r.unwait(key, ch)
			return in, err
		}
		busy := fmt.Errorf("%w: %s %s: a call of a bound tool is under way on another replica (its intent, version %d); nothing changed, try again", ErrBusy, w.ID, handle, intent.Version)
		if until.IsZero() {
			until = time.Now().Add(x.timeout)
		}
		left := time.Until(until)
		if !wait || left <= 0 {
			r.unwait(key, ch)
			return nil, busy
		}
		select {
		case <-ch:
		case <-time.After(min(left, liveFor)): // its run may have ended
		case <-ctx.Done():
			r.unwait(key, ch)
			return nil, context.Cause(ctx)
		}
		r.unwait(key, ch)
	}
}

// Current returns an instance as Load does, but on a store.Shared checked
// against the store first (one round trip; its record read only when
// another replica changed it): what a read that must see every replica's
// last write uses (the status tool), where Load may be behind by the
// change feed's latency. It neither holds the instance nor waits for
// another replica's call.
func (x *Instances) Current(ctx context.Context, w *Workflow, handle string) (*Instance, error) {
	if x.shared == nil {
		return x.Load(ctx, w, handle)
	}
	in, _, err := x.check(ctx, w, handle, instanceKey(w, handle))
	return in, err
}

// check reads an instance for validate, with its open intent.
func (x *Instances) check(ctx context.Context, w *Workflow, handle string, key store.Key) (*Instance, store.OpenIntent, error) {
	cached := x.cached(key, w)
	var have uint64
	if cached != nil {
		have = cached.Version
	}
	gen := x.shared.gen(key)
	l, err := x.shared.st.LoadIfChanged(ctx, key, have)
	var in *Instance
	switch {
	case errors.Is(err, store.ErrNotFound) && cached != nil && cached.Version == 0:
		in, err = cached, nil // as it starts, not stored by anyone yet
	case errors.Is(err, store.ErrNotFound):
		in, err = x.instance(ctx, w, handle, store.Record{}, 0, err)
	case err != nil:
	case !l.Changed && cached != nil:
		in = cached
	default:
		in, err = x.instance(ctx, w, handle, l.Record, l.Version, nil)
	}
	if err != nil {
		return nil, store.OpenIntent{}, err
	}
	x.rememberAt(key, in, gen)
	return in, l.Intent, nil
}

// waitFor returns a channel closed by the next change of an instance
// another replica makes (or a resync); unwait drops it.
func (r *replicas) waitFor(k store.Key) chan struct{} {
	ch := make(chan struct{})
	r.waitMu.Lock()
	if r.waiters[k] == nil {
		r.waiters[k] = map[chan struct{}]struct{}{}
	}
	r.waiters[k][ch] = struct{}{}
	r.waitMu.Unlock()
	return ch
}

func (r *replicas) unwait(k store.Key, ch chan struct{}) {
	r.waitMu.Lock()
	if ws := r.waiters[k]; ws != nil {
		if _, ok := ws[ch]; ok {
			delete(ws, ch)
			close(ch)
		}
		if len(ws) == 0 {
			delete(r.waiters, k)
		}
	}
	r.waitMu.Unlock()
}

// tell wakes the waiters of a key (of every key, all).
func (r *replicas) tell(k store.Key, all bool) {
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	if !all {
		for ch := range r.waiters[k] {
			close(ch)
		}
		delete(r.waiters, k)
		return
	}
	for _, ws := range r.waiters {
		for ch := range ws {
			close(ch)
		}
	}
	clear(r.waiters)
}

// onChange is told every change of the store's feed: what another
// replica changed is forgotten (read again when next used), the timer
// loop told of its timers, and the subscribers told; a resync forgets
// everything.
func (x *Instances) onChange(c store.Change) {
	r := x.shared
	ctx := context.Background()
	if c.Resync {
		for i := range r.gens {
			r.gens[i].Add(1)
		}
		x.cacheMu.Lock()
		clear(x.cache)
		x.cacheMu.Unlock()
		r.liveMu.Lock()
		r.liveAt = time.Time{}
		r.liveMu.Unlock()
		r.tell(store.Key{}, true)
		r.arm(time.Time{})
		x.watchers.tell(ctx, Change{Resync: true})
		return
	}
	if c.Key.IsMeta() || c.Run == x.run {
		return // this replica's own: known as it saved it
	}
	r.stripe(c.Key).Add(1)
	x.cacheMu.Lock()
	if in := x.cache[c.Key]; in == nil || c.Version == 0 || in.Version < c.Version {
		delete(x.cache, c.Key)
	}
	x.cacheMu.Unlock()
	if !c.NextDue.IsZero() {
		// Its armer fires it on time; the others past the grace.
		r.arm(c.NextDue.Add(r.grace))
	}
	r.tell(c.Key, false)
	x.watchers.tell(ctx, Change{Workflow: c.Key.Machine, Handle: c.Key.Handle, Version: c.Version, Moved: true, Deleted: c.Version == 0})
}

// arm tells the timer loop of a time a timer may be claimed at (zero:
// now): it wakes when it sleeps past it.
func (r *replicas) arm(t time.Time) {
	r.wakeMu.Lock()
	defer r.wakeMu.Unlock()
	if !r.armedSet || t.Before(r.armed) {
		r.armed, r.armedSet = t, true
	}
	if r.sleeping && t.Before(r.planned) {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// plan records that the timer loop sleeps until wake, or until the time
// it was armed for since it last planned when that is earlier (returned).
func (r *replicas) plan(wake time.Time) time.Time {
	r.wakeMu.Lock()
	defer r.wakeMu.Unlock()
	select {
	case <-r.wake: // sent while it last slept: told already
	default:
	}
	if r.armedSet && r.armed.Before(wake) {
		wake = r.armed
	}
	r.armedSet, r.planned, r.sleeping = false, wake, true
	return wake
}

func (r *replicas) awake() {
	r.wakeMu.Lock()
	r.sleeping = false
	r.wakeMu.Unlock()
}

// runSharedTimers fires timers on a store.Shared until ctx ends: it
// claims the instances with a timer due (its own at once, the other
// replicas' past the grace), fires their due timers, and sleeps until the
// store's next due time, a time the feed or a save told, or a poll; and
// it keeps this replica's run alive.
func (x *Instances) runSharedTimers(ctx context.Context) error {
	r := x.shared
	if err := r.register(ctx, x.clock.Now()); err != nil {
		x.log.Warn("replica: cannot register this run (retrying)", "err", err)
	}
	var beating sync.WaitGroup
	defer beating.Wait()
	beating.Add(1)
	go func() {
		defer beating.Done()
		t := x.clock.NewTicker(runBeat)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.Chan():
				if err := r.register(ctx, x.clock.Now()); err != nil && ctx.Err() == nil {
					x.log.Warn("replica: cannot renew this run's registration", "err", err)
				}
			}
		}
	}()
	for {
		now := x.clock.Now()
		claims, err := r.st.ClaimTimers(ctx, store.ClaimRequest{Now: now, Lease: timerLease, Max: claimMax, Grace: r.grace})
		if ctx.Err() != nil {
			return nil
		}
		wake := now.Add(timerPoll)
		if err == nil {
			for _, c := range claims {
				x.fireClaim(ctx, c, now)
			}
			if len(claims) == claimMax {
				continue
			}
			var next time.Time
			var ok bool
			if next, ok, err = r.st.NextDue(ctx); err == nil && ok {
				switch {
				case next.After(now):
					wake = minTime(wake, next)
				case next.Add(r.grace).After(now):
					wake = minTime(wake, next.Add(r.grace)) // another replica's, within its grace
				}
			}
		}
		switch {
		case err != nil && ctx.Err() == nil && !r.down.Swap(true):
			x.log.Warn("timers: the store cannot be reached; timers fire once it is back", "err", err)
		case err == nil && r.down.Swap(false):
			x.log.Info("timers: the store is back")
		}
		wake = r.plan(wake)
		if !wake.After(x.clock.Now()) {
			r.awake()
			continue
		}
		t := x.clock.NewTimer(wake.Sub(x.clock.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			r.awake()
			return nil
		case <-r.wake:
			t.Stop()
		case <-t.Chan():
		}
		r.awake()
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// fireClaim fires the timers of a claimed instance due at now, earliest
// first, each through its own save (which ends the claim). An instance
// another replica's call holds is left: the save that settles that call
// ends the claim, and the feed tells its timers.
func (x *Instances) fireClaim(ctx context.Context, c store.Claim, now time.Time) {
	w := x.Workflow(c.Key.Machine)
	if w == nil {
		return // not served here: the claim ends, and another replica may
	}
	h, err := x.hold(ctx, w, c.Key.Handle, false)
	if err != nil {
		if !errors.Is(err, ErrBusy) && ctx.Err() == nil {
			x.log.Warn("timer: cannot load instance", "machine", w.ID, "handle", c.Key.Handle, "err", err)
		}
		return
	}
	defer h.Release()
	for range 100 { // timers due at once (a timer of 0 ms re-armed is bounded too)
		in, err := h.Load(ctx)
		if err != nil {
			return
		}
		var first *store.Timer
		for i, t := range in.Timers {
			if !t.Due.After(now) && (first == nil || t.Due.Before(first.Due)) {
				first = &in.Timers[i]
			}
		}
		if first == nil || !x.fireHeld(ctx, h, *first) {
			return
		}
	}
}

// waitingLister is a store that lists the instances with a call waiting
// for an operator's approval (Record.Pending) by an index of its own.
type waitingLister interface {
	Waiting(ctx context.Context) ([]store.Key, error)
}

// sharedApprovals are the calls waiting for an operator's approval on a
// store.Shared: the instances the store lists as waiting (every
// instance, on a store that keeps no such list), each read (from the
// cache, which the feed keeps, else the store).
func (x *Instances) sharedApprovals(ctx context.Context) ([]Approval, error) {
	var keys []store.Key
	var err error
	if wl, ok := x.store.(waitingLister); ok {
		keys, err = wl.Waiting(ctx)
	} else {
		keys, err = x.store.List(ctx)
	}
	if err != nil {
		return nil, err
	}
	var out []Approval
	for _, k := range keys {
		if k.IsMeta() {
			continue
		}
		x.cacheMu.Lock()
		in := x.cache[k]
		x.cacheMu.Unlock()
		var p *store.Pending
		if in != nil && in.Version > 0 {
			p = in.Pending
		} else {
			rec, _, err := x.store.Load(ctx, k)
			if errors.Is(err, store.ErrNotFound) {
				continue // settled and deleted meanwhile
			}
			if err != nil {
				return nil, err
			}
			p = rec.Pending
		}
		if p != nil {
			out = append(out, Approval{Workflow: k.Machine, Handle: k.Handle, Pending: *p})
		}
	}
	slices.SortFunc(out, func(a, b Approval) int { return a.Time.Compare(b.Time) })
	return out, nil
}
