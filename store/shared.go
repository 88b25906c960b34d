package store

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrUnavailable is returned by a store shared over the network (a
// database server) that cannot be reached: nothing was written, and the
// call may be tried again; the store recovers by itself once the
// database is back. It wraps the cause.
var ErrUnavailable = errors.New("the store's database cannot be reached")

// Shared is a Store that several server processes (replicas) write at
// once. Each process has a store of its own on the shared data, named by
// its run; the compare-and-swap of Save is what keeps two replicas' saves
// of one instance apart, and the rest of the interface is what lets them
// agree:
//
//   - a change feed (Watch): every committed write of any replica, its
//     own included, in commit order, and Resync when some may have been
//     missed;
//   - a validating load (LoadIfChanged): the version, the open intent and
//     the earliest timer of an instance, its record only when it is not
//     the version the caller has;
//   - timers fired once (ClaimTimers, NextDue): a save keeps its
//     instance's earliest timer's due time; a claim leases instances with
//     a timer due to one replica, until the lease ends or a save of the
//     instance (the fire itself) clears it;
//   - runs known to be alive (RegisterRun, Live): an intent is in doubt
//     only when the run that wrote it is not alive.
//
// A Shared store keeps no clock of its own: every time it compares
// (timers due, leases, runs' expiry) is the caller's, so replicas' clocks
// must agree (as the timers' due times, written by one replica and fired
// by another, already require).
type Shared interface {
	Store
	// Run names the replica this store writes for: the run of every
	// change it saves (Change.Run), and the one RegisterRun keeps alive.
	// The runtime writes it into its intents (Intent.Run).
	Run() string
	// LoadIfChanged returns an instance's version, open intent and
	// earliest timer, and its record only when its version is not have
	// (Changed). ErrNotFound for an instance not stored (or deleted).
	LoadIfChanged(ctx context.Context, k Key, have uint64) (Loaded, error)
	// Watch calls f with every change committed from now on, by any
	// replica, in commit order, on a goroutine of the store's (one per
	// watcher); f should return soon, as later changes wait for it. After
	// the feed was cut (a lost connection) and restored, f is told Resync
	// before the changes that follow: changes in between are unknown.
	// cancel stops the calls (one under way may still return after it).
	Watch(f func(Change)) (cancel func())
	// ClaimTimers leases to this replica up to c.Max instances with a
	// timer due at c.Now and no lease current then, earliest first,
	// until c.Now+c.Lease: another replica's claim skips them until then,
	// or until a save of the instance. Claims of concurrent replicas
	// never overlap.
	ClaimTimers(ctx context.Context, c ClaimRequest) ([]Claim, error)
	// NextDue returns the earliest time at which ClaimTimers may find an
	// instance (a timer due, and no lease then); false when no instance
	// has a timer.
	NextDue(ctx context.Context) (time.Time, bool, error)
	// RegisterRun records that this replica's run is alive until now+ttl
	// (a heartbeat: call it again well before it expires). Close ends it.
	RegisterRun(ctx context.Context, now time.Time, ttl time.Duration) error
	// Live returns the runs alive at now (registered, not expired, not
	// closed), sorted.
	Live(ctx context.Context, now time.Time) ([]string, error)
}

// Loaded is an instance as LoadIfChanged finds it.
type Loaded struct {
	// Version is the stored version.
	Version uint64
	// Changed is whether Version is not the one the caller has: only then
	// is Record set.
	Changed bool
	Record  Record
	// Intent is the instance's open intent (Version 0: none).
	Intent OpenIntent
	// NextDue is the due time of its earliest timer (zero: none).
	NextDue time.Time
}

// OpenIntent is an instance's open intent: the version of the last save
// whose audit entry is an intent (Intent set), until a save's entry
// settles it (Settles that version). Version 0: none.
type OpenIntent struct {
	Version uint64
	// Run is the run that wrote it (its Intent.Run).
	Run string
}

// Change is a committed write, as the change feed tells it.
type Change struct {
	Key Key
	// Version is the instance's version after it; 0 for a deletion.
	Version uint64
	// NextDue is the due time of the instance's earliest timer after it
	// (zero: none).
	NextDue time.Time
	// Intent is the instance's open intent after it.
	Intent OpenIntent
	// Run is the run of the replica that wrote it.
	Run string
	// Resync, when set, says nothing but that changes may have been
	// missed since the last one told (the feed was cut): the other
	// fields are empty, and what the receiver knows of every instance
	// must be checked again.
	Resync bool
}

// ClaimRequest is what ClaimTimers claims.
type ClaimRequest struct {
	// Now is the time on the caller's clock: instances with a timer due
	// at or before it are claimed.
	Now time.Time
	// Lease is how long a claim holds (from Now).
	Lease time.Duration
	// Max bounds the instances claimed (at least one).
	Max int
	// Grace leaves to the replica that saved an instance its timers for
	// this long past their due time: another replica claims them only
	// after (the replica that armed a timer fires it on time; others
	// fire it when that one died). Zero: any replica at once.
	Grace time.Duration
}

// Claim is an instance leased to a replica for firing its due timers.
type Claim struct {
	Key Key
	// Version is the instance's version when it was claimed.
	Version uint64
	// NextDue is the due time of its earliest timer.
	NextDue time.Time
	// Until is when the lease ends.
	Until time.Time
}

// NextDueOf returns the earliest due time of timers (zero: none), the
// one a Shared store keeps of each record.
func NextDueOf(timers []Timer) time.Time {
	var first time.Time
	for _, t := range timers {
		if first.IsZero() || t.Due.Before(first) {
			first = t.Due
		}
	}
	return first
}

// OpenIntentAfter returns an instance's open intent after a save at
// version (the version it makes) with audit entry a, given the one open
// before: an entry with an intent opens its own, one that settles the
// open intent closes it, and any other leaves it as it is.
func OpenIntentAfter(open OpenIntent, a *AuditEntry, version uint64) OpenIntent {
	switch {
	case a == nil:
		return open
	case a.Intent != nil:
		return OpenIntent{Version: version, Run: a.Intent.Run}
	case a.Settles != 0 && a.Settles == open.Version:
		return OpenIntent{}
	}
	return open
}

// Feed hands changes to watchers, each watcher's in the order they were
// published, on a goroutine of its own: what an engine's Watch needs. Its
// zero value is ready.
type Feed struct {
	mu       sync.Mutex
	watchers map[*watcher]struct{}
}

type watcher struct {
	f       func(Change)
	mu      sync.Mutex
	queue   []Change
	stopped bool
	wake    chan struct{}
}

// Watch calls f with every change published from now on (see
// Shared.Watch).
func (fd *Feed) Watch(f func(Change)) (cancel func()) {
	w := &watcher{f: f, wake: make(chan struct{}, 1)}
	fd.mu.Lock()
	if fd.watchers == nil {
		fd.watchers = map[*watcher]struct{}{}
	}
	fd.watchers[w] = struct{}{}
	fd.mu.Unlock()
	go w.run()
	return func() {
		fd.mu.Lock()
		delete(fd.watchers, w)
		fd.mu.Unlock()
		w.stop()
	}
}

// stop ends the watcher's calls.
func (w *watcher) stop() {
	w.mu.Lock()
	w.stopped, w.queue = true, nil
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *watcher) run() {
	for range w.wake {
		for {
			w.mu.Lock()
			if w.stopped {
				w.mu.Unlock()
				return
			}
			if len(w.queue) == 0 {
				w.queue = nil
				w.mu.Unlock()
				break
			}
			c := w.queue[0]
			w.queue = w.queue[1:]
			w.mu.Unlock()
			w.f(c)
		}
	}
}

// Publish hands changes to every watcher, in order. Calls of Publish
// that must be told in an order (commits) are made in that order.
func (fd *Feed) Publish(cs ...Change) {
	if len(cs) == 0 {
		return
	}
	fd.mu.Lock()
	defer fd.mu.Unlock()
	for w := range fd.watchers {
		w.mu.Lock()
		if !w.stopped {
			w.queue = append(w.queue, cs...)
		}
		w.mu.Unlock()
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// Close stops every watcher (their calls under way may still return).
func (fd *Feed) Close() {
	fd.mu.Lock()
	ws := fd.watchers
	fd.watchers = nil
	fd.mu.Unlock()
	for w := range ws {
		w.stop()
	}
}
