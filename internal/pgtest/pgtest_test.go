package pgtest_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/stategate/stategate/internal/pgtest"
)

var pg pgtest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	pg.Close()
	os.Exit(code)
}

func count(t *testing.T, url string) (int, error) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n)
	return n, err
}

// TestCluster: a database of its own keeps what was committed across a
// fast stop and a crash; while the server is down, connections fail.
func TestCluster(t *testing.T) {
	c := pg.Cluster(t)
	url := c.NewDatabase(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (n int); INSERT INTO kept VALUES (1), (2)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := count(t, url); err == nil {
		t.Fatal("a connection while the server is stopped")
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if n, err := count(t, url); err != nil || n != 2 {
		t.Fatalf("after a restart: %d rows, %v", n, err)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if n, err := count(t, url); err != nil || n != 2 {
		t.Fatalf("after a crash: %d rows, %v", n, err)
	}
	// Each test's database is its own.
	if _, err := count(t, c.NewDatabase(t)); err == nil {
		t.Fatal("a new database has the table of another")
	}
}
