package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// BenchmarkCommitFloor measures what a durable save cannot go under on
// the tests' cluster: one INSERT committed per op (autocommit), and the
// shape of a batch of one (BEGIN and the transaction's id, an INSERT;
// then a NOTIFY and COMMIT: two round trips). Read BenchmarkSaves beside
// it.
func BenchmarkCommitFloor(b *testing.B) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testDB(b))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS floor (n int)"); err != nil {
		b.Fatal(err)
	}
	b.Run("autocommit", func(b *testing.B) {
		for b.Loop() {
			if _, err := conn.Exec(ctx, "INSERT INTO floor VALUES (1)"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("two-round-trips", func(b *testing.B) {
		for b.Loop() {
			bt := &pgx.Batch{}
			bt.Queue("BEGIN")
			bt.Queue("SELECT pg_current_xact_id()::text")
			bt.Queue("INSERT INTO floor VALUES (1)")
			if err := conn.SendBatch(ctx, bt).Close(); err != nil {
				b.Fatal(err)
			}
			bt = &pgx.Batch{}
			bt.Queue("SELECT pg_notify('floor', 'x')")
			bt.Queue("COMMIT")
			if err := conn.SendBatch(ctx, bt).Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
