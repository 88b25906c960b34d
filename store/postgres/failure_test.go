package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stategate/stategate/store"
)

// wait bounds a test's wait for what must happen (far more than it takes).
const wait = 30 * time.Second

// resyncs returns a channel that is told each Resync of a store's feed,
// and each change on another channel.
func feedOf(t *testing.T, s *Store) (resync chan struct{}, changes chan store.Change) {
	resync, changes = make(chan struct{}, 16), make(chan store.Change, 1024)
	cancel := s.Watch(func(c store.Change) {
		if c.Resync {
			resync <- struct{}{}
		} else {
			changes <- c
		}
	})
	t.Cleanup(cancel)
	return resync, changes
}

func await[T any](t *testing.T, ch chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("%s: nothing in %v", what, wait)
		var zero T
		return zero
	}
}

// TestLostCommit: a batch whose COMMIT lost its answer with its
// connection is resolved by its transaction's fate: committed (the save
// is acknowledged, and its change told), never committed (ErrUnavailable,
// nothing written), still in progress on a backend that did not notice
// (ended, then as never committed), or not to be told while the database
// is down (ErrOutcomeUnknown); once the server restarted, by a save's
// audit entry: committed before the crash, or not, its transaction's id
// given again to another that committed.
func TestLostCommit(t *testing.T) {
	cluster := pg.Cluster(t)
	lost := fmt.Errorf("test: the answer was lost: %w", io.ErrUnexpectedEOF)
	var held []*pgx.Conn
	defer func() {
		for _, c := range held {
			c.Close(context.Background())
		}
	}()
	for _, c := range []struct {
		name    string
		timeout time.Duration
		commit  func(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch) error
		want    error // nil: acknowledged
		stored  bool
	}{
		{"committed", 0, func(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch) error {
			if err := conn.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			conn.Conn().Close(ctx)
			return lost
		}, nil, true},
		{"never sent", 0, func(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch) error {
			conn.Conn().Close(ctx)
			return lost
		}, store.ErrUnavailable, false},
		{"in progress", 0, func(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch) error {
			held = append(held, conn.Hijack()) // its transaction stays open, its locks held
			return lost
		}, store.ErrUnavailable, false},
		{"committed, then the server crashed", 0, func(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch) error {
			if err := conn.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			if err := cluster.Kill(); err != nil {
				return err
			}
			if err := cluster.Start(); err != nil {
				return err
			}
			return lost
		}, nil, true},
		{"crashed before its commit, its transaction id given again", 0, func(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch) error {
			// The server crashes with the batch's records in its WAL
			// buffers (not on disk): the id of its transaction is
			// given again after the restart, to one that commits.
			var xid uint64
			if err := conn.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&xid); err != nil {
				return err
			}
			if err := cluster.Kill(); err != nil {
				return err
			}
			if err := cluster.Start(); err != nil {
				return err
			}
			c, err := pgx.Connect(ctx, testDB(t))
			if err != nil {
				return err
			}
			defer c.Close(ctx)
			for got := uint64(0); got < xid; {
				if err := c.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&got); err != nil {
					return err
				}
				if got == xid {
					t.Logf("the transaction id %d was given again", xid)
				}
			}
			return lost
		}, store.ErrUnavailable, false},
		{"database down", 2 * time.Second, func(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch) error {
			if err := cluster.Kill(); err != nil {
				t.Error(err)
			}
			return lost
		}, store.ErrOutcomeUnknown, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := openTest(t, newSchema(t), Options{Timeout: c.timeout})
			defer s.Close()
			ctx := context.Background()
			k := store.Key{Machine: "m", Handle: c.name}
			if _, err := s.Save(ctx, k, store.Record{Snapshot: []byte(`1`), Audit: &store.AuditEntry{Tool: "first"}}, 0); err != nil {
				t.Fatal(err)
			}
			_, changes := feedOf(t, s)
			real := s.commit
			s.commit = c.commit
			v, err := s.Save(ctx, k, store.Record{Snapshot: []byte(`2`), Audit: &store.AuditEntry{Tool: "second"}}, 1)
			s.commit = real
			if c.want == nil && (err != nil || v != 2) || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("the save: %d, %v; want %v", v, err, c.want)
			}
			if errors.Is(c.want, store.ErrOutcomeUnknown) {
				if err := cluster.Start(); err != nil {
					t.Fatal(err)
				}
			}
			rec, v, err := s.Load(ctx, k)
			trail, terr := s.Audit(ctx, k, 0)
			if err != nil || terr != nil {
				t.Fatal(err, terr)
			}
			want, wantV := "1", uint64(1)
			if c.stored {
				want, wantV = "2", 2
			}
			if string(rec.Snapshot) != want || v != wantV || len(trail) != int(v) {
				t.Fatalf("stored %s at %d with %d entries; want %s at %d", rec.Snapshot, v, len(trail), want, wantV)
			}
			if c.stored {
				// (The first save's change may come first: the feed is
				// watched after it.)
				ch := await(t, changes, "the change")
				if ch.Version == 1 {
					ch = await(t, changes, "the change")
				}
				if ch.Key != k || ch.Version != 2 {
					t.Fatalf("the feed told %+v", ch)
				}
			}
			// The store goes on.
			if _, err := s.Save(ctx, k, store.Record{Snapshot: []byte(`3`)}, v); err != nil {
				t.Fatalf("a save after: %v", err)
			}
		})
	}
}

// TestUnavailable: while the database is stopped, every call fails at
// once with ErrUnavailable; once it is back, the store serves again
// (its connections made anew) and its feed tells Resync.
func TestUnavailable(t *testing.T) {
	cluster := pg.Cluster(t)
	s := openTest(t, newSchema(t), Options{})
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	k := store.Key{Machine: "m", Handle: "h"}
	resync, changes := feedOf(t, s)
	if _, err := s.Save(ctx, k, store.Record{Snapshot: []byte(`1`)}, 0); err != nil {
		t.Fatal(err)
	}
	await(t, changes, "the first change")
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	defer func() {
		if !restarted {
			cluster.Start()
		}
	}()
	calls := map[string]func() error{
		"Save": func() error { _, err := s.Save(ctx, k, store.Record{Snapshot: []byte(`2`)}, 1); return err },
		"Load": func() error { _, _, err := s.Load(ctx, k); return err },
		"LoadIfChanged": func() error {
			_, err := s.LoadIfChanged(ctx, k, 1)
			return err
		},
		"List":   func() error { _, err := s.List(ctx); return err },
		"Audit":  func() error { _, err := s.Audit(ctx, k, 0); return err },
		"Delete": func() error { return s.Delete(ctx, k) },
		"ClaimTimers": func() error {
			_, err := s.ClaimTimers(ctx, store.ClaimRequest{Now: time.Now(), Lease: time.Minute, Max: 1})
			return err
		},
		"NextDue":     func() error { _, _, err := s.NextDue(ctx); return err },
		"RegisterRun": func() error { return s.RegisterRun(ctx, time.Now(), time.Minute) },
		"Live":        func() error { _, err := s.Live(ctx, time.Now()); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s while the database is stopped: %v, want ErrUnavailable", name, err)
		}
	}
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	await(t, resync, "Resync once the database is back")
	if _, err := s.Save(ctx, k, store.Record{Snapshot: []byte(`2`)}, 1); err != nil {
		t.Fatalf("a save once the database is back: %v", err)
	}
	if ch := await(t, changes, "a change once the database is back"); ch.Version != 2 {
		t.Fatalf("the feed told %+v", ch)
	}
	if rec, v, err := s.Load(ctx, k); err != nil || v != 2 || string(rec.Snapshot) != "2" {
		t.Fatalf("load: %s at %d, %v", rec.Snapshot, v, err)
	}
}

// TestSaveContext: a save whose context ends while it waits in the queue
// is withdrawn, nothing written; one whose batch is being committed is of
// an outcome unknown to its caller.
func TestSaveContext(t *testing.T) {
	s := openTest(t, newSchema(t), Options{Committers: 1})
	defer s.Close()
	ctx := context.Background()
	entered, release := make(chan struct{}), make(chan struct{})
	real := s.commit
	s.commit = func(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch) error {
		close(entered)
		<-release
		return real(ctx, conn, b)
	}
	first, second := store.Key{Machine: "m", Handle: "first"}, store.Key{Machine: "m", Handle: "second"}
	fctx, fcancel := context.WithCancel(ctx)
	ferr := make(chan error, 1)
	go func() {
		_, err := s.Save(fctx, first, store.Record{Snapshot: []byte(`1`)}, 0)
		ferr <- err
	}()
	<-entered // the only committer holds the first save's batch
	sctx, scancel := context.WithCancel(ctx)
	serr := make(chan error, 1)
	go func() {
		_, err := s.Save(sctx, second, store.Record{Snapshot: []byte(`1`)}, 0)
		serr <- err
	}()
	// The second save is queued once the queue holds it.
	for {
		s.mu.Lock()
		n := len(s.queue)
		s.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	scancel()
	if err := await(t, serr, "the withdrawn save"); !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrOutcomeUnknown) {
		t.Fatalf("a save withdrawn from the queue: %v", err)
	}
	fcancel()
	if err := await(t, ferr, "the save being committed"); !errors.Is(err, store.ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) {
		t.Fatalf("a save whose batch is being committed: %v", err)
	}
	close(release)
	s.commit = real
	// The committer is done with the batch once a later save is.
	if _, err := s.Save(ctx, store.Key{Machine: "m", Handle: "third"}, store.Record{Snapshot: []byte(`1`)}, 0); err != nil {
		t.Fatal(err)
	}
	if _, v, err := s.Load(ctx, first); err != nil || v != 1 {
		t.Fatalf("the first save (its outcome was unknown to its caller): at %d, %v", v, err)
	}
	if _, _, err := s.Load(ctx, second); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the withdrawn save: %v", err)
	}
}

// TestSchema: stores opening a new schema at once create it once; a
// schema of a later version is refused, naming both versions.
func TestSchema(t *testing.T) {
	schema := newSchema(t)
	var wg sync.WaitGroup
	stores := make([]*Store, 4)
	errs := make([]error, 4)
	for i := range stores {
		wg.Go(func() {
			stores[i], errs[i] = Open(context.Background(), testDB(t), Options{Schema: schema, Logger: quietLog()})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	ctx := context.Background()
	if _, err := stores[0].pool.Exec(ctx, stores[0].q.expand(`UPDATE {s}.meta SET value = '7' WHERE key = 'schema'`)); err != nil {
		t.Fatal(err)
	}
	_, err := Open(ctx, testDB(t), Options{Schema: schema, Logger: quietLog()})
	if !errors.Is(err, ErrNewerSchema) || !strings.Contains(err.Error(), "version 7") || !strings.Contains(err.Error(), fmt.Sprint("up to ", SchemaVersion)) {
		t.Fatalf("open of a newer schema: %v", err)
	}
	if SchemaVersion != len(migrations)-1 {
		t.Fatalf("SchemaVersion is %d, and there are %d migrations", SchemaVersion, len(migrations)-1)
	}
}

// TestOpenErrors: a URL that does not parse, and a database that cannot
// be reached, are refused at Open.
func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, "postgres://%zz", Options{}); err == nil || !strings.Contains(err.Error(), "URL") {
		t.Fatalf("a URL that does not parse: %v", err)
	}
	_, err := Open(ctx, "postgres://nobody@/nothing?host="+t.TempDir(), Options{Logger: quietLog()})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a database that cannot be reached: %v", err)
	}
}
