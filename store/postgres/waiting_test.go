package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stategate/stategate/store"
)

// TestWaiting: the instances with a call waiting for approval are those
// whose last save has one, listed without reading a record; a schema of
// version 1 gets them from its records as it is upgraded.
func TestWaiting(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, newSchema(t), Options{})
	defer s.Close()
	p := &store.Pending{ID: "p1", Tool: "pay", Time: time.Now()}
	keys := []store.Key{{Machine: "m", Handle: "a"}, {Machine: "m", Handle: "b\x00"}, {Machine: "n", Handle: "c"}}
	for i, k := range keys {
		rec := store.Record{Snapshot: []byte(`{"value":"x"}`)}
		if i != 1 {
			rec.Pending = p
		}
		if _, err := s.Save(ctx, k, rec, 0); err != nil {
			t.Fatal(err)
		}
	}
	sorted := func(ks []store.Key) []store.Key {
		slices.SortFunc(ks, compareKeys)
		return ks
	}
	got, err := s.Waiting(ctx)
	if err != nil || !slices.Equal(sorted(got), []store.Key{keys[0], keys[2]}) {
		t.Fatalf("waiting: %q %v", got, err)
	}
	if _, err := s.Save(ctx, keys[0], store.Record{Snapshot: []byte(`{"value":"y"}`)}, 1); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Waiting(ctx); err != nil || !slices.Equal(got, []store.Key{keys[2]}) {
		t.Fatalf("waiting after a settled: %q %v", got, err)
	}

	// A schema made by a stategate that kept no such column.
	schema := newSchema(t)
	conn, err := pgx.Connect(ctx, testDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	q := newQueries(schema)
	for _, sql := range []string{"CREATE SCHEMA " + q.schema, q.expand(`CREATE TABLE {s}.meta (key text PRIMARY KEY, value text NOT NULL)`),
		q.expand(migrations[1]), q.expand(`INSERT INTO {s}.meta VALUES ('schema', '1')`)} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for i, k := range keys {
		rec := store.Record{Snapshot: []byte(`{"value":"pending"}`)} // the word, not a call
		if i == 1 {
			rec.Pending = p
		}
		raw, err := store.AppendRecord(nil, rec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, q.expand(`INSERT INTO {s}.instances (machine, handle, version, record, updated, saved_by) VALUES ($1, $2, 1, $3, now(), 'old')`),
			[]byte(k.Machine), []byte(k.Handle), raw); err != nil {
			t.Fatal(err)
		}
	}
	up := openTest(t, schema, Options{})
	defer up.Close()
	if got, err := up.Waiting(ctx); err != nil || !slices.Equal(got, []store.Key{keys[1]}) {
		t.Fatalf("waiting after the upgrade: %q %v", got, err)
	}
}

// TestDescribe: what a connection string names, never its password; one
// that does not parse is not quoted.
func TestDescribe(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://app:s3cret@db.example:6432/gate?sslmode=require", "postgres user=app host=db.example port=6432 database=gate"},
		{"postgresql://app@/gate?host=/run/pg", "postgres user=app host=socket /run/pg port=5432 database=gate"},
		{"host=db user=app password=s3cret dbname=gate", "postgres user=app host=db port=5432 database=gate"},
	} {
		got, err := Describe(c.in)
		if err != nil || got != c.want {
			t.Errorf("Describe(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"postgres://app:s3cret@db:port/gate", "host=db password=s3cret port=x"} {
		_, err := Describe(bad)
		if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "does not parse") {
			t.Errorf("Describe(%q): %v", bad, err)
		}
	}
}

// TestMustExist: a store opened with MustExist is not made: a schema
// missing, or without the store's tables, is ErrNoStore, and nothing is
// created; one made is opened.
func TestMustExist(t *testing.T) {
	ctx := context.Background()
	schema := newSchema(t)
	if _, err := Open(ctx, testDB(t), Options{Schema: schema, MustExist: true, Logger: quietLog()}); !errors.Is(err, ErrNoStore) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("a missing schema: %v", err)
	}
	conn, err := pgx.Connect(ctx, testDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the schema was made: %d %v", n, err)
	}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, testDB(t), Options{Schema: schema, MustExist: true, Logger: quietLog()}); !errors.Is(err, ErrNoStore) || !strings.Contains(err.Error(), "tables") {
		t.Fatalf("a schema without the tables: %v", err)
	}
	openTest(t, schema, Options{}).Close()
	s := openTest(t, schema, Options{MustExist: true})
	s.Close()
}
