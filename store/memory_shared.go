package store

import (
	"context"
	"slices"
	"time"
)

// MemoryReplica is a Shared store on a Memory's data, as one replica (one
// server process) sees it: its saves are its run's, its watchers hear
// every replica's changes, its claims and runs are the Memory's. Two
// replicas of one Memory are two processes on one database, for tests of
// a runtime's replicas in one process.
type MemoryReplica struct {
	*Memory
	run string
}

var _ Shared = (*MemoryReplica)(nil)

// Replica returns a replica of the Memory for a run (named by the
// caller: each replica's own).
func (m *Memory) Replica(run string) *MemoryReplica { return &MemoryReplica{Memory: m, run: run} }

// Resync tells every watcher of the Memory's replicas that changes may
// have been missed (Change.Resync), as a shared store whose feed was cut
// does: for tests of what a runtime does then.
func (m *Memory) Resync() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.feed.Publish(Change{Resync: true})
}

// Run names the replica's run.
func (r *MemoryReplica) Run() string { return r.run }

// Save stores a record as Memory.Save does, the change the replica's.
func (r *MemoryReplica) Save(ctx context.Context, k Key, rec Record, version uint64) (uint64, error) {
	return r.save(ctx, k, rec, version, r.run)
}

// Delete removes an instance as Memory.Delete does, the change the
// replica's.
func (r *MemoryReplica) Delete(ctx context.Context, k Key) error { return r.delete(k, r.run) }

// Close ends the replica's run (see RegisterRun) and its leases (other
// replicas may claim those instances at once); the Memory stays.
func (r *MemoryReplica) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.runs, r.run)
	for k, rec := range r.recs {
		if rec.leaseRun == r.run && !rec.leaseUntil.IsZero() {
			rec.leaseRun, rec.leaseUntil = "", time.Time{}
			r.recs[k] = rec
		}
	}
	return nil
}

// LoadIfChanged returns an instance's version, open intent and earliest
// timer, and its record unless it is at version have.
func (r *MemoryReplica) LoadIfChanged(ctx context.Context, k Key, have uint64) (Loaded, error) {
	if err := ctx.Err(); err != nil {
		return Loaded{}, err
	}
	if err := CheckKey(k); err != nil {
		return Loaded{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.recs[k]
	if !ok {
		return Loaded{}, ErrNotFound
	}
	l := Loaded{Version: rec.version, Changed: rec.version != have, Intent: rec.intent, NextDue: rec.nextDue}
	if l.Changed {
		l.Record = rec.rec
	}
	return l, nil
}

// Watch calls f with every replica's changes (see Shared.Watch).
func (r *MemoryReplica) Watch(f func(Change)) (cancel func()) { return r.feed.Watch(f) }

// ClaimTimers leases instances with a timer due to the replica (see
// Shared.ClaimTimers).
func (r *MemoryReplica) ClaimTimers(ctx context.Context, c ClaimRequest) ([]Claim, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Claim
	for k, rec := range r.recs {
		if claimable(rec.nextDue, rec.leaseUntil, rec.savedBy == r.run, c) {
			out = append(out, Claim{Key: k, Version: rec.version, NextDue: rec.nextDue})
		}
	}
	slices.SortFunc(out, func(a, b Claim) int { return claimAt(a).Compare(claimAt(b)) })
	out = out[:min(len(out), max(c.Max, 1))]
	until := c.Now.Add(c.Lease)
	for i := range out {
		rec := r.recs[out[i].Key]
		rec.leaseRun, rec.leaseUntil = r.run, until
		r.recs[out[i].Key] = rec
		out[i].Until = until
	}
	return out, nil
}

func claimAt(c Claim) time.Time { return c.NextDue }

// claimable reports whether an instance whose earliest timer is due at
// due, leased until lease (zero: none), is claimed by c (own: the
// claimer saved it last).
func claimable(due, lease time.Time, own bool, c ClaimRequest) bool {
	if due.IsZero() || due.After(c.Now) || lease.After(c.Now) {
		return false
	}
	return own || !due.After(c.Now.Add(-c.Grace))
}

// NextDue returns the earliest time a claim may find an instance.
func (r *MemoryReplica) NextDue(ctx context.Context) (time.Time, bool, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var first time.Time
	for _, rec := range r.recs {
		if rec.nextDue.IsZero() {
			continue
		}
		at := rec.nextDue
		if rec.leaseUntil.After(at) {
			at = rec.leaseUntil
		}
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first, !first.IsZero(), nil
}

// RegisterRun records the replica's run alive until now+ttl.
func (r *MemoryReplica) RegisterRun(ctx context.Context, now time.Time, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runs == nil {
		r.runs = map[string]time.Time{}
	}
	r.runs[r.run] = now.Add(ttl)
	return nil
}

// Live returns the runs alive at now.
func (r *MemoryReplica) Live(ctx context.Context, now time.Time) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for run, exp := range r.runs {
		if exp.After(now) {
			out = append(out, run)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Waiting returns the keys of the instances with a call waiting for an
// operator's approval (Record.Pending), in no order: what a runtime on a
// Shared store lists the calls waiting by, rather than load every
// instance.
func (r *MemoryReplica) Waiting(ctx context.Context) ([]Key, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Key
	for k, rec := range r.recs {
		if rec.rec.Pending != nil {
			out = append(out, k)
		}
	}
	return out, nil
}
