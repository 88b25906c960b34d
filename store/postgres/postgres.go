// Package postgres is the store engine several server processes share: a
// store.Shared in a PostgreSQL database (github.com/jackc/pgx/v5, no
// ORM), one schema holding the instances, their audit trails and the runs
// alive. It owns how records are kept there (keys and records as bytea:
// keys of any bytes), the group commit of concurrent saves (a batch of
// saves in one pipelined transaction, keys in one order so that replicas'
// batches never deadlock, and one NOTIFY per batch), the change feed
// (LISTEN on a connection of its own, reconnected with backoff, then
// Resync), the resolution of a commit whose answer was lost with its
// connection (by the batch's transaction id, or once the database
// restarted by a save's audit entry: store.ErrOutcomeUnknown only when
// the database cannot tell), the instances waiting for an approval
// (Waiting), timers' due times and their claims
// (FOR UPDATE SKIP LOCKED, with leases), open intents, runs' heartbeats,
// the schema's creation and upgrades under an advisory lock (a schema
// newer than it knows refused, ErrNewerSchema), and a database that cannot
// be reached (store.ErrUnavailable, and recovery when it is back). It
// enforces the limits of package store (CheckKey, AppendRecord,
// MarshalAuditEntry) and its audit retention, and passes the contract
// suites of store/storetest. It knows nothing of the runtime, of machines
// or of what a snapshot holds.
package postgres

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stategate/stategate/store"
)

// DefaultSchema is the schema of the store's tables unless told
// otherwise.
const DefaultSchema = "stategate"

// Options configure a store.
type Options struct {
	// Schema is the PostgreSQL schema of the store's tables, created if
	// missing (DefaultSchema when empty). Replicas of one deployment
	// share it; another schema is another store.
	Schema string
	// AuditRetention bounds the audit entries kept per instance
	// (store.DefaultAuditRetention when zero). Replicas should agree: each
	// save trims its instance's trail to its own replica's.
	AuditRetention int
	// Run names this replica (store.Shared.Run); random when empty.
	Run string
	// NoSync commits with synchronous_commit off: a save returns before
	// its commit is flushed on the database's disk (faster; a crash of
	// the database may lose the last saves, a crash of a replica loses
	// nothing).
	NoSync bool
	// MaxConns bounds the connections of the store's pool (8 when zero),
	// besides the change feed's own.
	MaxConns int32
	// Committers is how many batches of saves may be in flight at once (1
	// when zero: while a batch is in flight the next one fills, and each
	// commit of a batch holds PostgreSQL's NOTIFY lock, which every
	// replica's commits take in turn; 2 measured no faster on one local
	// database).
	Committers int
	// Timeout bounds a batch's round trips (30 s when zero), and the
	// resolution of a commit whose answer was lost (5 s when longer: the
	// saves are then store.ErrOutcomeUnknown).
	Timeout time.Duration
	// ListenURL, when set, is the URL of the change feed's connection
	// (LISTEN needs a session of its own: not through a pooler in
	// transaction mode).
	ListenURL string
	// MustExist refuses (ErrNoStore) a database with no store in the
	// schema, rather than making one: for commands that read a store.
	MustExist bool
	Logger    *slog.Logger
}

// ErrNoStore is returned by Open with MustExist for a database with no
// store in the schema.
var ErrNoStore = errors.New("no stategate store in this database")

// ErrNewerSchema is returned by Open for a schema upgraded by a later
// stategate than this one.
var ErrNewerSchema = errors.New("the store's schema is newer than this stategate knows")

// Store is a store.Shared in PostgreSQL.
//
// Saves wait in a queue; Options.Committers batches of them (one by
// default) are written at once, each in one transaction of two round
// trips: the saves' compare-and-swaps (their keys sorted), then a NOTIFY
// of those that were made and the COMMIT. A save returns once its batch is
// committed.
type Store struct {
	pool      *pgxpool.Pool
	listenCfg *pgx.ConnConfig
	log       *slog.Logger
	q         queries
	run       string
	host      string
	retention int64
	timeout   time.Duration
	mustExist bool

	// The queue of saves, and its committers.
	mu        sync.Mutex
	wake      *sync.Cond
	queue     []*saveReq
	closed    bool
	committed sync.WaitGroup

	feed       store.Feed
	stopListen context.CancelFunc
	listening  sync.WaitGroup

	// claimed are the instances this replica claimed, and until when (for
	// Close to release them).
	cmu     sync.Mutex
	claimed map[store.Key]time.Time

	// commit sends a batch's second round trip (a test hook).
	commit func(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch) error

	nSaves   atomic.Uint64
	nCommits atomic.Uint64
}

var _ store.Shared = (*Store)(nil)

// Stats returns how many saves were written, in how many commits.
func (s *Store) Stats() (saves, commits uint64) { return s.nSaves.Load(), s.nCommits.Load() }

// Run names this replica.
func (s *Store) Run() string { return s.run }

// Open connects to a PostgreSQL database by a pgx connection URL
// (postgres://… or postgresql://…, or a key=value string), creates or
// upgrades the store's schema (under an advisory lock, while other
// replicas may run), and starts its change feed.
func Open(ctx context.Context, url string, o Options) (*Store, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	schema := o.Schema
	if schema == "" {
		schema = DefaultSchema
	}
	if len(schema) > 50 {
		return nil, fmt.Errorf("store: the PostgreSQL schema name %q is over 50 bytes", schema)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("store: the PostgreSQL URL: %w", err)
	}
	configure(cfg.ConnConfig, o)
	cfg.MaxConns = o.MaxConns
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 8
	}
	listenCfg := cfg.ConnConfig.Copy()
	if o.ListenURL != "" {
		lc, err := pgx.ParseConfig(o.ListenURL)
		if err != nil {
			return nil, fmt.Errorf("store: the PostgreSQL URL of the change feed: %w", err)
		}
		configure(lc, o)
		listenCfg = lc
	}
	s := &Store{
		log: log, q: newQueries(schema), run: o.Run, retention: int64(o.AuditRetention),
		timeout: o.Timeout, listenCfg: listenCfg, claimed: map[store.Key]time.Time{}, mustExist: o.MustExist,
	}
	s.wake = sync.NewCond(&s.mu)
	if s.run == "" {
		s.run = rand.Text()[:16]
	}
	if s.retention <= 0 {
		s.retention = store.DefaultAuditRetention
	}
	if s.timeout <= 0 {
		s.timeout = 30 * time.Second
	}
	s.host, _ = os.Hostname()
	s.commit = func(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch) error {
		return conn.SendBatch(ctx, b).Close()
	}
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := s.migrate(ctx); err != nil {
		s.pool.Close()
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	s.stopListen = cancel
	ready := make(chan error, 1)
	s.listening.Add(1)
	go s.listen(lctx, ready)
	if err := <-ready; err != nil {
		cancel()
		s.listening.Wait()
		s.pool.Close()
		return nil, fmt.Errorf("store: the change feed: %w", unavailable(err))
	}
	committers := o.Committers
	if committers <= 0 {
		committers = 1
	}
	for range committers {
		s.committed.Add(1)
		go s.committer()
	}
	return s, nil
}

// configure sets what every connection of the store has.
func configure(c *pgx.ConnConfig, o Options) {
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 10 * time.Second
	}
	if c.RuntimeParams == nil {
		c.RuntimeParams = map[string]string{}
	}
	if _, ok := c.RuntimeParams["application_name"]; !ok {
		c.RuntimeParams["application_name"] = "stategate"
	}
	if o.NoSync {
		c.RuntimeParams["synchronous_commit"] = "off"
	}
}

// Close writes the saves under way, ends the run's registration and its
// leases (other replicas may claim those instances at once), and closes
// the connections.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.wake.Broadcast()
	s.mu.Unlock()
	s.committed.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.endRun(ctx)
	s.stopListen()
	s.listening.Wait()
	s.feed.Close()
	s.pool.Close()
	if err != nil && !errors.Is(err, store.ErrUnavailable) {
		return err
	}
	return nil
}

// Load returns an instance's record and version.
func (s *Store) Load(ctx context.Context, k store.Key) (store.Record, uint64, error) {
	if err := ctx.Err(); err != nil {
		return store.Record{}, 0, err
	}
	if err := store.CheckKey(k); err != nil {
		return store.Record{}, 0, err
	}
	var version int64
	var raw []byte
	err := s.read(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, s.q.load, []byte(k.Machine), []byte(k.Handle)).Scan(&version, &raw)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Record{}, 0, store.ErrNotFound
	}
	if err != nil {
		return store.Record{}, 0, err
	}
	rec, err := decodeRecord(raw)
	return rec, uint64(version), err
}

// LoadIfChanged returns an instance's version, open intent and earliest
// timer, and its record unless it is at version have.
func (s *Store) LoadIfChanged(ctx context.Context, k store.Key, have uint64) (store.Loaded, error) {
	if err := ctx.Err(); err != nil {
		return store.Loaded{}, err
	}
	if err := store.CheckKey(k); err != nil {
		return store.Loaded{}, err
	}
	var (
		version int64
		raw     []byte
		iv      *int64
		irun    []byte
		due     *time.Time
	)
	err := s.read(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, s.q.loadIfChanged, []byte(k.Machine), []byte(k.Handle), int64(have)).Scan(&version, &raw, &iv, &irun, &due)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Loaded{}, store.ErrNotFound
	}
	if err != nil {
		return store.Loaded{}, err
	}
	l := store.Loaded{Version: uint64(version), Changed: uint64(version) != have, Intent: openIntent(iv, irun)}
	if due != nil {
		l.NextDue = *due
	}
	if l.Changed {
		if l.Record, err = decodeRecord(raw); err != nil {
			return store.Loaded{}, err
		}
	}
	return l, nil
}

func openIntent(v *int64, run []byte) store.OpenIntent {
	if v == nil {
		return store.OpenIntent{}
	}
	return store.OpenIntent{Version: uint64(*v), Run: string(run)}
}

// List returns the stored instances' keys.
func (s *Store) List(ctx context.Context) ([]store.Key, error) {
	var out []store.Key
	err := s.read(ctx, func(ctx context.Context) error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, s.q.list)
		if err != nil {
			return err
		}
		var m, h []byte
		_, err = pgx.ForEachRow(rows, []any{&m, &h}, func() error {
			out = append(out, store.Key{Machine: string(m), Handle: string(h)})
			return nil
		})
		return err
	})
	return out, err
}

// Waiting returns the keys of the instances with a call waiting for an
// operator's approval (store.Record.Pending), in no order: an index of
// them, kept by every save, is read, not the records.
func (s *Store) Waiting(ctx context.Context) ([]store.Key, error) {
	var out []store.Key
	err := s.read(ctx, func(ctx context.Context) error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, s.q.waiting)
		if err != nil {
			return err
		}
		var m, h []byte
		_, err = pgx.ForEachRow(rows, []any{&m, &h}, func() error {
			out = append(out, store.Key{Machine: string(m), Handle: string(h)})
			return nil
		})
		return err
	})
	return out, err
}

// Recent returns the keys of the n newest instances (of a machine, or of
// all for ""), by their creation, the newest first.
func (s *Store) Recent(ctx context.Context, machine string, n int) ([]store.Key, error) {
	if n <= 0 {
		return nil, ctx.Err()
	}
	var out []store.Key
	err := s.read(ctx, func(ctx context.Context) error {
		out = out[:0]
		var rows pgx.Rows
		var err error
		if machine == "" {
			rows, err = s.pool.Query(ctx, s.q.recentAll, n)
		} else {
			rows, err = s.pool.Query(ctx, s.q.recent, []byte(machine), n)
		}
		if err != nil {
			return err
		}
		var m, h []byte
		_, err = pgx.ForEachRow(rows, []any{&m, &h}, func() error {
			out = append(out, store.Key{Machine: string(m), Handle: string(h)})
			return nil
		})
		return err
	})
	return out, err
}

// Count returns how many instances are stored (of a machine, or of all
// for ""). PostgreSQL counts them (an index-only scan): no row of counts
// that every creation of a machine would write, and replicas contend for.
func (s *Store) Count(ctx context.Context, machine string) (int, error) {
	var n int64
	err := s.read(ctx, func(ctx context.Context) error {
		if machine == "" {
			return s.pool.QueryRow(ctx, s.q.countAll).Scan(&n)
		}
		return s.pool.QueryRow(ctx, s.q.count, []byte(machine)).Scan(&n)
	})
	return int(n), err
}

// Audit returns the last n entries of an instance's audit trail, oldest
// first (every entry kept when n <= 0).
func (s *Store) Audit(ctx context.Context, k store.Key, n int) ([]store.AuditEntry, error) {
	if err := store.CheckKey(k); err != nil {
		return nil, err
	}
	var limit *int64
	if n > 0 {
		l := int64(n)
		limit = &l
	}
	var out []store.AuditEntry
	err := s.read(ctx, func(ctx context.Context) error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, s.q.audit, []byte(k.Machine), []byte(k.Handle), limit)
		if err != nil {
			return err
		}
		var raw []byte
		_, err = pgx.ForEachRow(rows, []any{&raw}, func() error {
			var e store.AuditEntry
			if err := json.Unmarshal(raw, &e); err != nil {
				return fmt.Errorf("store: an audit entry of %s %q: %w", k.Machine, truncate(k.Handle), err)
			}
			out = append(out, e)
			return nil
		})
		return err
	})
	return out, err
}

// read runs a read, again once on a fresh connection when the first
// failed with its connection (one a restarted database ended), and maps
// a database that cannot be reached to store.ErrUnavailable.
func (s *Store) read(ctx context.Context, f func(context.Context) error) error {
	err := f(ctx)
	if err != nil && connLost(ctx, err) {
		err = f(ctx)
	}
	if err != nil && connLost(ctx, err) {
		return unavailable(err)
	}
	return err
}

// decodeRecord reads a record as store.AppendRecord wrote it.
func decodeRecord(raw []byte) (store.Record, error) {
	var rec store.Record
	if err := json.Unmarshal(raw, &rec); err != nil {
		return store.Record{}, fmt.Errorf("store: a corrupt record: %w", err)
	}
	if string(rec.Snapshot) == "null" {
		rec.Snapshot = nil // a reset
	}
	return rec, nil
}

// connLost reports whether err is the loss of a connection, or of the
// database, rather than an answer of the database (or the end of ctx).
func connLost(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil || errors.Is(err, pgx.ErrNoRows) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", // shutdown, crash, cannot connect now
			pe.Code == "57P05", // idle session timeout
			pe.Code == "53300": // too many connections
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.Timeout(err) || strings.Contains(err.Error(), "conn closed") || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, net.ErrClosed)
}

// unavailable wraps the loss of the database as store.ErrUnavailable.
func unavailable(err error) error {
	if errors.Is(err, store.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
}

// truncate shortens a handle for a message.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
