package badger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/store/storetest"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openTest(t testing.TB, dir string, o Options) *Store {
	t.Helper()
	if o.GCInterval == 0 {
		o.GCInterval = -1
	}
	if o.Logger == nil {
		o.Logger = quietLog()
	}
	b, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestContract runs the contract suite on Badger, sized as it runs and
// with tiny tables (so that the suite's saves flush and compact), each
// store reopened where the suite asks.
func TestContract(t *testing.T) {
	for _, small := range []bool{false, true} {
		t.Run(fmt.Sprint("small=", small), func(t *testing.T) {
			storetest.Run(t, storetest.Engine{
				Open: func(t *testing.T, retention int) store.Store {
					return openTest(t, t.TempDir(), Options{AuditRetention: retention, SmallTables: small})
				},
				Reopen: func(t *testing.T, s store.Store) store.Store {
					b := s.(*Store)
					if err := b.Close(); err != nil {
						t.Fatal(err)
					}
					return openTest(t, b.dir, Options{AuditRetention: int(b.retention), SmallTables: small})
				},
			})
		})
	}
}

func TestPersistsAndLocks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b, err := Open(dir, Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	k := store.Key{Machine: "invoice", Handle: "7"}
	if _, err := b.Save(ctx, k, store.Record{Snapshot: []byte(`{"value":"review"}`), MachineVersion: "abc"}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{Logger: quietLog()}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, err = Open(dir, Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rec, v, err := b.Load(ctx, k)
	if err != nil || v != 1 || string(rec.Snapshot) != `{"value":"review"}` || rec.MachineVersion != "abc" {
		t.Fatalf("after reopening: %s %q %v %v", rec.Snapshot, rec.MachineVersion, v, err)
	}
}
