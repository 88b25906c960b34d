package store

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
)

// stores runs a test on every implementation.
func stores(t *testing.T, f func(t *testing.T, s Store)) {
	t.Run("memory", func(t *testing.T) { f(t, NewMemory()) })
	t.Run("badger", func(t *testing.T) {
		b, err := OpenBadger(t.TempDir(), BadgerOptions{GCInterval: -1, Logger: quietLog()})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		f(t, b)
	})
}

func TestCompareAndSwap(t *testing.T) { stores(t, testCompareAndSwap) }

func testCompareAndSwap(t *testing.T, s Store) {
	ctx := context.Background()
	k := Key{"invoice", "42"}
	if _, _, err := s.Load(ctx, k); !errors.Is(err, ErrNotFound) {
		t.Fatalf("load of a new key: %v", err)
	}
	v1, err := s.Save(ctx, k, Record{Snapshot: []byte(`{"a":1}`)}, 0)
	if err != nil || v1 != 1 {
		t.Fatalf("create: %v, %v", v1, err)
	}
	if _, err := s.Save(ctx, k, Record{Snapshot: []byte(`{}`)}, 0); !errors.Is(err, ErrConflict) {
		t.Fatalf("second create: %v", err)
	}
	v2, err := s.Save(ctx, k, Record{Snapshot: []byte(`{"a":2}`)}, v1)
	if err != nil || v2 != 2 {
		t.Fatalf("update: %v, %v", v2, err)
	}
	if _, err := s.Save(ctx, k, Record{}, v1); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale update: %v", err)
	}
	rec, v, err := s.Load(ctx, k)
	if err != nil || v != 2 || string(rec.Snapshot) != `{"a":2}` {
		t.Fatalf("load: %s %v %v", rec.Snapshot, v, err)
	}
}

func TestConcurrentIncrements(t *testing.T) { stores(t, testConcurrentIncrements) }

func testConcurrentIncrements(t *testing.T, s Store) {
	ctx := context.Background()
	k := Key{"m", "h"}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				rec, v, err := s.Load(ctx, k)
				if err != nil && !errors.Is(err, ErrNotFound) {
					t.Error(err)
					return
				}
				rec.Snapshot = append(rec.Snapshot, 'x')
				if _, err := s.Save(ctx, k, rec, v); err == nil {
					return
				} else if !errors.Is(err, ErrConflict) {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	rec, v, _ := s.Load(ctx, k)
	if len(rec.Snapshot) != 20 || v != 20 {
		t.Fatalf("%d increments kept, version %d", len(rec.Snapshot), v)
	}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestBadgerPersistsAndLocks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b, err := OpenBadger(dir, BadgerOptions{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	k := Key{"invoice", "7"}
	if _, err := b.Save(ctx, k, Record{Snapshot: []byte(`{"value":"review"}`), MachineVersion: "abc"}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenBadger(dir, BadgerOptions{Logger: quietLog()}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, err = OpenBadger(dir, BadgerOptions{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rec, v, err := b.Load(ctx, k)
	if err != nil || v != 1 || string(rec.Snapshot) != `{"value":"review"}` || rec.MachineVersion != "abc" {
		t.Fatalf("after reopening: %s %q %v %v", rec.Snapshot, rec.MachineVersion, v, err)
	}
	keys, err := b.List(ctx)
	if err != nil || len(keys) != 1 || keys[0] != k {
		t.Fatalf("list: %v %v", keys, err)
	}
	if err := b.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Load(ctx, k); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}
