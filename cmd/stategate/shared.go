package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/store/postgres"
)

// The store shared by replicas: --store names a PostgreSQL database
// (store/postgres) in place of --data's Badger folder, for serve (several
// replicas on one database), state and graph (which then run while
// servers do). The connection string is never logged nor shown: it may
// hold a password; what it names is (postgres.Describe).

// storeHelp is the help of --store.
const storeHelp = "A PostgreSQL database several servers (replicas) share, in place of --data's folder: a URL (postgres://USER@HOST:PORT/DATABASE?sslmode=..., or postgresql://...) or key=value pairs; give its password by PGPASSWORD or ~/.pgpass rather than in the URL. See docs/replicas.md."

// openPostgres opens the PostgreSQL store a --store flag names, with an
// error that says what is wrong: a string that is not a connection
// string, a database that cannot be reached, a schema made by a later
// stategate. where names the database for logs.
func openPostgres(ctx context.Context, conn string, o postgres.Options) (st *postgres.Store, where string, err error) {
	if where, err = postgres.Describe(conn); err != nil {
		return nil, "", fmt.Errorf("--store: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err = postgres.Open(ctx, conn, o)
	switch {
	case errors.Is(err, postgres.ErrNewerSchema), errors.Is(err, postgres.ErrNoStore):
		return nil, "", fmt.Errorf("--store (%s): %w", where, err)
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return nil, "", fmt.Errorf("--store: cannot connect to PostgreSQL (%s): %w", where, err)
	case err != nil:
		return nil, "", fmt.Errorf("--store (%s): %w", where, err)
	}
	return st, where, nil
}

// openFor opens the store of an operator command: the PostgreSQL database
// of --store (never making a store there), else the Badger folder of
// --data (read-only unless write).
func openFor(data, conn string, write bool) (store.Store, error) {
	if conn == "" {
		return openStore(data, write)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, _, err := openPostgres(context.Background(), conn, postgres.Options{Logger: log, MustExist: true})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// liveRuns returns the runs of the servers alive on a shared store (nil
// for another store, whose servers are stopped while a command holds it).
func liveRuns(ctx context.Context, st store.Store) map[string]bool {
	sh, ok := st.(store.Shared)
	if !ok {
		return nil
	}
	runs, err := sh.Live(ctx, time.Now())
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, r := range runs {
		out[r] = true
	}
	return out
}

// openServeStore opens serve's PostgreSQL store (--store).
func (c *serveCmd) openServeStore(log *slog.Logger) (store.Store, string, error) {
	if c.Memory {
		return nil, "", errors.New("--memory and --store cannot be combined (--memory keeps nothing)")
	}
	st, where, err := openPostgres(context.Background(), c.Store, postgres.Options{NoSync: c.NoSync, AuditRetention: c.AuditKeep, Logger: log})
	if err != nil {
		return nil, "", err
	}
	log.Info("store: PostgreSQL", "database", where, "run", st.Run())
	return st, where, nil
}
