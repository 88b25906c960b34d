package store

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
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
				n, _ := strconv.Atoi(string(rec.Snapshot))
				rec.Snapshot = []byte(strconv.Itoa(n + 1))
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
	if string(rec.Snapshot) != "20" || v != 20 {
		t.Fatalf("%s increments kept, version %d", rec.Snapshot, v)
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

func TestAuditTrail(t *testing.T) { stores(t, testAuditTrail) }

func testAuditTrail(t *testing.T, s Store) {
	ctx := context.Background()
	if m, ok := s.(*Memory); ok {
		m.Retention = 3
	}
	k := Key{"invoice", "9"}
	var v uint64
	for i := range 5 {
		var err error
		v, err = s.Save(ctx, k, Record{Snapshot: []byte(`{}`), Audit: &AuditEntry{Tool: "t" + strconv.Itoa(i)}}, v)
		if err != nil {
			t.Fatal(err)
		}
	}
	trail, err := s.Audit(ctx, k, 2)
	if err != nil || len(trail) != 2 || trail[0].Tool != "t3" || trail[1].Tool != "t4" || trail[1].Version != 5 {
		t.Fatalf("last two: %+v %v", trail, err)
	}
	all, _ := s.Audit(ctx, k, 0)
	if _, isMem := s.(*Memory); isMem && len(all) != 3 {
		t.Fatalf("retention 3 kept %d", len(all))
	}
}

func TestBadgerAuditRetention(t *testing.T) {
	ctx := context.Background()
	b, err := OpenBadger(t.TempDir(), BadgerOptions{GCInterval: -1, AuditRetention: 3, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	k := Key{"m", "h"}
	var v uint64
	for range 10 {
		if v, err = b.Save(ctx, k, Record{Snapshot: []byte(`{}`), Audit: &AuditEntry{Tool: "x"}}, v); err != nil {
			t.Fatal(err)
		}
	}
	all, err := b.Audit(ctx, k, 0)
	if err != nil || len(all) != 3 || all[0].Version != 8 {
		t.Fatalf("kept %+v %v", all, err)
	}
}

func TestDeleteAndList(t *testing.T) { stores(t, testDeleteAndList) }

// testDeleteAndList deletes one of two instances: its record and trail
// go, the other stays, and the deleted one starts again at version 1 with
// a trail of its own.
func testDeleteAndList(t *testing.T, s Store) {
	ctx := context.Background()
	gone, kept := Key{"invoice", "gone"}, Key{"invoice", "kept"}
	for _, k := range []Key{gone, kept} {
		var v uint64
		for i := range 3 {
			var err error
			if v, err = s.Save(ctx, k, Record{Snapshot: []byte(`{}`), Audit: &AuditEntry{Tool: "t" + strconv.Itoa(i)}}, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if keys, err := s.List(ctx); err != nil || len(keys) != 2 {
		t.Fatalf("list: %v %v", keys, err)
	}
	if err := s.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, Key{"invoice", "never"}); err != nil {
		t.Fatalf("delete of an instance never stored: %v", err)
	}
	if _, _, err := s.Load(ctx, gone); !errors.Is(err, ErrNotFound) {
		t.Fatalf("load after delete: %v", err)
	}
	if trail, err := s.Audit(ctx, gone, 0); err != nil || len(trail) != 0 {
		t.Fatalf("trail after delete: %v %v", trail, err)
	}
	if keys, err := s.List(ctx); err != nil || len(keys) != 1 || keys[0] != kept {
		t.Fatalf("list after delete: %v %v", keys, err)
	}
	if trail, err := s.Audit(ctx, kept, 0); err != nil || len(trail) != 3 {
		t.Fatalf("the other trail: %v %v", trail, err)
	}
	v, err := s.Save(ctx, gone, Record{Snapshot: []byte(`{"again":true}`), Audit: &AuditEntry{Tool: "again"}}, 0)
	if err != nil || v != 1 {
		t.Fatalf("save after delete: %v %v", v, err)
	}
	if trail, err := s.Audit(ctx, gone, 0); err != nil || len(trail) != 1 || trail[0].Tool != "again" || trail[0].Version != 1 {
		t.Fatalf("trail after starting again: %+v %v", trail, err)
	}
}
