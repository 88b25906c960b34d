package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stategate/stategate/store"
)

// ClaimTimers leases to this replica instances with a timer due (see
// store.Shared.ClaimTimers): one statement, rows locked by another claim
// or a save under way skipped, committed without waiting for the disk (a
// claim a crash of the database forgets only lets another replica claim
// again; a timer fires through a compare-and-swap save).
func (s *Store) ClaimTimers(ctx context.Context, c store.ClaimRequest) ([]store.Claim, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := c.Now.Truncate(time.Microsecond)
	until := now.Add(c.Lease)
	var out []store.Claim
	err := s.read(ctx, func(ctx context.Context) error {
		out = out[:0]
		b := &pgx.Batch{}
		b.Queue("SELECT set_config('synchronous_commit', 'off', true)")
		b.Queue(s.q.claim, now, s.run, now.Add(-c.Grace), int64(max(c.Max, 1)), until)
		br := s.pool.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		var m, h []byte
		var v int64
		var due time.Time
		_, err = pgx.ForEachRow(rows, []any{&m, &h, &v, &due}, func() error {
			out = append(out, store.Claim{Key: store.Key{Machine: string(m), Handle: string(h)}, Version: uint64(v), NextDue: due, Until: until})
			return nil
		})
		if err != nil {
			return err
		}
		return br.Close()
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b store.Claim) int { return a.NextDue.Compare(b.NextDue) })
	s.cmu.Lock()
	if len(s.claimed) > 4096 {
		for k, t := range s.claimed {
			if !t.After(now) {
				delete(s.claimed, k)
			}
		}
	}
	for _, cl := range out {
		s.claimed[cl.Key] = until
	}
	s.cmu.Unlock()
	return out, nil
}

// NextDue returns the earliest time a claim may find an instance.
func (s *Store) NextDue(ctx context.Context) (time.Time, bool, error) {
	var at time.Time
	err := s.read(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, s.q.nextDue).Scan(&at)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	return at, true, nil
}

// RegisterRun records this replica's run alive until now+ttl, and
// forgets the runs that expired a day before now.
func (s *Store) RegisterRun(ctx context.Context, now time.Time, ttl time.Duration) error {
	return s.read(ctx, func(ctx context.Context) error {
		b := &pgx.Batch{}
		b.Queue(s.q.register, s.run, s.host, now.Add(ttl))
		b.Queue(s.q.forgetRuns, now.Add(-24*time.Hour))
		return s.pool.SendBatch(ctx, b).Close()
	})
}

// Live returns the runs alive at now.
func (s *Store) Live(ctx context.Context, now time.Time) ([]string, error) {
	var out []string
	err := s.read(ctx, func(ctx context.Context) error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, s.q.live, now)
		if err != nil {
			return err
		}
		var run string
		_, err = pgx.ForEachRow(rows, []any{&run}, func() error {
			out = append(out, run)
			return nil
		})
		return err
	})
	return out, err
}

// endRun removes this replica's run and releases the leases it holds.
func (s *Store) endRun(ctx context.Context) error {
	b := &pgx.Batch{}
	b.Queue(s.q.endRun, s.run)
	s.cmu.Lock()
	for k := range s.claimed {
		b.Queue(s.q.release, []byte(k.Machine), []byte(k.Handle), s.run)
	}
	clear(s.claimed)
	s.cmu.Unlock()
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		if connLost(ctx, err) {
			return unavailable(err)
		}
		return fmt.Errorf("store: end the run: %w", err)
	}
	return nil
}
