package store

import (
	"context"
	"errors"
	"sync"
	"testing"
)

func TestMemoryCompareAndSwap(t *testing.T) {
	ctx := context.Background()
	s := NewMemory()
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

func TestMemoryConcurrentIncrements(t *testing.T) {
	ctx := context.Background()
	s := NewMemory()
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
