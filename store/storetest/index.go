package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stategate/stategate/store"
)

// wantIndex fails unless Recent and Count say what want does: for each
// machine ("" for every one), the keys' handles (machine/handle for ""),
// the newest first.
func wantIndex(t *testing.T, s store.Store, want map[string][]string) {
	t.Helper()
	ctx := context.Background()
	for machine, handles := range want {
		got, err := s.Recent(ctx, machine, 100)
		if err != nil {
			t.Fatalf("Recent(%q): %v", machine, err)
		}
		var names []string
		for _, k := range got {
			if machine == "" {
				names = append(names, k.Machine+"/"+k.Handle)
			} else {
				if k.Machine != machine {
					t.Fatalf("Recent(%q) lists %q of %q", machine, k.Handle, k.Machine)
				}
				names = append(names, k.Handle)
			}
		}
		if !slices.Equal(names, handles) {
			t.Fatalf("Recent(%q) = %q, want %q", machine, names, handles)
		}
		if n, err := s.Count(ctx, machine); err != nil || n != len(handles) {
			t.Fatalf("Count(%q) = %d, %v; want %d", machine, n, err, len(handles))
		}
		for n := range len(handles) + 1 {
			got, err := s.Recent(ctx, machine, n)
			if err != nil || len(got) != n {
				t.Fatalf("Recent(%q, %d): %d keys, %v", machine, n, len(got), err)
			}
		}
	}
}

// testIndex: Recent lists the stored instances (of a machine, or of all)
// by their creation (their first save), the newest first, and Count
// counts them; later saves (a reset too) do not move an instance, a
// refused save and the deletion of what was never stored change nothing,
// a deletion takes the instance out, and the instance created again is
// the newest; machine ids that are prefixes of one another do not meet;
// the index is kept across a reopen, and a creation after it is the
// newest.
func testIndex(t *testing.T, e Engine) {
	s := open(t, e, 0)
	ctx := context.Background()
	wantIndex(t, s, map[string][]string{"": nil, "a": nil})
	versions := map[store.Key]uint64{}
	save := func(machine, handle string, rec store.Record) {
		t.Helper()
		k := store.Key{Machine: machine, Handle: handle}
		v, err := s.Save(ctx, k, rec, versions[k])
		if err != nil {
			t.Fatalf("save %s/%s: %v", machine, handle, err)
		}
		versions[k] = v
	}
	snap := store.Record{Snapshot: []byte(`{}`), Audit: &store.AuditEntry{Tool: "t"}}
	for _, k := range []string{"a/1", "b/1", "a/2", "ab/1", "a/3", "b/2", "a/1"} {
		m, h, _ := strings.Cut(k, "/")
		save(m, h, snap)
	}
	save("a", "2", store.Record{}) // a reset
	wantIndex(t, s, map[string][]string{
		"a": {"3", "2", "1"}, "b": {"2", "1"}, "ab": {"1"}, "abc": nil,
		"": {"b/2", "a/3", "ab/1", "a/2", "b/1", "a/1"},
	})
	// Refused: a create of what exists, a stale version, a record over
	// the limit.
	if _, err := s.Save(ctx, store.Key{Machine: "a", Handle: "3"}, snap, 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("create of a stored instance: %v", err)
	}
	if _, err := s.Save(ctx, store.Key{Machine: "b", Handle: "1"}, snap, 7); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale save: %v", err)
	}
	if _, err := s.Save(ctx, store.Key{Machine: "c", Handle: "1"}, recordOf(t, store.MaxRecordSize+1, nil), 0); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("save over the limit: %v", err)
	}
	if err := s.Delete(ctx, store.Key{Machine: "a", Handle: "never"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, store.Key{Machine: "b", Handle: "1"}); err != nil {
		t.Fatal(err)
	}
	delete(versions, store.Key{Machine: "b", Handle: "1"})
	want := map[string][]string{
		"a": {"3", "2", "1"}, "b": {"2"}, "ab": {"1"}, "c": nil,
		"": {"b/2", "a/3", "ab/1", "a/2", "a/1"},
	}
	wantIndex(t, s, want)
	if !s.reopen(t) {
		return
	}
	wantIndex(t, s, want)
	save("a", "1", snap)
	save("b", "1", snap) // created again after its deletion
	wantIndex(t, s, map[string][]string{
		"a": {"3", "2", "1"}, "b": {"1", "2"},
		"": {"b/1", "b/2", "a/3", "ab/1", "a/2", "a/1"},
	})
	if err := s.Delete(ctx, store.Key{Machine: "ab", Handle: "1"}); err != nil {
		t.Fatal(err)
	}
	s.reopen(t)
	wantIndex(t, s, map[string][]string{"ab": nil, "": {"b/1", "b/2", "a/3", "a/2", "a/1"}})
}

// testIndexConcurrent: instances created and saved at once are each
// counted once and listed once.
func testIndexConcurrent(t *testing.T, e Engine) {
	s := open(t, e, 0)
	ctx := context.Background()
	const n, saves = 32, 4
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := store.Key{Machine: "m", Handle: fmt.Sprint("h", i)}
			var v uint64
			for range saves {
				var err error
				if v, err = s.Save(ctx, k, store.Record{Snapshot: []byte(`{}`), Audit: &store.AuditEntry{Tool: "t"}}, v); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	keys, err := s.Recent(ctx, "m", 2*n)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k.Handle] {
			t.Fatalf("%s is listed twice", k.Handle)
		}
		seen[k.Handle] = true
	}
	if len(seen) != n {
		t.Fatalf("Recent lists %d instances, want %d", len(seen), n)
	}
	for _, machine := range []string{"m", ""} {
		if c, err := s.Count(ctx, machine); err != nil || c != n {
			t.Fatalf("Count(%q) = %d, %v; want %d", machine, c, err, n)
		}
	}
}
