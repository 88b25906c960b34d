package postgres

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/stategate/stategate/internal/pgtest"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/store/storetest"
)

// pg is the test binary's cluster, started by the first test that needs
// it.
var pg pgtest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	pg.Close()
	os.Exit(code)
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// database is a database of the shared cluster, one per test binary: each
// test takes schemas of its own in it.
var database struct {
	once sync.Once
	url  string
}

// testDB returns the URL of the tests' database (skipping where
// PostgreSQL is not installed).
func testDB(t testing.TB) string {
	t.Helper()
	c := pg.Cluster(t)
	database.once.Do(func() {
		name := "stores"
		if err := c.Exec(context.Background(), "CREATE DATABASE "+name); err != nil {
			t.Fatalf("create database: %v", err)
		}
		database.url = c.URL(name)
	})
	return database.url
}

// newSchema returns a schema name of the test's own, dropped when it
// ends (after the stores opened on it are closed).
func newSchema(t testing.TB) string {
	t.Helper()
	url := testDB(t)
	name := "s_" + strings.ToLower(rand.Text()[:12])
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return // the cluster is down: it goes with the binary
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// openTest opens a store on a schema.
func openTest(t testing.TB, schema string, o Options) *Store {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quietLog()
	}
	o.Schema = schema
	s, err := Open(context.Background(), testDB(t), o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestContract runs the contract suite on PostgreSQL, each store on a
// schema of its own, reopened where the suite asks.
func TestContract(t *testing.T) {
	storetest.Run(t, storetest.Engine{
		Open: func(t *testing.T, retention int) store.Store {
			return openTest(t, newSchema(t), Options{AuditRetention: retention})
		},
		Reopen: func(t *testing.T, st store.Store) store.Store {
			s := st.(*Store)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return openTest(t, s.q.schemaName, Options{AuditRetention: int(s.retention)})
		},
	})
}

// TestShared runs the shared stores' contract on two stores on one
// schema, their feeds cut by ending the backends that LISTEN.
func TestShared(t *testing.T) {
	storetest.RunShared(t, storetest.SharedEngine{
		Open: func(t *testing.T) (a, b store.Shared) {
			schema := newSchema(t)
			return openTest(t, schema, Options{}), openTest(t, schema, Options{})
		},
		CutFeed: func(t *testing.T, a, b store.Shared) {
			s := a.(*Store)
			var n int
			err := s.pool.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE query LIKE 'LISTEN%' AND query LIKE '%' || $1 || '%'`, s.q.channelRaw).Scan(&n)
			if err != nil || n != 2 {
				t.Fatalf("ended %d LISTEN backends, %v", n, err)
			}
		},
	})
}

// TestNoSync: with NoSync, the store's connections commit without
// waiting for the disk.
func TestNoSync(t *testing.T) {
	for _, c := range []struct {
		noSync bool
		want   string
	}{{false, "on"}, {true, "off"}} {
		s := openTest(t, newSchema(t), Options{NoSync: c.noSync})
		var got string
		if err := s.pool.QueryRow(context.Background(), "SHOW synchronous_commit").Scan(&got); err != nil || got != c.want {
			t.Errorf("NoSync %v: synchronous_commit %s, %v", c.noSync, got, err)
		}
		s.Close()
	}
}
