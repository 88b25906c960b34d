package workflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/stategate/stategate/store"
)

// ErrInDoubt is wrapped by the error of a Delete of an instance with a
// call of a bound tool that began and that nothing settled (an intent in
// its audit trail): its side effect may have happened, and the trail is
// what tells; nothing is deleted.
var ErrInDoubt = errors.New("the instance has a call of a bound tool in doubt")

// Delete deletes an instance, whatever its status, as `stategate state
// delete` does, but under the instance's hold (no event runs
// meanwhile): its record, its audit trail and its place in the index
// (Recent, Count: its workflow's cap counts it no more) leave the store,
// its cached copy, timers and waiting call are forgotten, and
// subscribers are told (Change.Deleted; on a store.Shared, the other
// replicas by the change feed, and they forget their copy). Its handle
// names a new instance from then on, as it starts. note says who deleted
// it and why, for the log.
//
// An instance with a call waiting for an operator's approval is refused
// (ErrPending: settle it first), and so is one with a call of a bound
// tool that nothing settled (ErrInDoubt: its trail is the only record of
// it); nothing is deleted. One that was never stored is
// store.ErrNotFound.
func (x *Instances) Delete(ctx context.Context, workflow, handle, note string) error {
	w, h, in, err := x.holdStored(ctx, workflow, handle)
	if err != nil {
		return err
	}
	defer h.Release()
	if p := in.Pending; p != nil {
		return fmt.Errorf("%s %s: %w: %s (called by %s) waits; approve or decline it first, then delete the instance", workflow, handle, ErrPending, p.Tool, p.Principal.Sub)
	}
	key := in.Key()
	trail, err := x.store.Audit(ctx, key, intentWindow)
	if err != nil {
		return err
	}
	if open := store.Unsettled(trail); len(open) > 0 {
		e := open[len(open)-1]
		return fmt.Errorf("%s %s: %w: %s began at version %d and nothing settled it (its side effect may have happened; the audit trail is its only record): not deleted (stategate state delete --force deletes it with its trail)",
			workflow, handle, ErrInDoubt, e.Tool, e.Version)
	}
	err = x.store.Delete(ctx, key)
	x.shared.bump(key) // a load of this replica's that read before it caches nothing
	x.forget(key)
	if err != nil {
		return err
	}
	x.setTimers(key, nil)
	x.setPending(key, nil)
	h.cur = nil
	if note == "" {
		note = "deleted by an operator"
	}
	x.log.Info("instance deleted", "machine", workflow, "handle", handle, "version", in.Version, "status", in.Snapshot.Status.String(), "note", note)
	x.watchers.tell(context.WithoutCancel(ctx), Change{Workflow: w.ID, Handle: handle, Moved: true, Deleted: true})
	return nil
}

// bump counts a change of a key's stripe made by this replica (a
// deletion), so that a load under way does not cache what it read
// before it (see rememberAt); nothing on a store this process alone
// writes.
func (r *replicas) bump(k store.Key) {
	if r != nil {
		r.stripe(k).Add(1)
	}
}
