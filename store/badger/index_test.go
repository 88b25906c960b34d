package badger

import (
	"context"
	"slices"
	"testing"

	dgbadger "github.com/dgraph-io/badger/v4"

	"github.com/stategate/stategate/store"
)

// indexOf is what Recent says of each machine ("" for all), as
// MACHINE/HANDLE, and what Count says.
func indexOf(t *testing.T, b *Store, machines ...string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	out := map[string][]string{}
	for _, m := range machines {
		keys, err := b.Recent(ctx, m, 100)
		if err != nil {
			t.Fatal(err)
		}
		names := []string{}
		for _, k := range keys {
			names = append(names, k.Machine+"/"+k.Handle)
		}
		n, err := b.Count(ctx, m)
		if err != nil || n != len(names) {
			t.Fatalf("Count(%q) = %d, %v; Recent lists %d", m, n, err, len(names))
		}
		out[m] = names
	}
	return out
}

func sameIndex(t *testing.T, what string, got, want map[string][]string) {
	t.Helper()
	for m, w := range want {
		if !slices.Equal(got[m], w) {
			t.Fatalf("%s: Recent(%q) = %q, want %q", what, m, got[m], w)
		}
	}
}

// TestUpgradeBuildsTheIndex opens a store of format 2 (no index), written
// by stategate at commit 1d0dcde: instances of three machines saved out
// of the order of their records' times, one saved three times, one reset,
// the only instance of "gone" deleted (testdata/store-v2.tar.gz, the
// folder as Close left it). Read-only, Recent and Count read every record
// and change nothing; opened for writing, the index is built once, in the
// order of the records' times (a store of format 2 knows no creations),
// and kept; a save then moves nothing, and a creation is the newest.
func TestUpgradeBuildsTheIndex(t *testing.T) {
	dir := t.TempDir()
	extractStore(t, "testdata/store-v2.tar.gz", dir)
	want := map[string][]string{
		"invoice": {"invoice/INV-5", "invoice/INV-1", "invoice/a\x00evil", "invoice/INV-4", "invoice/INV-2"},
		"ticket":  {"ticket/T-3", "ticket/T-1", "ticket/T-2"},
		"gone":    {},
		"":        {"ticket/T-3", "invoice/INV-5", "ticket/T-1", "invoice/INV-1", "invoice/a\x00evil", "invoice/INV-4", "ticket/T-2", "invoice/INV-2"},
	}
	machines := []string{"invoice", "ticket", "gone", ""}

	before := folderHashes(t, dir)
	r := openTest(t, dir, Options{ReadOnly: true})
	if r.indexed {
		t.Fatal("a store of format 2 opened read-only has an index")
	}
	sameIndex(t, "read-only", indexOf(t, r, machines...), want)
	r.Close()
	sameHashes(t, before, folderHashes(t, dir))

	b := openTest(t, dir, Options{})
	if f := b.format(); f != formatVersion || !b.indexed {
		t.Fatalf("format %q after the upgrade (indexed %v)", f, b.indexed)
	}
	sameIndex(t, "upgraded", indexOf(t, b, machines...), want)
	b.Close()

	// An index left half built (a crash during the upgrade) is built
	// again, whole.
	b = openTest(t, dir, Options{})
	if err := b.db.Update(func(txn *dgbadger.Txn) error {
		if err := txn.Set(formatKey, []byte(formatNoIndex)); err != nil {
			return err
		}
		return txn.Delete(countKey("ticket"))
	}); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b = openTest(t, dir, Options{})
	sameIndex(t, "built again", indexOf(t, b, machines...), want)

	ctx := context.Background()
	k := store.Key{Machine: "invoice", Handle: "INV-2"}
	_, v, err := b.Load(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Save(ctx, k, store.Record{Snapshot: []byte(`{}`)}, v); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Save(ctx, store.Key{Machine: "gone", Handle: "G-2"}, store.Record{Snapshot: []byte(`{}`)}, 0); err != nil {
		t.Fatal(err)
	}
	want["gone"] = []string{"gone/G-2"}
	want[""] = append([]string{"gone/G-2"}, want[""]...)
	sameIndex(t, "saved after the upgrade", indexOf(t, b, machines...), want)
	b.Close()
	b = openTest(t, dir, Options{})
	defer b.Close()
	sameIndex(t, "reopened", indexOf(t, b, machines...), want)
}
