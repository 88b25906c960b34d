package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// migrations are the schema's versions: migrations[v] brings a schema at
// version v-1 to v ("{s}" is the schema). A new version is a new entry,
// never an edit of one released.
var migrations = []string{
	1: `
CREATE TABLE {s}.instances (
	machine        bytea       NOT NULL, -- store.Key.Machine, any bytes
	handle         bytea       NOT NULL, -- store.Key.Handle
	version        bigint      NOT NULL CHECK (version > 0),
	record         bytea       NOT NULL, -- store.AppendRecord's JSON (bytea: jsonb would reorder keys and refuse \u0000)
	updated        timestamptz NOT NULL, -- the record's Updated
	next_due       timestamptz,          -- its earliest timer's due time (store.NextDueOf); NULL: none
	saved_by       text        NOT NULL, -- the run of the replica that saved it last
	intent_version bigint,               -- its open intent (store.OpenIntent), NULL: none
	intent_run     bytea,                --   and the run that wrote it
	lease_run      text,                 -- the replica whose claim (ClaimTimers) holds it
	lease_until    timestamptz,          --   until then; a save clears both
	created        bigint      GENERATED ALWAYS AS IDENTITY, -- the order of creations (store.Store.Recent)
	PRIMARY KEY (machine, handle)
) WITH (fillfactor = 80);
-- What Recent and Count read: the instances by creation, of a machine or
-- of all.
CREATE INDEX instances_recent ON {s}.instances (machine, created);
CREATE INDEX instances_created ON {s}.instances (created);
-- What ClaimTimers and NextDue read: when an instance can next be claimed.
CREATE INDEX instances_claimable ON {s}.instances ((greatest(next_due, lease_until))) WHERE next_due IS NOT NULL;
CREATE TABLE {s}.audit (
	machine bytea  NOT NULL,
	handle  bytea  NOT NULL,
	version bigint NOT NULL, -- the instance's version after the entry
	entry   bytea  NOT NULL, -- store.MarshalAuditEntry's JSON
	PRIMARY KEY (machine, handle, version)
);
CREATE TABLE {s}.runs (
	run     text        PRIMARY KEY,
	host    text        NOT NULL,
	started timestamptz NOT NULL DEFAULT now(),
	expires timestamptz NOT NULL -- on the clock of the replica that registered it
);
`,
	// Which instances have a call waiting for an operator's approval
	// (store.Record.Pending): what Waiting lists, rather than every
	// record read (backfilled by backfillWaiting).
	2: `
ALTER TABLE {s}.instances ADD COLUMN waiting boolean NOT NULL DEFAULT false;
CREATE INDEX instances_waiting ON {s}.instances (machine, handle) WHERE waiting;
`,
}

// SchemaVersion is the version of the schema this package makes: the
// last of migrations.
const SchemaVersion = 2

// migrate creates the schema, or brings it to SchemaVersion, in one
// transaction under an advisory lock of the schema's (replicas opening at
// once take turns); a schema of a later version is refused.
func (s *Store) migrate(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("store: %w", unavailable(err))
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("store: %w", unavailable(err))
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	h := fnv.New64a()
	h.Write([]byte("stategate schema " + s.q.schemaName))
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(h.Sum64())); err != nil {
		return fmt.Errorf("store: lock the schema: %w", err)
	}
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)", s.q.schemaName).Scan(&exists); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if !exists && s.mustExist {
		return fmt.Errorf("%w: the schema %s is missing (serve --store makes it)", ErrNoStore, s.q.schema)
	}
	if !exists {
		if _, err := tx.Exec(ctx, "CREATE SCHEMA "+s.q.schema); err != nil {
			return fmt.Errorf("store: create the schema %s: %w", s.q.schema, err)
		}
	}
	// (Checked first: a role that may not create tables in the schema
	// still opens a store made by one that may.)
	var meta *string
	if err := tx.QueryRow(ctx, "SELECT to_regclass($1)::text", s.q.expand("{s}.meta")).Scan(&meta); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if meta == nil && s.mustExist {
		return fmt.Errorf("%w: the schema %s has no store's tables (serve --store makes them)", ErrNoStore, s.q.schema)
	}
	if meta == nil {
		if _, err := tx.Exec(ctx, s.q.expand(`CREATE TABLE {s}.meta (key text PRIMARY KEY, value text NOT NULL)`)); err != nil {
			return fmt.Errorf("store: in the schema %s: %w", s.q.schema, err)
		}
	}
	have := 0
	var v string
	err = tx.QueryRow(ctx, s.q.expand(`SELECT value FROM {s}.meta WHERE key = 'schema'`)).Scan(&v)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return fmt.Errorf("store: %w", err)
	default:
		if have, err = strconv.Atoi(v); err != nil || have < 0 {
			return fmt.Errorf("store: the schema %s records a version %q that is not a number", s.q.schema, v)
		}
	}
	if have > SchemaVersion {
		return fmt.Errorf("%w: the schema %s in PostgreSQL is at version %d, and this stategate knows versions up to %d: upgrade stategate (or use another schema)",
			ErrNewerSchema, s.q.schema, have, SchemaVersion)
	}
	if have == SchemaVersion {
		return tx.Commit(ctx)
	}
	for next := have + 1; next <= SchemaVersion; next++ {
		if _, err := tx.Conn().PgConn().Exec(ctx, s.q.expand(migrations[next])).ReadAll(); err != nil {
			return fmt.Errorf("store: upgrade the schema %s to version %d: %w", s.q.schema, next, err)
		}
		if next == 2 && have > 0 {
			if err := s.backfillWaiting(ctx, tx); err != nil {
				return fmt.Errorf("store: upgrade the schema %s to version %d: %w", s.q.schema, next, err)
			}
		}
	}
	if _, err := tx.Exec(ctx, s.q.expand(`INSERT INTO {s}.meta (key, value) VALUES ('schema', $1)
		ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`), strconv.Itoa(SchemaVersion)); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("store: upgrade the schema %s: %w", s.q.schema, unavailable(err))
	}
	if have > 0 {
		s.log.Info("store: upgraded the schema", "schema", s.q.schemaName, "from", have, "to", SchemaVersion)
	}
	return nil
}

// backfillWaiting sets the waiting column of the instances stored before
// it was kept: those whose record has a pending call (the records that
// name one read, and decoded).
func (s *Store) backfillWaiting(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, s.q.expand(`SELECT machine, handle, record FROM {s}.instances WHERE position('"pending"'::bytea IN record) > 0`))
	if err != nil {
		return err
	}
	var keys [][2][]byte
	var m, h, raw []byte
	if _, err := pgx.ForEachRow(rows, []any{&m, &h, &raw}, func() error {
		rec, err := decodeRecord(raw)
		if err == nil && rec.Pending != nil {
			keys = append(keys, [2][]byte{slices.Clone(m), slices.Clone(h)})
		}
		return nil
	}); err != nil {
		return err
	}
	for _, k := range keys {
		if _, err := tx.Exec(ctx, s.q.expand(`UPDATE {s}.instances SET waiting = true WHERE machine = $1 AND handle = $2`), k[0], k[1]); err != nil {
			return err
		}
	}
	return nil
}

// queries are the store's SQL, in its schema.
type queries struct {
	schemaName string // as given
	schema     string // quoted
	channel    string // of the change feed, quoted for LISTEN
	channelRaw string // for pg_notify

	load, loadIfChanged, list, audit   string
	recent, recentAll, count, countAll string
	create, update, deleteInstance     string
	deleteTrail                        string
	claim, nextDue, waiting            string
	register, live, endRun, release    string
	forgetRuns                         string
}

func (q queries) expand(sql string) string { return strings.ReplaceAll(sql, "{s}", q.schema) }

func newQueries(schema string) queries {
	q := queries{schemaName: schema, schema: pgx.Identifier{schema}.Sanitize(), channelRaw: schema + ".changes"}
	q.channel = pgx.Identifier{q.channelRaw}.Sanitize()
	q.load = q.expand(`SELECT version, record FROM {s}.instances WHERE machine = $1 AND handle = $2`)
	q.loadIfChanged = q.expand(`SELECT version, CASE WHEN version = $3 THEN NULL ELSE record END, intent_version, intent_run, next_due
		FROM {s}.instances WHERE machine = $1 AND handle = $2`)
	q.list = q.expand(`SELECT machine, handle FROM {s}.instances`)
	q.recent = q.expand(`SELECT machine, handle FROM {s}.instances WHERE machine = $1 ORDER BY created DESC LIMIT $2`)
	q.recentAll = q.expand(`SELECT machine, handle FROM {s}.instances ORDER BY created DESC LIMIT $1`)
	q.count = q.expand(`SELECT count(*) FROM {s}.instances WHERE machine = $1`)
	q.countAll = q.expand(`SELECT count(*) FROM {s}.instances`)
	q.audit = q.expand(`SELECT entry FROM (SELECT version, entry FROM {s}.audit WHERE machine = $1 AND handle = $2
		ORDER BY version DESC LIMIT $3) t ORDER BY version`)
	// A save of an instance stored at $3: its record, what is kept
	// beside it, its audit entry (if any: $11) and the trim of its trail
	// to the retention ($12), in one statement; no row when the instance
	// is not at $3 (a conflict). A save clears the lease of a claim.
	q.update = q.expand(`WITH upd AS (
	UPDATE {s}.instances SET version = version + 1, record = $4, updated = $5, next_due = $6, saved_by = $7,
		lease_run = NULL, lease_until = NULL, waiting = $13,
		intent_version = CASE WHEN $8::bigint IS NOT NULL THEN $8::bigint WHEN intent_version = $9::bigint THEN NULL ELSE intent_version END,
		intent_run = CASE WHEN $8::bigint IS NOT NULL THEN $10::bytea WHEN intent_version = $9::bigint THEN NULL ELSE intent_run END
	WHERE machine = $1 AND handle = $2 AND version = $3
	RETURNING version, intent_version, intent_run),
a AS (
	INSERT INTO {s}.audit (machine, handle, version, entry)
	SELECT $1, $2, version, $11::bytea FROM upd WHERE $11::bytea IS NOT NULL
	ON CONFLICT (machine, handle, version) DO UPDATE SET entry = EXCLUDED.entry),
t AS (
	DELETE FROM {s}.audit WHERE machine = $1 AND handle = $2 AND version <= (SELECT version FROM upd) - $12::bigint)
SELECT version, intent_version, intent_run FROM upd`)
	// The first save of an instance; no row when it is stored.
	q.create = q.expand(`WITH ins AS (
	INSERT INTO {s}.instances (machine, handle, version, record, updated, next_due, saved_by, intent_version, intent_run, waiting)
	VALUES ($1, $2, 1, $3, $4, $5, $6, $7, $8, $10)
	ON CONFLICT (machine, handle) DO NOTHING
	RETURNING version, intent_version, intent_run),
a AS (
	INSERT INTO {s}.audit (machine, handle, version, entry)
	SELECT $1, $2, version, $9::bytea FROM ins WHERE $9::bytea IS NOT NULL
	ON CONFLICT (machine, handle, version) DO UPDATE SET entry = EXCLUDED.entry)
SELECT version, intent_version, intent_run FROM ins`)
	// A deletion: the instance first (waiting for a save under way), then,
	// in a statement of its own (that sees what that save wrote), its
	// trail.
	q.deleteInstance = q.expand(`DELETE FROM {s}.instances WHERE machine = $1 AND handle = $2`)
	q.deleteTrail = q.expand(`DELETE FROM {s}.audit WHERE machine = $1 AND handle = $2`)
	// $1 now, $2 the claimer's run, $3 now less the grace, $4 at most,
	// $5 the lease's end.
	q.claim = q.expand(`WITH due AS (
	SELECT machine, handle FROM {s}.instances
	WHERE next_due IS NOT NULL AND greatest(next_due, lease_until) <= $1
		AND (saved_by = $2 OR next_due <= $3)
	ORDER BY greatest(next_due, lease_until)
	LIMIT $4
	FOR UPDATE SKIP LOCKED)
UPDATE {s}.instances i SET lease_run = $2, lease_until = $5
FROM due WHERE i.machine = due.machine AND i.handle = due.handle
RETURNING i.machine, i.handle, i.version, i.next_due`)
	q.nextDue = q.expand(`SELECT greatest(next_due, lease_until) FROM {s}.instances WHERE next_due IS NOT NULL
		ORDER BY greatest(next_due, lease_until) LIMIT 1`)
	q.waiting = q.expand(`SELECT machine, handle FROM {s}.instances WHERE waiting`)
	q.register = q.expand(`INSERT INTO {s}.runs (run, host, expires) VALUES ($1, $2, $3)
		ON CONFLICT (run) DO UPDATE SET expires = EXCLUDED.expires`)
	q.live = q.expand(`SELECT run FROM {s}.runs WHERE expires > $1 ORDER BY run`)
	q.endRun = q.expand(`DELETE FROM {s}.runs WHERE run = $1`)
	q.forgetRuns = q.expand(`DELETE FROM {s}.runs WHERE expires < $1`)
	q.release = q.expand(`UPDATE {s}.instances SET lease_run = NULL, lease_until = NULL
		WHERE machine = $1 AND handle = $2 AND lease_run = $3`)
	return q
}
