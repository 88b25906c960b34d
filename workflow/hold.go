package workflow

import (
	"context"
	"errors"
	"sync"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
)

// A Hold is an instance held for work that no other event may come
// between: one event, or a bound tool's intent, its handler's work and
// the transition that settles it. Other work on the instance (calls,
// timers, Send, Reset) waits until the hold is released; work on other
// instances goes on. A Hold is used by one goroutine, and released once.
type Hold struct {
	x      *Instances
	w      *Workflow
	handle string
	unlock func()
}

// Hold holds an instance until Release, waiting for the work that holds
// it now to end, or for ctx to (its error then, and no hold).
func (x *Instances) Hold(ctx context.Context, w *Workflow, handle string) (*Hold, error) {
	if err := CheckHandle(handle); err != nil {
		return nil, err
	}
	unlock, err := x.locks.lock(ctx, instanceKey(w, handle))
	if err != nil {
		return nil, err
	}
	return &Hold{x: x, w: w, handle: handle, unlock: unlock}, nil
}

// Release ends the hold.
func (h *Hold) Release() {
	if h.unlock != nil {
		h.unlock()
		h.unlock = nil
	}
}

// Load returns the held instance (see Instances.Load).
func (h *Hold) Load(ctx context.Context) (*Instance, error) {
	return h.x.Load(ctx, h.w, h.handle)
}

// Apply runs an event on the held instance: the instance is loaded (again
// at each attempt), check (when given) may refuse it with an error
// returned as it is, the machine must take the event (ErrRejected), the
// step must not fail (ErrFailed), and the new snapshot is stored with the
// audit entry (the instances fill in its time, machine, handle, states
// and version), again from the top when another writer stored the
// instance meanwhile. It returns the stored instance and the events the
// machine emitted; a save that fails is a *SaveError.
func (h *Hold) Apply(ctx context.Context, ev interp.Event, entry store.AuditEntry, check func(*Instance) error) (*Instance, []map[string]any, error) {
	x := h.x
	for attempt := 0; ; attempt++ {
		in, err := h.Load(ctx)
		if err != nil {
			return nil, nil, err
		}
		if check != nil {
			if err := check(in); err != nil {
				return nil, nil, err
			}
		}
		snap := in.Snapshot
		if ok, err := snap.Can(ev); err != nil || !ok {
			return nil, nil, &EventError{Kind: ErrRejected, Cause: err, Instance: in}
		}
		out := x.step(ctx, in, ev, nil)
		if out.crash != nil {
			return nil, nil, &EventError{Kind: ErrFailed, Cause: out.crash, Instance: in}
		}
		if out.snap.Status == interp.StatusError && snap.Status != interp.StatusError {
			cause := out.snap.Err()
			if cause == nil {
				cause = errors.New("the machine failed")
			}
			return nil, nil, &EventError{Kind: ErrFailed, Cause: cause, Instance: in}
		}
		e := entry
		saved, err := x.save(ctx, in, out.snap, out.timers, &e)
		if errors.Is(err, store.ErrConflict) && attempt < maxSaveRetries {
			continue
		}
		if err != nil {
			return nil, nil, &SaveError{Err: err, Instance: in}
		}
		return saved, out.emitted, nil
	}
}

// Save stores the held instance as it is, with an audit entry: an
// instance not stored yet is stored in its initial state (a start); an
// entry with an Intent records what a bound tool's handler is about to
// do, before it does it (the returned instance's Version names the
// intent); an entry that Settles an intent ends it without a transition.
func (h *Hold) Save(ctx context.Context, entry store.AuditEntry) (*Instance, error) {
	in, err := h.Load(ctx)
	if err != nil {
		return nil, err
	}
	return h.x.save(ctx, in, in.Snapshot, in.Timers, &entry)
}

// Restart stores the held instance afresh, in the machine's initial state
// (its entry actions run), with an audit entry: the reset tool's work.
func (h *Hold) Restart(ctx context.Context, entry store.AuditEntry) (*Instance, error) {
	in, err := h.Load(ctx)
	if err != nil {
		return nil, err
	}
	snap, timers, err := h.x.fresh(ctx, h.w)
	if err != nil {
		return nil, err
	}
	return h.x.save(ctx, in, snap, timers, &entry)
}

// keyedMutex holds instances, one holder at a time per key; a waiter
// gives up when its context ends.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[store.Key]*keyLock
}

type keyLock struct {
	token chan struct{} // holds a value while the key is held
	refs  int           // holders and waiters
}

func (k *keyedMutex) lock(ctx context.Context, key store.Key) (unlock func(), err error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[store.Key]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{token: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()
	select {
	case l.token <- struct{}{}:
		return func() {
			<-l.token
			k.drop(key, l)
		}, nil
	case <-ctx.Done():
		k.drop(key, l)
		return nil, context.Cause(ctx)
	}
}

func (k *keyedMutex) drop(key store.Key, l *keyLock) {
	k.mu.Lock()
	if l.refs--; l.refs == 0 {
		delete(k.locks, key)
	}
	k.mu.Unlock()
}
