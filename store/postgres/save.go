package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stategate/stategate/store"
)

// Bounds of a batch: saves, and bytes of records and audit entries (at
// least one save, whatever its size).
const (
	maxBatch      = 256
	maxBatchBytes = 16 << 20
)

// errClosed is returned by the writes of a closed store.
var errClosed = errors.New("store: closed")

// saveReq is a save (or, with del, a deletion) waiting to be written with
// others in one batch, made ready by its saver before it queues.
type saveReq struct {
	k       store.Key
	version uint64 // the version it names
	del     bool
	record  []byte // store.AppendRecord's
	audit   []byte // nil: none
	updated time.Time
	nextDue *time.Time
	// opens: the audit entry is an intent (of run intentRun); settles:
	// the version of the intent it settles (0: none).
	opens     bool
	intentRun []byte
	settles   uint64
	waiting   bool // a call waits for an operator's approval (Record.Pending)
	size      int

	taken bool // by a committer (under Store.mu)
	done  chan saveResult
}

type saveResult struct {
	version uint64
	err     error
}

// outcome is what the first round trip of a batch made of a save.
type outcome struct {
	made   bool // the save was made (a deletion: the instance was there)
	change store.Change
	err    error // a save's own error (a conflict)
}

// Save stores a record if the instance is still at version. Concurrent
// saves are written together (see Store); the save returns once its
// transaction is committed. The record is encoded, and its size checked,
// before it joins the queue.
func (s *Store) Save(ctx context.Context, k store.Key, rec store.Record, version uint64) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := store.CheckKey(k); err != nil {
		return 0, err
	}
	if rec.Updated.IsZero() {
		rec.Updated = time.Now()
	}
	r := &saveReq{k: k, version: version, updated: rec.Updated, waiting: rec.Pending != nil}
	var err error
	if r.record, err = store.AppendRecord(nil, rec); err != nil {
		return 0, err
	}
	if a := rec.Audit; a != nil {
		entry := *a
		entry.Version = version + 1
		if r.audit, err = store.MarshalAuditEntry(entry); err != nil {
			return 0, err
		}
		if a.Intent != nil {
			r.opens, r.intentRun = true, []byte(a.Intent.Run)
		}
		r.settles = a.Settles
	}
	if due := store.NextDueOf(rec.Timers); !due.IsZero() {
		due = due.Truncate(time.Microsecond) // as PostgreSQL keeps it
		r.nextDue = &due
	}
	r.size = len(r.record) + len(r.audit)
	return s.enqueue(ctx, r)
}

// Delete removes an instance and its audit trail.
func (s *Store) Delete(ctx context.Context, k store.Key) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.CheckKey(k); err != nil {
		return err
	}
	_, err := s.enqueue(ctx, &saveReq{k: k, del: true})
	return err
}

// enqueue queues a save and returns its outcome. A save whose context
// ends while it waits is withdrawn (ctx's error: nothing written); once a
// committer took it, its outcome is unknown to its caller
// (store.ErrOutcomeUnknown).
func (s *Store) enqueue(ctx context.Context, r *saveReq) (uint64, error) {
	r.done = make(chan saveResult, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, errClosed
	}
	s.queue = append(s.queue, r)
	s.wake.Signal()
	s.mu.Unlock()
	select {
	case res := <-r.done:
		return res.version, res.err
	case <-ctx.Done():
	}
	s.mu.Lock()
	if !r.taken {
		if i := slices.Index(s.queue, r); i >= 0 {
			s.queue = slices.Delete(s.queue, i, i+1)
		}
		s.mu.Unlock()
		return 0, ctx.Err()
	}
	s.mu.Unlock()
	select {
	case res := <-r.done:
		return res.version, res.err
	default:
		return 0, fmt.Errorf("%w: the save's context ended while its batch was being committed: %w", store.ErrOutcomeUnknown, ctx.Err())
	}
}

// committer writes batches of the queue until the store closes and the
// queue is empty.
func (s *Store) committer() {
	defer s.committed.Done()
	for {
		batch := s.take()
		if batch == nil {
			return
		}
		s.writeBatch(batch)
	}
}

// take waits for saves and takes a batch of them (nil once the store is
// closed and nothing waits).
func (s *Store) take() []*saveReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queue) == 0 {
		if s.closed {
			return nil
		}
		s.wake.Wait()
	}
	n, size := 0, 0
	for n < len(s.queue) && n < maxBatch && (n == 0 || size+s.queue[n].size <= maxBatchBytes) {
		size += s.queue[n].size
		s.queue[n].taken = true
		n++
	}
	batch := slices.Clone(s.queue[:n])
	s.queue = slices.Delete(s.queue, 0, n)
	if len(s.queue) > 0 {
		s.wake.Signal() // another committer takes the rest
	}
	return batch
}

// compareKeys orders keys as every replica's batches lock them: by
// machine, then handle, bytes.
func compareKeys(a, b store.Key) int {
	if c := strings.Compare(a.Machine, b.Machine); c != 0 {
		return c
	}
	return strings.Compare(a.Handle, b.Handle)
}

// writeBatch writes a batch and tells each save its outcome. The saves
// go in the order of their keys (the order in which every replica's
// batches lock instances: they never deadlock), a key's saves in the
// order they came.
func (s *Store) writeBatch(batch []*saveReq) {
	slices.SortStableFunc(batch, func(a, b *saveReq) int { return compareKeys(a.k, b.k) })
	results := make(map[*saveReq]saveResult, len(batch))
	pending := batch
	lost, retried := 0, 0
	for len(pending) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		retry, err := s.tryBatch(ctx, pending, results)
		cancel()
		switch {
		case err == nil:
			pending = nil
		case errors.Is(err, errRetryAll) && retried < 3:
			retried++
		case errors.Is(err, store.ErrUnavailable) && lost < 1:
			lost++ // nothing was committed: again, on a fresh connection
		case errors.Is(err, errRetryRest):
			pending = retry
		default:
			for _, r := range pending {
				if _, ok := results[r]; !ok {
					results[r] = saveResult{err: err}
				}
			}
			pending = nil
		}
	}
	s.nSaves.Add(uint64(len(batch)))
	for _, r := range batch {
		r.done <- results[r]
	}
}

// What tryBatch asks of writeBatch when nothing was committed: again
// with every save (a deadlock or a serialization failure, not expected),
// or with those left (one save's own error was given to it).
var (
	errRetryAll  = errors.New("store: the database rolled the batch back")
	errRetryRest = errors.New("retry the rest of the batch")
)

// tryBatch writes saves in one transaction of two round trips: BEGIN, the
// transaction's id and every save's statement; then the NOTIFY of the
// saves made and COMMIT. It sets the results of the saves it decides;
// its error says what to do with the rest: store.ErrUnavailable when the
// first round trip lost its connection (nothing was committed),
// errRetryAll, errRetryRest (with the saves to retry), or another error
// for every save not decided.
func (s *Store) tryBatch(ctx context.Context, batch []*saveReq, results map[*saveReq]saveResult) ([]*saveReq, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	defer conn.Release() // a connection left in a transaction is closed, not kept
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SELECT pg_current_xact_id()::text, pg_postmaster_start_time()::text")
	for _, r := range batch {
		s.queueSave(b, r)
	}
	br := conn.SendBatch(ctx, b)
	var xid, started string
	outs := make([]outcome, len(batch))
	failed, ferr := -1, error(nil)
	if _, err := br.Exec(); err != nil {
		failed, ferr = len(batch), err
	} else if err := br.QueryRow().Scan(&xid, &started); err != nil {
		failed, ferr = len(batch), err
	}
	for i, r := range batch {
		if ferr != nil {
			break
		}
		if outs[i], err = s.readSave(br, r); err != nil {
			failed, ferr = i, err
		}
	}
	if err := br.Close(); ferr == nil && err != nil {
		failed, ferr = len(batch), err
	}
	if ferr != nil {
		if connLost(ctx, ferr) {
			return nil, unavailable(ferr)
		}
		var pe *pgconn.PgError
		if !errors.As(ferr, &pe) {
			return nil, fmt.Errorf("store: %w", ferr)
		}
		switch class := pe.Code[:2]; {
		case class == "40":
			return nil, fmt.Errorf("%w: %w", errRetryAll, ferr)
		case failed < len(batch) && (class == "22" || class == "23" || class == "54"):
			// That save's own: the others go again without it.
			results[batch[failed]] = saveResult{err: fmt.Errorf("store: the save was refused: %w", ferr)}
			return slices.Delete(slices.Clone(batch), failed, failed+1), errRetryRest
		}
		return nil, fmt.Errorf("store: %w", ferr)
	}
	var changes []store.Change
	for _, o := range outs {
		if o.made {
			changes = append(changes, o.change)
		}
	}
	b = &pgx.Batch{}
	for _, p := range encodeChanges(s.run, changes) {
		b.Queue("SELECT pg_notify($1, $2)", s.q.channelRaw, p)
	}
	b.Queue("COMMIT")
	s.nCommits.Add(1)
	err = s.commit(ctx, conn, b)
	committed := err == nil
	var pe *pgconn.PgError
	switch {
	case err == nil:
	case errors.As(err, &pe) && !connLost(ctx, err):
		// The database answered: a COMMIT that fails rolls back.
		err = fmt.Errorf("store: the commit failed: %w", err)
	default:
		// The answer was lost: the transaction's fate tells.
		rctx, cancel := context.WithTimeout(context.Background(), min(s.timeout, lostCommitWait))
		committed, err = s.resolve(rctx, lostCommit{xid: xid, started: started, witness: witnessOf(batch, outs)}, err)
		cancel()
	}
	for i, r := range batch {
		switch o := outs[i]; {
		case o.err != nil:
			results[r] = saveResult{err: o.err}
		case !o.made:
			results[r] = saveResult{} // a deletion of an instance not stored
		case committed:
			results[r] = saveResult{version: o.change.Version}
		default:
			results[r] = saveResult{err: err}
		}
	}
	return nil, nil
}

// queueSave queues a save's statements.
func (s *Store) queueSave(b *pgx.Batch, r *saveReq) {
	m, h := []byte(r.k.Machine), []byte(r.k.Handle)
	switch {
	case r.del:
		b.Queue(s.q.deleteInstance, m, h)
		b.Queue(s.q.deleteTrail, m, h)
	case r.version == 0:
		var iv *int64
		var irun []byte
		if r.opens {
			one := int64(1)
			iv, irun = &one, r.intentRun
		}
		b.Queue(s.q.create, m, h, r.record, r.updated, r.nextDue, s.run, iv, irun, r.audit, r.waiting)
	default:
		var iv, settles *int64
		if r.opens {
			v := int64(r.version + 1)
			iv = &v
		}
		if r.settles != 0 {
			v := int64(r.settles)
			settles = &v
		}
		b.Queue(s.q.update, m, h, int64(r.version), r.record, r.updated, r.nextDue, s.run, iv, settles, r.intentRun, r.audit, s.retention, r.waiting)
	}
}

// readSave reads what a save's statements made.
func (s *Store) readSave(br pgx.BatchResults, r *saveReq) (outcome, error) {
	if r.del {
		tag, err := br.Exec()
		if err != nil {
			return outcome{}, err
		}
		if _, err := br.Exec(); err != nil {
			return outcome{}, err
		}
		return outcome{made: tag.RowsAffected() > 0, change: store.Change{Key: r.k, Run: s.run}}, nil
	}
	var v int64
	var iv *int64
	var irun []byte
	err := br.QueryRow().Scan(&v, &iv, &irun)
	if errors.Is(err, pgx.ErrNoRows) {
		return outcome{err: store.ErrConflict}, nil
	}
	if err != nil {
		return outcome{}, err
	}
	c := store.Change{Key: r.k, Version: uint64(v), Intent: openIntent(iv, irun), Run: s.run}
	if r.nextDue != nil {
		c.NextDue = *r.nextDue
	}
	return outcome{made: true, change: c}, nil
}

// lostCommitWait bounds the resolution of a commit whose answer was lost
// (or Options.Timeout, when shorter): a database that cannot be reached
// for that long leaves the batch's saves store.ErrOutcomeUnknown, rather
// than their callers waiting (and the saves queued behind them) for a
// restart that may be long.
const lostCommitWait = 5 * time.Second

// lostCommit is a batch whose COMMIT lost its answer: its transaction,
// the start of the server it ran on, and a save of it that tells by its
// audit entry whether the batch was committed (nil: none can).
type lostCommit struct {
	xid, started string
	witness      *saveReq
}

// witnessOf returns a save of a batch made in its transaction with an
// audit entry (the entry, at the version it made, is there only if the
// batch was committed), nil when there is none.
func witnessOf(batch []*saveReq, outs []outcome) *saveReq {
	for i, r := range batch {
		if outs[i].made && outs[i].err == nil && !r.del && r.audit != nil {
			return r
		}
	}
	return nil
}

// resolve finds out whether the transaction of a batch whose COMMIT lost
// its answer (cause) was committed: by the transaction's status while the
// server that ran it still runs (a transaction still in progress, its
// backend not aware that its client is gone, is ended first); once that
// server restarted (a crash, or a stop), by the audit entry of a save of
// the batch, for a transaction id whose records never reached the disk
// is given again after a crash, and its status is then another
// transaction's. Its error, when the database cannot tell (it cannot be
// reached before ctx ends; a batch that restarted server does not tell
// of), is store.ErrOutcomeUnknown; when it was not committed,
// store.ErrUnavailable (nothing was written).
func (s *Store) resolve(ctx context.Context, lc lostCommit, cause error) (bool, error) {
	xid := lc.xid
	wait := 20 * time.Millisecond
	for {
		var status *string
		var started string
		err := s.pool.QueryRow(ctx, "SELECT pg_xact_status($1::xid8), pg_postmaster_start_time()::text", xid).Scan(&status, &started)
		if err == nil && started != lc.started {
			return s.witnessed(ctx, lc.witness, cause)
		}
		switch {
		case err == nil && status == nil:
			return false, fmt.Errorf("%w: the transaction of the save is too old to tell: %w", store.ErrOutcomeUnknown, cause)
		case err == nil && *status == "committed":
			s.log.Info("store: a commit whose answer was lost was found committed", "cause", cause)
			return true, nil
		case err == nil && *status == "aborted":
			return false, fmt.Errorf("%w: the connection was lost before the commit, and nothing was written: %w", store.ErrUnavailable, cause)
		case err == nil: // in progress
			_, err = s.pool.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_xid = $1::xid8::xid", xid)
		}
		if err != nil && !connLost(ctx, err) && ctx.Err() == nil {
			return false, fmt.Errorf("%w: the save's commit lost its answer (%v), and its outcome cannot be read: %w", store.ErrOutcomeUnknown, cause, err)
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("%w: the save's commit lost its answer, and the database could not be reached to tell: %w", store.ErrOutcomeUnknown, cause)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// witnessed tells whether a batch was committed by a save of it: its
// audit entry is at the version it made (a save of another replica at
// that version has another entry), unless the trail was trimmed past it.
func (s *Store) witnessed(ctx context.Context, w *saveReq, cause error) (bool, error) {
	if w == nil {
		return false, fmt.Errorf("%w: the database restarted during the commit of saves that leave no audit entry to tell by: %w", store.ErrOutcomeUnknown, cause)
	}
	m, h, v := []byte(w.k.Machine), []byte(w.k.Handle), int64(w.version+1)
	var entry []byte
	var now *int64
	err := s.pool.QueryRow(ctx, s.q.expand(`SELECT (SELECT entry FROM {s}.audit WHERE machine = $1 AND handle = $2 AND version = $3),
		(SELECT version FROM {s}.instances WHERE machine = $1 AND handle = $2)`), m, h, v).Scan(&entry, &now)
	switch {
	case err != nil:
		return false, fmt.Errorf("%w: the save's commit lost its answer (%v), and its outcome cannot be read: %w", store.ErrOutcomeUnknown, cause, err)
	case entry != nil && bytes.Equal(entry, w.audit):
		s.log.Info("store: a commit whose answer was lost was found committed", "cause", cause)
		return true, nil
	case entry == nil && now != nil && *now-v >= s.retention:
		return false, fmt.Errorf("%w: the database restarted during the commit, and the trail was trimmed past it: %w", store.ErrOutcomeUnknown, cause)
	}
	return false, fmt.Errorf("%w: the database restarted before the commit, and nothing was written: %w", store.ErrUnavailable, cause)
}

// encodeChanges packs changes into NOTIFY payloads, each under
// PostgreSQL's limit of 8,000 bytes: a line "1 RUN", then a line per
// change: "VERSION DUE INTENT INTENTRUN MACHINE HANDLE", the due time in
// microseconds since the epoch ("-": none), the open intent's version
// (0: none), the bytes in base64 ("-": none). A change whose line would
// not fit goes with its intent's run left out ("?": unknown).
func encodeChanges(run string, cs []store.Change) []string {
	const limit = 7900
	var out []string
	var p bytes.Buffer
	head := "1 " + b64(run)
	for _, c := range cs {
		line := encodeChange(c, false)
		if len(head)+1+len(line) > limit {
			line = encodeChange(c, true)
		}
		if p.Len() > 0 && p.Len()+1+len(line) > limit {
			out = append(out, p.String())
			p.Reset()
		}
		if p.Len() == 0 {
			p.WriteString(head)
		}
		p.WriteByte('\n')
		p.WriteString(line)
	}
	if p.Len() > 0 {
		out = append(out, p.String())
	}
	return out
}

func encodeChange(c store.Change, noRun bool) string {
	due := "-"
	if !c.NextDue.IsZero() {
		due = fmt.Sprint(c.NextDue.UnixMicro())
	}
	irun := b64(c.Intent.Run)
	if noRun {
		irun = "?"
	}
	return fmt.Sprintf("%d %s %d %s %s %s", c.Version, due, c.Intent.Version, irun, b64(c.Key.Machine), b64(c.Key.Handle))
}
