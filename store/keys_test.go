package store

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// awkward are handles (and machine ids) whose bytes a naive key format
// would confuse: separators, NUL, prefixes of one another, unicode, long.
var awkward = []string{
	"a", "a\x00", "a\x00evil", "a\x00evil\x00", "\x00", "\x00a", "",
	"a/b", "a/", "i/a", "a\x00\x00", "ab",
	"ünï\u200bcødé", "日本語", "\xff\xfe", strings.Repeat("z", 400), strings.Repeat("z", 401),
}

// TestKeysDoNotMeet saves every pair of awkward machine ids and handles
// with an audit trail of its own, then reads, lists, resets and deletes
// some: no instance ever sees another's record or entries.
func TestKeysDoNotMeet(t *testing.T) { stores(t, testKeysDoNotMeet) }

func testKeysDoNotMeet(t *testing.T, s Store) {
	ctx := context.Background()
	var keys []Key
	for _, m := range []string{"m", "m\x00", "m\x00a", "inv"} {
		for _, h := range awkward {
			keys = append(keys, Key{Machine: m, Handle: h})
		}
	}
	// Instance i is saved i%4+1 times, each with an audit entry naming
	// it.
	name := func(i int) string { return strconv.Itoa(i) }
	saves := func(i int) int { return i%4 + 1 }
	versions := map[Key]uint64{}
	for i, k := range keys {
		var v uint64
		for j := range saves(i) {
			var err error
			v, err = s.Save(ctx, k, Record{Snapshot: []byte(`"` + name(i) + `"`), Audit: &AuditEntry{Tool: name(i), From: j}}, v)
			if err != nil {
				t.Fatalf("save %q/%q: %v", k.Machine, k.Handle, err)
			}
		}
		versions[k] = v
	}
	check := func(skip map[Key]bool) {
		t.Helper()
		listed, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[Key]bool{}
		for _, k := range listed {
			got[k] = true
		}
		for i, k := range keys {
			rec, v, err := s.Load(ctx, k)
			trail, terr := s.Audit(ctx, k, 0)
			if terr != nil {
				t.Fatal(terr)
			}
			if skip[k] {
				if !errors.Is(err, ErrNotFound) || len(trail) != 0 || got[k] {
					t.Fatalf("deleted %q/%q: %v, %d entries, listed %v", k.Machine, k.Handle, err, len(trail), got[k])
				}
				continue
			}
			if !got[k] {
				t.Fatalf("%q/%q is not listed", k.Machine, k.Handle)
			}
			if rec.IsReset() {
				if v != versions[k] || trail[len(trail)-1].Tool != ResetTool {
					t.Fatalf("reset %q/%q: at %d, trail %+v", k.Machine, k.Handle, v, trail)
				}
				trail = trail[:len(trail)-1]
			} else if err != nil || v != versions[k] || string(rec.Snapshot) != `"`+name(i)+`"` {
				t.Fatalf("%q/%q: %s at %d, %v", k.Machine, k.Handle, rec.Snapshot, v, err)
			}
			if len(trail) != saves(i) {
				t.Fatalf("%q/%q: %d audit entries, want %d", k.Machine, k.Handle, len(trail), saves(i))
			}
			for j, e := range trail {
				if e.Tool != name(i) || e.Version != uint64(j+1) {
					t.Fatalf("%q/%q: entry %d is %+v", k.Machine, k.Handle, j, e)
				}
			}
			last, err := s.Audit(ctx, k, 1)
			if err != nil || len(last) != 1 || last[0].Version != versions[k] {
				t.Fatalf("%q/%q: last entry %+v, %v", k.Machine, k.Handle, last, err)
			}
		}
		if len(listed) != len(keys)-len(skip) {
			t.Fatalf("%d listed, want %d", len(listed), len(keys)-len(skip))
		}
	}
	check(nil)
	// Reset "a" and delete "a\x00": their neighbours keep everything.
	for _, m := range []string{"m", "m\x00"} {
		k := Key{Machine: m, Handle: "a"}
		v, err := Reset(ctx, s, k, versions[k], "x", "")
		if err != nil {
			t.Fatal(err)
		}
		versions[k] = v
	}
	gone := map[Key]bool{{Machine: "m", Handle: "a\x00"}: true, {Machine: "m\x00", Handle: ""}: true}
	for k := range gone {
		if err := s.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	check(gone)
	if b, ok := s.(*Badger); ok {
		// And so after reopening.
		dir := b.dir
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := OpenBadger(dir, BadgerOptions{GCInterval: -1, Logger: quietLog()})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		s = r
		check(gone)
	}
}

// TestKeyEncoding: a key reads back as it was written, and no key is a
// prefix of another instance's.
func TestKeyEncoding(t *testing.T) {
	for _, m := range awkward {
		for _, h := range awkward {
			k := Key{Machine: m, Handle: h}
			got, ok := parseInstanceKey(instanceKey(k))
			if !ok || got != k || len(instanceKey(k)) != keyLen(k) {
				t.Fatalf("%q/%q read back as %q/%q (%v)", m, h, got.Machine, got.Handle, ok)
			}
			got, v, ok := parseAuditKey(auditKey(k, 77))
			if !ok || got != k || v != 77 {
				t.Fatalf("audit key of %q/%q read back as %q/%q %d", m, h, got.Machine, got.Handle, v)
			}
			for _, h2 := range awkward {
				if h2 == h {
					continue
				}
				o := Key{Machine: m, Handle: h2}
				if strings.HasPrefix(string(auditKey(o, 1)), string(trailPrefix(k))) {
					t.Fatalf("the trail of %q reaches into %q's", h, h2)
				}
			}
		}
	}
}

// TestFormatIsRecorded: a new store records its key format, so that the
// keys of the earlier format are looked for once.
func TestFormatIsRecorded(t *testing.T) {
	b := openTest(t, t.TempDir(), BadgerOptions{})
	defer b.Close()
	if v, err := b.get(formatKey); err != nil || string(v) != formatVersion {
		t.Fatalf("format %q, %v", v, err)
	}
}
