package gate

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
)

// This file holds what an observer of the gate (the inspector page) needs
// beyond the MCP side: subscriptions to changes of instances and to
// reloads of the machines folder, the intents in doubt of an instance,
// and an operator's reset through the gate.

// listeners is a set of functions told of something; safe for
// concurrent use. A listener must return quickly (hand the news to a
// goroutine of its own): it runs on the path of a call or a reload.
type listeners[T any] struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(T)
}

func (l *listeners[T]) add(f func(T)) (cancel func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fns == nil {
		l.fns = map[int]func(T){}
	}
	id := l.next
	l.next++
	l.fns[id] = f
	return func() {
		l.mu.Lock()
		delete(l.fns, id)
		l.mu.Unlock()
	}
}

func (l *listeners[T]) tell(v T) {
	l.mu.Lock()
	fns := make([]func(T), 0, len(l.fns))
	for _, f := range l.fns {
		fns = append(fns, f)
	}
	l.mu.Unlock()
	for _, f := range fns {
		f(v)
	}
}

// Change names an instance whose stored record changed.
type Change struct{ Workflow, Handle string }

// Subscribe calls f after every change of a stored instance: a call, a
// timer, a Send, an intent and its settling, a reset (the reset tool's or
// an operator's), once the change is in the store. f must return quickly
// and not call back into the gate's instances from its own goroutine (it
// runs while the instance is locked): hand the change to a goroutine of
// your own. The returned function ends the subscription.
func (x *Instances) Subscribe(f func(Change)) (cancel func()) { return x.watchers.add(f) }

// InDoubt returns an instance's intents in doubt, oldest first: calls of
// bound tools (to an upstream server, to a Go function) that began and
// that nothing settled, made by an earlier run of the server (those of
// this process may be calls under way). Their side effect may have
// happened, and the machine did not move.
func (x *Instances) InDoubt(ctx context.Context, workflow, handle string) ([]store.AuditEntry, error) {
	w := x.workflow(workflow)
	if w == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownWorkflow, workflow)
	}
	return x.inDoubt(ctx, w, handle)
}

// ErrActive is returned by Reset for an instance that is still active.
var ErrActive = errors.New("the instance is still active: only a done or failed instance is reset")

// Reset resets an instance that is done or failed, as `stategate state
// reset` does, but through the gate, under the instance's lock: the
// store gets a record with no snapshot (the instance starts afresh when
// next used, its version counting on) and an audit entry (tool
// store.ResetTool, the state it left, and the note), its timers are
// dropped, and the sessions that see it are told. An active instance is
// ErrActive; one that was never stored is store.ErrNotFound.
func (x *Instances) Reset(ctx context.Context, workflow, handle, note string) error {
	w := x.workflow(workflow)
	if w == nil {
		return fmt.Errorf("%w: %q", ErrUnknownWorkflow, workflow)
	}
	if err := CheckHandle(handle); err != nil {
		return err
	}
	key := instanceKey(w, handle)
	unlock := x.locks.lock(key)
	defer unlock()
	in, err := x.load(ctx, w, handle)
	if err != nil {
		return err
	}
	if in.version == 0 {
		return fmt.Errorf("%s %s: %w", workflow, handle, store.ErrNotFound)
	}
	if in.snap.Status == interp.StatusActive {
		return fmt.Errorf("%s %s: %w", workflow, handle, ErrActive)
	}
	if _, err := store.Reset(ctx, x.store, key, in.version, in.snap.Value(), note); err != nil {
		x.forget(key)
		return err
	}
	x.forget(key)
	x.sched.set(key, nil)
	x.watchers.tell(Change{Workflow: w.ID, Handle: handle})
	x.notify(ctx, w, handle)
	return nil
}

// Subscribe calls f after every reload of the folder (Reload, and the
// reloads Watch makes), whether or not anything changed: what is served
// and the files' errors (Errors) are the new ones when f runs. f must
// return quickly. The returned function ends the subscription.
func (lib *Library) Subscribe(f func()) (cancel func()) {
	return lib.reloaded.add(func(struct{}) { f() })
}

// Dir returns the library's folder.
func (lib *Library) Dir() string { return lib.dir }

// PublicError renders a machine file's error as the status tool shows it
// to clients: the file and line and what is wrong, without quoting the
// file (xstate.PublicError), paths relative to the machines folder.
func (g *Gate) PublicError(err error) string { return g.publicError(err) }
