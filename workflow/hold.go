package workflow

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	// cur, on a store.Shared, is the instance as the hold last checked
	// it against the store or saved it (nil: to be checked).
	cur *Instance
}

// Hold holds an instance until Release, waiting for the work that holds
// it now to end, or for ctx to (its error then, and no hold). On a
// store.Shared the hold checks the instance against the store (one round
// trip: its record moves only when another replica changed it), and
// waits, within the event deadline, while a call of another live
// replica's bound tool holds it (an open intent): ErrBusy past that; a
// store that cannot be reached is store.ErrUnavailable.
func (x *Instances) Hold(ctx context.Context, w *Workflow, handle string) (*Hold, error) {
	return x.hold(ctx, w, handle, true)
}

// hold is Hold; wait false answers ErrBusy at once for an instance
// another live replica's call holds.
func (x *Instances) hold(ctx context.Context, w *Workflow, handle string, wait bool) (*Hold, error) {
	if err := CheckHandle(handle); err != nil {
		return nil, err
	}
	unlock, err := x.locks.lock(ctx, instanceKey(w, handle))
	if err != nil {
		return nil, err
	}
	h := &Hold{x: x, w: w, handle: handle, unlock: unlock}
	if x.shared != nil {
		if h.cur, err = x.validate(ctx, w, handle, wait); err != nil {
			h.Release()
			return nil, err
		}
	}
	return h, nil
}

// save stores the held instance (Instances.save), and keeps what it
// stored as the hold's.
func (h *Hold) save(ctx context.Context, in *Instance, snap *interp.Snapshot, timers []store.Timer, pending *store.Pending, audit *store.AuditEntry) (*Instance, error) {
	saved, err := h.x.save(ctx, in, snap, timers, pending, audit)
	h.cur = saved // nil on an error: checked again
	return saved, err
}

// Release ends the hold.
func (h *Hold) Release() {
	if h.unlock != nil {
		h.unlock()
		h.unlock = nil
	}
}

// Load returns the held instance (see Instances.Load; on a
// store.Shared, as the hold checked it against the store, again after a
// save of the hold's failed).
func (h *Hold) Load(ctx context.Context) (*Instance, error) {
	if h.x.shared == nil {
		return h.x.Load(ctx, h.w, h.handle)
	}
	if h.cur == nil {
		in, err := h.x.validate(ctx, h.w, h.handle, true)
		if err != nil {
			return nil, err
		}
		h.cur = in
	}
	return h.cur, nil
}

// Apply runs an event on the held instance: the instance is loaded (again
// at each attempt), check (when given) may refuse it with an error
// returned as it is, the machine must take the event (ErrRejected), the
// step must not fail (ErrFailed), and the new snapshot is stored with the
// audit entry (the instances fill in its time, machine, handle, states
// and version), again from the top when another writer stored the
// instance meanwhile (at most maxSaveRetries times; on a store.Shared,
// where other replicas write too, until the event deadline). It returns
// the stored instance and the events the machine emitted; a save that
// fails is a *SaveError.
func (h *Hold) Apply(ctx context.Context, ev interp.Event, entry store.AuditEntry, check func(*Instance) error) (*Instance, []map[string]any, error) {
	x := h.x
	retry := x.shared.retries(x.timeout)
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
		if in.NotStarted {
			return nil, nil, notStarted(in)
		}
		snap := in.Snapshot
		if in.Pending != nil && !approving(ctx, in.Pending.ID) {
			return nil, nil, &EventError{Kind: ErrPending, Cause: fmt.Errorf("%s (called by %s) waits for an operator's approval", in.Pending.Tool, in.Pending.Principal.Sub), Instance: in}
		}
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
		var pending *store.Pending // an approval clears what it approves
		if !approving(ctx, "") {
			pending = in.Pending
		}
		saved, err := h.save(ctx, in, out.snap, out.timers, pending, &e)
		if errors.Is(err, store.ErrConflict) && retry(ctx, attempt) {
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
	return h.save(ctx, in, in.Snapshot, in.Timers, in.Pending, &entry)
}

// Restart stores the held instance afresh, in the machine's initial state
// (its entry actions run), with an audit entry: the reset tool's work.
func (h *Hold) Restart(ctx context.Context, entry store.AuditEntry) (*Instance, error) {
	in, err := h.Load(ctx)
	if err != nil {
		return nil, err
	}
	if in.NotStarted {
		return nil, notStarted(in)
	}
	if h.w.NeedsInput() && len(in.Input) == 0 {
		// Stored before its machine declared meta.input: it starts
		// afresh through the start tool.
		return nil, fmt.Errorf("%s %s has no input to start afresh with (it was stored before its machine declared meta.input): %w", h.w.ID, h.handle, ErrNotStarted)
	}
	snap, timers, err := h.x.fresh(ctx, h.w, in.Input)
	if err != nil {
		return nil, err
	}
	return h.save(ctx, in, snap, timers, nil, &entry)
}

// Start starts the held instance with an input (XState's
// createActor(machine, {input})): validated against the machine's
// meta.input, given to its context and its entry actions, and stored with
// the instance (a reset starts it afresh with the same). The instance must
// not be stored yet (ErrStarted), or be reset. A start that fails (the
// machine threw on the input) is an EventError of ErrFailed: nothing is
// stored. A workflow without meta.input starts with none.
func (h *Hold) Start(ctx context.Context, input map[string]any, entry store.AuditEntry) (*Instance, error) {
	in, err := h.Load(ctx)
	if err != nil {
		return nil, err
	}
	if !in.unsaved {
		return nil, fmt.Errorf("%s %s: %w (in state %s)", h.w.ID, h.handle, ErrStarted, StateString(in.Snapshot))
	}
	if err := h.w.ValidateInput(input); err != nil {
		return nil, fmt.Errorf("the input of %s: %w", h.w.StartTool, err)
	}
	if !h.w.NeedsInput() {
		// Started as it loaded (its entry actions ran once).
		return h.x.save(ctx, in, in.Snapshot, in.Timers, nil, &entry)
	}
	raw, err := json.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("the input of %s: %w", h.w.StartTool, err)
	}
	snap, timers, err := h.x.fresh(ctx, h.w, raw)
	if err != nil {
		return nil, err
	}
	if snap.Status == interp.StatusError {
		return nil, &EventError{Kind: ErrFailed, Cause: fmt.Errorf("it failed to start: %w", snap.Err()), Instance: in}
	}
	// Saved from no snapshot: the audit entry's From is none, and
	// watchers are told the instance moved.
	started := &Instance{Workflow: h.w, Handle: h.handle, Version: in.Version, Input: raw}
	entry.Event = input
	return h.x.save(ctx, started, snap, timers, nil, &entry)
}

// Pend stores the held instance with a call that waits for an operator's
// approval (its ID made here), with an audit entry: until it is approved
// or declined, the instance takes no other event from a call or Send
// (ErrPending). It returns the stored instance; ErrPending when another
// call waits already.
func (h *Hold) Pend(ctx context.Context, p store.Pending, entry store.AuditEntry) (*Instance, error) {
	in, err := h.Load(ctx)
	if err != nil {
		return nil, err
	}
	if in.Pending != nil {
		return nil, &EventError{Kind: ErrPending, Cause: fmt.Errorf("%s (called by %s) waits for an operator's approval", in.Pending.Tool, in.Pending.Principal.Sub), Instance: in}
	}
	p.ID = rand.Text()[:16]
	p.Time = h.x.clock.Now()
	return h.save(ctx, in, in.Snapshot, in.Timers, &p, &entry)
}

// ErrNoPending is returned by Approve and Decline when the instance has
// no such call waiting (settled meanwhile, or another one).
var ErrNoPending = errors.New("no such call waits for approval")

// Approve approves the held instance's waiting call: its event is sent
// (as Apply sends it: the machine must take it, else nothing changes and
// the call still waits), with an audit entry naming the call's principal
// and who approved it (Confirmed, via "operator"), and the wait ends.
func (h *Hold) Approve(ctx context.Context, id string, by store.Principal, comment string) (*Instance, error) {
	in, err := h.Load(ctx)
	if err != nil {
		return nil, err
	}
	p := in.Pending
	if p == nil || p.ID != id {
		return nil, ErrNoPending
	}
	if err := mayApprove(p, by); err != nil {
		return nil, err
	}
	ev, _ := interp.EventFromObject(p.Event)
	principal := p.Principal
	entry := store.AuditEntry{Tool: p.Tool, Event: p.Event, Principal: &principal, Note: "approved by an operator",
		Confirmed: &store.Confirmation{By: by, Via: "operator", Comment: comment}}
	saved, _, err := h.Apply(context.WithValue(ctx, approvalKey{}, id), ev, entry, nil)
	return saved, err
}

// Decline declines the held instance's waiting call: nothing is sent, the
// wait ends, and an audit entry says who declined it and why.
func (h *Hold) Decline(ctx context.Context, id string, by store.Principal, comment string) (*Instance, error) {
	in, err := h.Load(ctx)
	if err != nil {
		return nil, err
	}
	p := in.Pending
	if p == nil || p.ID != id {
		return nil, ErrNoPending
	}
	if err := mayApprove(p, by); err != nil {
		return nil, err
	}
	note := "declined by an operator"
	if comment != "" {
		note += ": " + comment
	}
	return h.save(ctx, in, in.Snapshot, in.Timers, nil, &store.AuditEntry{Tool: p.Tool, Principal: &by, Note: note,
		Confirmed: &store.Confirmation{By: by, Via: "operator", Comment: comment}})
}

// ErrNotApprover is wrapped by the error of an approval (or a decline)
// by an operator who holds none of the roles the call names.
var ErrNotApprover = errors.New("the operator may not settle this call")

// MayApprove checks that an operator may settle a waiting call, as
// Approve and Decline do: the operator holds one of its roles (any
// operator may settle one that names none) and is not its caller (an
// unauthenticated principal, auth "none", is nobody in particular). The
// error wraps ErrNotApprover and says why.
func MayApprove(p *store.Pending, by store.Principal) error {
	return mayApprove(p, by)
}

func mayApprove(p *store.Pending, by store.Principal) error {
	if by.Sub == p.Principal.Sub && by.Auth != "none" {
		return fmt.Errorf("%w: %s called %s, and may not approve it too", ErrNotApprover, by.Sub, p.Tool)
	}
	if len(p.Roles) == 0 {
		return nil
	}
	for _, r := range p.Roles {
		if slices.Contains(by.Roles, r) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s needs the role %s to settle %s", ErrNotApprover, by.Sub, strings.Join(p.Roles, " or "), p.Tool)
}

// approvalKey marks the context of an Approve's Apply: the event it sends
// is the waiting call's.
type approvalKey struct{}

// approving reports whether ctx is an Approve's for the waiting call id
// (any call, for "").
func approving(ctx context.Context, id string) bool {
	got, ok := ctx.Value(approvalKey{}).(string)
	return ok && (id == "" || got == id)
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
