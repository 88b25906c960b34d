// Package storetest is the contract every store engine passes: the
// behaviour the gate relies on (compare-and-swap on versions, concurrent
// saves, the audit trail and its retention, deletion and listing, keys of
// any bytes that never meet, the reset record, the index of the instances
// by their last save and their count per machine) and the limits every
// engine enforces alike (a key, record or audit entry over them refused
// with store.ErrTooLarge, nothing written). An engine's tests call Run
// with a way to open it; the suite is the same for every engine. It
// knows nothing of any engine but through store.Store.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stategate/stategate/store"
)

// Engine is a store engine under test.
type Engine struct {
	// Open returns a new, empty store that keeps retention audit entries
	// per instance (store.DefaultAuditRetention when zero). The suite
	// closes it.
	Open func(t *testing.T, retention int) store.Store
	// Reopen, for an engine that keeps what it stores, closes s (which
	// Open or Reopen returned) and opens what it holds again, with the
	// same options. Nil for an engine that forgets (Memory): the suite
	// then checks nothing across a reopen.
	Reopen func(t *testing.T, s store.Store) store.Store
}

// Run runs the contract suite on an engine, each test in a subtest of
// its own on a store of its own. Under -short it leaves out the saves
// of records and audit entries at the size limit (4 MiB each).
func Run(t *testing.T, e Engine) {
	if e.Open == nil {
		t.Fatal("storetest: Engine.Open is nil")
	}
	for _, c := range []struct {
		name string
		test func(t *testing.T, e Engine)
	}{
		{"CompareAndSwap", testCompareAndSwap},
		{"RoundTrip", testRoundTrip},
		{"ConcurrentIncrements", testConcurrentIncrements},
		{"AuditTrail", testAuditTrail},
		{"AuditRetention", testAuditRetention},
		{"DeleteAndList", testDeleteAndList},
		{"KeysDoNotMeet", testKeysDoNotMeet},
		{"ResetRecord", testResetRecord},
		{"CancelledContext", testCancelledContext},
		{"KeyLimit", testKeyLimit},
		{"RecordLimit", testRecordLimit},
		{"AuditEntryLimit", testAuditEntryLimit},
		{"Index", testIndex},
		{"IndexConcurrent", testIndexConcurrent},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, e) })
	}
}

// handle is a store under test, closed when its test ends.
type handle struct {
	store.Store
	e Engine
}

func open(t *testing.T, e Engine, retention int) *handle {
	t.Helper()
	h := &handle{Store: e.Open(t, retention), e: e}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return h
}

// reopen closes the store and opens it again; false for an engine that
// cannot.
func (h *handle) reopen(t *testing.T) bool {
	t.Helper()
	if h.e.Reopen == nil {
		return false
	}
	h.Store = h.e.Reopen(t, h.Store)
	return true
}

func testCompareAndSwap(t *testing.T, e Engine) {
	s := open(t, e, 0)
	ctx := context.Background()
	k := store.Key{Machine: "invoice", Handle: "42"}
	if _, _, err := s.Load(ctx, k); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("load of a new key: %v", err)
	}
	v1, err := s.Save(ctx, k, store.Record{Snapshot: []byte(`{"a":1}`)}, 0)
	if err != nil || v1 != 1 {
		t.Fatalf("create: %v, %v", v1, err)
	}
	if _, err := s.Save(ctx, k, store.Record{Snapshot: []byte(`{}`)}, 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second create: %v", err)
	}
	v2, err := s.Save(ctx, k, store.Record{Snapshot: []byte(`{"a":2}`)}, v1)
	if err != nil || v2 != 2 {
		t.Fatalf("update: %v, %v", v2, err)
	}
	if _, err := s.Save(ctx, k, store.Record{}, v1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale update: %v", err)
	}
	if _, err := s.Save(ctx, k, store.Record{}, v2+1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("update at a version never stored: %v", err)
	}
	rec, v, err := s.Load(ctx, k)
	if err != nil || v != 2 || string(rec.Snapshot) != `{"a":2}` {
		t.Fatalf("load: %s %v %v", rec.Snapshot, v, err)
	}
}

// testRoundTrip: a record loads back as it was saved (its snapshot,
// machine version, time and timers), whatever the caller does with its
// buffers after the save; a save with no time gets the time of the save.
func testRoundTrip(t *testing.T, e Engine) {
	s := open(t, e, 0)
	ctx := context.Background()
	k := store.Key{Machine: "invoice", Handle: "7"}
	when := time.Date(2026, 11, 29, 23, 45, 1, 123456789, time.UTC)
	due := when.Add(time.Hour)
	snap := []byte(`{"status":"active","value":"review","context":{"n":[1,2]}}`)
	rec := store.Record{Snapshot: snap, MachineVersion: "84ba43f72e65c37e", Updated: when, Timers: []store.Timer{
		{ID: "t1", Event: map[string]any{"type": "xstate.after.1000.m.s"}, Due: due},
		{ID: "t2", Event: map[string]any{"type": "PING"}, Due: due, Path: []string{"child"}, To: "/"},
	}, Pending: &store.Pending{ID: "p1", Tool: "invoice_pay", Event: map[string]any{"type": "PAY", "amount": 120.0},
		Principal: store.Principal{Sub: "agent", Roles: []string{"clerk"}, Auth: "jwt"}, Roles: []string{"finance"}, Confirm: "Pay 120?", Time: when}}
	if _, err := s.Save(ctx, k, rec, 0); err != nil {
		t.Fatal(err)
	}
	copy(snap, `{"XXXXXX"`) // the caller's buffer, reused
	check := func() {
		t.Helper()
		got, v, err := s.Load(ctx, k)
		if err != nil || v != 1 {
			t.Fatalf("load: %v at %d", err, v)
		}
		if string(got.Snapshot) != `{"status":"active","value":"review","context":{"n":[1,2]}}` || got.MachineVersion != rec.MachineVersion || !got.Updated.Equal(when) {
			t.Fatalf("loaded %s %q %v", got.Snapshot, got.MachineVersion, got.Updated)
		}
		if len(got.Timers) != 2 {
			t.Fatalf("timers: %+v", got.Timers)
		}
		for i, tm := range got.Timers {
			want := rec.Timers[i]
			if !tm.Same(want) || tm.To != want.To || !tm.Due.Equal(want.Due) || tm.Event["type"] != want.Event["type"] {
				t.Fatalf("timer %d: %+v, want %+v", i, tm, want)
			}
		}
		if p := got.Pending; p == nil || p.ID != "p1" || p.Tool != "invoice_pay" || p.Event["amount"] != 120.0 || p.Principal.Sub != "agent" ||
			len(p.Roles) != 1 || p.Roles[0] != "finance" || p.Confirm != "Pay 120?" || !p.Time.Equal(when) {
			t.Fatalf("pending: %+v", got.Pending)
		}
		if got.Audit != nil {
			t.Fatalf("a loaded record has an audit entry: %+v", got.Audit)
		}
	}
	check()
	if s.reopen(t) {
		check()
	}
	before := time.Now()
	k2 := store.Key{Machine: "invoice", Handle: "8"}
	if _, err := s.Save(ctx, k2, store.Record{Snapshot: []byte(`{}`)}, 0); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.Load(ctx, k2)
	if err != nil || got.Updated.Before(before.Truncate(time.Second)) || got.Updated.After(time.Now()) {
		t.Fatalf("a save with no time: stored at %v (saved after %v), %v", got.Updated, before, err)
	}
}

func testConcurrentIncrements(t *testing.T, e Engine) {
	s := open(t, e, 0)
	ctx := context.Background()
	k := store.Key{Machine: "m", Handle: "h"}
	const n = 20
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				rec, v, err := s.Load(ctx, k)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					t.Error(err)
					return
				}
				c, _ := strconv.Atoi(string(rec.Snapshot))
				rec.Snapshot = []byte(strconv.Itoa(c + 1))
				if _, err := s.Save(ctx, k, rec, v); err == nil {
					return
				} else if !errors.Is(err, store.ErrConflict) {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	rec, v, err := s.Load(ctx, k)
	if err != nil || string(rec.Snapshot) != strconv.Itoa(n) || v != n {
		t.Fatalf("%s increments kept, version %d, %v", rec.Snapshot, v, err)
	}
}

// testAuditTrail: each save's audit entry is kept at the version the save
// made, with what it said, oldest first; Audit returns the last n.
func testAuditTrail(t *testing.T, e Engine) {
	s := open(t, e, 0)
	ctx := context.Background()
	k := store.Key{Machine: "invoice", Handle: "9"}
	when := time.Date(2026, 11, 29, 23, 45, 1, 5, time.UTC)
	entry := func(i int) *store.AuditEntry {
		a := &store.AuditEntry{
			Time: when.Add(time.Duration(i) * time.Second), Machine: k.Machine, MachineVersion: "mv", Handle: k.Handle,
			Session: "s" + strconv.Itoa(i), Tool: "t" + strconv.Itoa(i), Event: map[string]any{"type": "E" + strconv.Itoa(i)},
			From: "s" + strconv.Itoa(i), To: "s" + strconv.Itoa(i+1), Protocol: "2025-06-18",
			Version: 999, // the store sets it
		}
		switch i {
		case 2:
			a.Intent = &store.Intent{Arguments: map[string]any{"x": "y"}, Event: "DONE", Run: "run1"}
		case 3:
			a.Settles, a.Note = 3, "done"
			a.Migrated = &store.Migration{From: "a", To: "b", FromVersion: "v1", ToVersion: "v2"}
		}
		return a
	}
	var v uint64
	for i := range 5 {
		var err error
		if v, err = s.Save(ctx, k, store.Record{Snapshot: []byte(`{}`), Audit: entry(i)}, v); err != nil {
			t.Fatal(err)
		}
	}
	// A save with no audit entry adds none.
	if v, _ = s.Save(ctx, k, store.Record{Snapshot: []byte(`{}`)}, v); v != 6 {
		t.Fatalf("version %d", v)
	}
	check := func() {
		t.Helper()
		all, err := s.Audit(ctx, k, 0)
		if err != nil || len(all) != 5 {
			t.Fatalf("trail: %d entries, %v", len(all), err)
		}
		for i, a := range all {
			want := entry(i)
			if a.Version != uint64(i+1) || a.Tool != want.Tool || a.Session != want.Session || !a.Time.Equal(want.Time) ||
				a.From != want.From || a.To != want.To || a.Event["type"] != want.Event["type"] || a.Machine != k.Machine ||
				a.Handle != k.Handle || a.MachineVersion != "mv" || a.Protocol != want.Protocol || a.Note != want.Note || a.Settles != want.Settles {
				t.Fatalf("entry %d: %+v, want %+v at version %d", i, a, want, i+1)
			}
			if (a.Intent == nil) != (want.Intent == nil) || a.Intent != nil && (a.Intent.Event != "DONE" || a.Intent.Run != "run1" || a.Intent.Arguments["x"] != "y") {
				t.Fatalf("entry %d's intent: %+v", i, a.Intent)
			}
			if (a.Migrated == nil) != (want.Migrated == nil) || a.Migrated != nil && *a.Migrated != *want.Migrated {
				t.Fatalf("entry %d's migration: %+v", i, a.Migrated)
			}
		}
		if u := store.Unsettled(all); len(u) != 0 {
			t.Fatalf("unsettled: %+v", u)
		}
		last, err := s.Audit(ctx, k, 2)
		if err != nil || len(last) != 2 || last[0].Tool != "t3" || last[1].Tool != "t4" || last[1].Version != 5 {
			t.Fatalf("last two: %+v %v", last, err)
		}
		if more, err := s.Audit(ctx, k, 50); err != nil || len(more) != 5 {
			t.Fatalf("last 50: %d entries, %v", len(more), err)
		}
		if none, err := s.Audit(ctx, store.Key{Machine: "invoice", Handle: "never"}, 0); err != nil || len(none) != 0 {
			t.Fatalf("trail of an instance never stored: %+v %v", none, err)
		}
	}
	check()
	if s.reopen(t) {
		check()
	}
}

// testAuditRetention: a store keeps the last entries of each trail, as
// many as its retention.
func testAuditRetention(t *testing.T, e Engine) {
	s := open(t, e, 3)
	ctx := context.Background()
	k, other := store.Key{Machine: "m", Handle: "h"}, store.Key{Machine: "m", Handle: "other"}
	var v, ov uint64
	for i := range 10 {
		var err error
		if v, err = s.Save(ctx, k, store.Record{Snapshot: []byte(`{}`), Audit: &store.AuditEntry{Tool: "t" + strconv.Itoa(i)}}, v); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			if ov, err = s.Save(ctx, other, store.Record{Snapshot: []byte(`{}`), Audit: &store.AuditEntry{Tool: "o"}}, ov); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func() {
		t.Helper()
		for _, n := range []int{0, 3, 5} {
			all, err := s.Audit(ctx, k, n)
			if err != nil || len(all) != 3 || all[0].Version != 8 || all[2].Version != 10 || all[2].Tool != "t9" {
				t.Fatalf("Audit(%d) kept %+v, %v", n, all, err)
			}
		}
		if last, err := s.Audit(ctx, k, 2); err != nil || len(last) != 2 || last[0].Version != 9 {
			t.Fatalf("last two: %+v %v", last, err)
		}
		if o, err := s.Audit(ctx, other, 0); err != nil || len(o) != 2 {
			t.Fatalf("another instance's trail: %+v %v", o, err)
		}
	}
	check()
	if s.reopen(t) {
		check()
	}
}

// testDeleteAndList deletes one of two instances: its record and trail
// go, the other stays, and the deleted one starts again at version 1 with
// a trail of its own.
func testDeleteAndList(t *testing.T, e Engine) {
	s := open(t, e, 0)
	ctx := context.Background()
	if keys, err := s.List(ctx); err != nil || len(keys) != 0 {
		t.Fatalf("list of an empty store: %v %v", keys, err)
	}
	gone, kept := store.Key{Machine: "invoice", Handle: "gone"}, store.Key{Machine: "invoice", Handle: "kept"}
	for _, k := range []store.Key{gone, kept} {
		var v uint64
		for i := range 3 {
			var err error
			if v, err = s.Save(ctx, k, store.Record{Snapshot: []byte(`{}`), Audit: &store.AuditEntry{Tool: "t" + strconv.Itoa(i)}}, v); err != nil {
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
	if err := s.Delete(ctx, store.Key{Machine: "invoice", Handle: "never"}); err != nil {
		t.Fatalf("delete of an instance never stored: %v", err)
	}
	check := func() {
		t.Helper()
		if _, _, err := s.Load(ctx, gone); !errors.Is(err, store.ErrNotFound) {
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
	}
	check()
	if s.reopen(t) {
		check()
	}
	v, err := s.Save(ctx, gone, store.Record{Snapshot: []byte(`{"again":true}`), Audit: &store.AuditEntry{Tool: "again"}}, 0)
	if err != nil || v != 1 {
		t.Fatalf("save after delete: %v %v", v, err)
	}
	if trail, err := s.Audit(ctx, gone, 0); err != nil || len(trail) != 1 || trail[0].Tool != "again" || trail[0].Version != 1 {
		t.Fatalf("trail after starting again: %+v %v", trail, err)
	}
}

// Awkward are machine ids and handles whose bytes a naive key encoding
// would confuse: separators, NUL, prefixes of one another, invalid UTF-8,
// unicode, long.
var Awkward = []string{
	"a", "a\x00", "a\x00evil", "a\x00evil\x00", "\x00", "\x00a", "",
	"a/b", "a/", "i/a", "a\x00\x00", "ab",
	"ünï\u200bcødé", "日本語", "\xff\xfe", "\xc3", strings.Repeat("z", 400), strings.Repeat("z", 401),
}

// testKeysDoNotMeet saves every pair of awkward machine ids and handles
// with an audit trail of its own, then reads, lists, resets and deletes
// some: no instance ever sees another's record or entries.
func testKeysDoNotMeet(t *testing.T, e Engine) {
	s := open(t, e, 0)
	ctx := context.Background()
	var keys []store.Key
	for _, m := range []string{"m", "m\x00", "m\x00a", "inv", "\xff"} {
		for _, h := range Awkward {
			keys = append(keys, store.Key{Machine: m, Handle: h})
		}
	}
	// Instance i is saved i%4+1 times, each with an audit entry naming
	// it.
	name := func(i int) string { return strconv.Itoa(i) }
	saves := func(i int) int { return i%4 + 1 }
	versions := map[store.Key]uint64{}
	for i, k := range keys {
		var v uint64
		for j := range saves(i) {
			var err error
			v, err = s.Save(ctx, k, store.Record{Snapshot: []byte(`"` + name(i) + `"`), Audit: &store.AuditEntry{Tool: name(i), From: j}}, v)
			if err != nil {
				t.Fatalf("save %q/%q: %v", k.Machine, k.Handle, err)
			}
		}
		versions[k] = v
	}
	check := func(skip map[store.Key]bool) {
		t.Helper()
		listed, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[store.Key]bool{}
		for _, k := range listed {
			if got[k] {
				t.Fatalf("%q/%q is listed twice", k.Machine, k.Handle)
			}
			got[k] = true
		}
		for i, k := range keys {
			rec, v, err := s.Load(ctx, k)
			trail, terr := s.Audit(ctx, k, 0)
			if terr != nil {
				t.Fatal(terr)
			}
			if skip[k] {
				if !errors.Is(err, store.ErrNotFound) || len(trail) != 0 || got[k] {
					t.Fatalf("deleted %q/%q: %v, %d entries, listed %v", k.Machine, k.Handle, err, len(trail), got[k])
				}
				continue
			}
			if !got[k] {
				t.Fatalf("%q/%q is not listed", k.Machine, k.Handle)
			}
			if err != nil || v != versions[k] {
				t.Fatalf("%q/%q: at %d, %v", k.Machine, k.Handle, v, err)
			}
			if rec.IsReset() {
				if trail[len(trail)-1].Tool != store.ResetTool {
					t.Fatalf("reset %q/%q: trail %+v", k.Machine, k.Handle, trail)
				}
				trail = trail[:len(trail)-1]
			} else if string(rec.Snapshot) != `"`+name(i)+`"` {
				t.Fatalf("%q/%q: %s at %d", k.Machine, k.Handle, rec.Snapshot, v)
			}
			if len(trail) != saves(i) {
				t.Fatalf("%q/%q: %d audit entries, want %d", k.Machine, k.Handle, len(trail), saves(i))
			}
			for j, a := range trail {
				if a.Tool != name(i) || a.Version != uint64(j+1) {
					t.Fatalf("%q/%q: entry %d is %+v", k.Machine, k.Handle, j, a)
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
		k := store.Key{Machine: m, Handle: "a"}
		v, err := store.Reset(ctx, s, k, versions[k], "x", nil, "")
		if err != nil {
			t.Fatal(err)
		}
		versions[k] = v
	}
	gone := map[store.Key]bool{{Machine: "m", Handle: "a\x00"}: true, {Machine: "m\x00", Handle: ""}: true, {Machine: "\xff", Handle: "\xff\xfe"}: true}
	for k := range gone {
		if err := s.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	check(gone)
	if s.reopen(t) {
		check(gone)
	}
}

// testResetRecord: a reset is a record with no snapshot at the next
// version, with its audit entry, keeping the instance's input; the
// instance is then saved on from it.
func testResetRecord(t *testing.T, e Engine) {
	s := open(t, e, 0)
	ctx := context.Background()
	k := store.Key{Machine: "invoice", Handle: "1"}
	input := json.RawMessage(`{"customer":"ACME","lines":[1,2]}`)
	v, err := s.Save(ctx, k, store.Record{Snapshot: []byte(`{"value":"paid"}`), Input: json.RawMessage(`{ "customer": "ACME", "lines": [1, 2] }`), Audit: &store.AuditEntry{Tool: "pay", To: "paid"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rec, _, err := s.Load(ctx, k); err != nil || string(rec.Input) != string(input) {
		t.Fatalf("the input stored: %s %v, want %s (compact)", rec.Input, err, input)
	}
	if _, err := store.Reset(ctx, s, k, v+1, "paid", input, ""); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("reset at a stale version: %v", err)
	}
	if v, err = store.Reset(ctx, s, k, v, "paid", input, ""); err != nil || v != 2 {
		t.Fatalf("reset: %d %v", v, err)
	}
	check := func() {
		t.Helper()
		rec, got, err := s.Load(ctx, k)
		if err != nil || !rec.IsReset() || got != 2 || rec.Updated.IsZero() || string(rec.Input) != string(input) {
			t.Fatalf("after the reset: %+v at %d, %v", rec, got, err)
		}
		if keys, err := s.List(ctx); err != nil || len(keys) != 1 || keys[0] != k {
			t.Fatalf("a reset instance is listed: %v %v", keys, err)
		}
	}
	check()
	if s.reopen(t) {
		check()
	}
	if v, err = s.Save(ctx, k, store.Record{Snapshot: []byte(`{"value":"draft"}`), Audit: &store.AuditEntry{Tool: "add"}}, v); err != nil || v != 3 {
		t.Fatalf("save after the reset: %d %v", v, err)
	}
	trail, err := s.Audit(ctx, k, 0)
	if err != nil || len(trail) != 3 {
		t.Fatalf("trail: %+v %v", trail, err)
	}
	if r := trail[1]; r.Tool != store.ResetTool || r.From != "paid" || r.Version != 2 || r.Note != "reset by an operator" || r.Machine != "invoice" || r.Handle != "1" {
		t.Fatalf("reset entry: %+v", r)
	}
}

// testCancelledContext: a save under a cancelled context writes nothing.
func testCancelledContext(t *testing.T, e Engine) {
	s := open(t, e, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	k := store.Key{Machine: "m", Handle: "h"}
	if _, err := s.Save(ctx, k, store.Record{Snapshot: []byte(`{}`), Audit: &store.AuditEntry{Tool: "t"}}, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("save: %v", err)
	}
	if _, _, err := s.Load(context.Background(), k); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after a cancelled save: %v", err)
	}
}

// nothingWritten fails unless k is as saved at version (0: not stored)
// with a trail of entries audit entries.
func nothingWritten(t *testing.T, s store.Store, k store.Key, version uint64, entries int) {
	t.Helper()
	ctx := context.Background()
	_, v, err := s.Load(ctx, k)
	if version == 0 && !errors.Is(err, store.ErrNotFound) || version != 0 && (err != nil || v != version) {
		t.Fatalf("%d-byte handle after a refused save: at %d, %v; want %d", len(k.Handle), v, err, version)
	}
	if trail, err := s.Audit(ctx, k, 0); err != nil || len(trail) != entries {
		t.Fatalf("%d-byte handle after a refused save: %d audit entries, %v; want %d", len(k.Handle), len(trail), err, entries)
	}
}

// tooLarge fails unless err is ErrTooLarge with a short message that does
// not hold the bytes it refuses.
func tooLarge(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrTooLarge) || strings.Contains(err.Error(), "xxxx") || len(err.Error()) > 200 {
		t.Fatalf("%s: %v, want ErrTooLarge with a short message", what, err)
	}
}

// testKeyLimit: a key of store.MaxKeySize (as store.KeySize counts it) is
// stored; a byte more is refused by every method, nothing written.
func testKeyLimit(t *testing.T, e Engine) {
	s := open(t, e, 0)
	ctx := context.Background()
	for _, machine := range []string{"m", strings.Repeat("M", 300)} {
		// A handle that makes the key exactly MaxKeySize long.
		n := store.MaxKeySize
		for store.KeySize(store.Key{Machine: machine, Handle: strings.Repeat("x", n)}) > store.MaxKeySize {
			n--
		}
		at := store.Key{Machine: machine, Handle: strings.Repeat("x", n)}
		if store.KeySize(at) != store.MaxKeySize {
			t.Fatalf("no key of %d bytes: %d", store.MaxKeySize, store.KeySize(at))
		}
		if _, err := s.Save(ctx, at, store.Record{Snapshot: []byte(`{}`), Audit: &store.AuditEntry{Tool: "t"}}, 0); err != nil {
			t.Fatalf("save at the key limit: %v", err)
		}
		over := store.Key{Machine: machine, Handle: at.Handle + "x"}
		_, err := s.Save(ctx, over, store.Record{Snapshot: []byte(`{}`), Audit: &store.AuditEntry{Tool: "t"}}, 0)
		tooLarge(t, "save of a key one byte over", err)
		_, _, err = s.Load(ctx, over)
		tooLarge(t, "load of a key one byte over", err)
		_, err = s.Audit(ctx, over, 0)
		tooLarge(t, "audit of a key one byte over", err)
		tooLarge(t, "delete of a key one byte over", s.Delete(ctx, over))
		longMachine := store.Key{Machine: at.Handle + "x", Handle: machine}
		_, err = s.Save(ctx, longMachine, store.Record{Snapshot: []byte(`{}`)}, 0)
		tooLarge(t, "save of a machine id one byte over", err)
		check := func() {
			t.Helper()
			rec, v, err := s.Load(ctx, at)
			if err != nil || v != 1 || string(rec.Snapshot) != `{}` {
				t.Fatalf("load at the key limit: %s at %d, %v", rec.Snapshot, v, err)
			}
			keys, err := s.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if k == over || k == longMachine {
					t.Fatalf("a refused key is listed")
				}
			}
		}
		check()
		if s.reopen(t) {
			check()
		}
	}
}

// fixedTime is a record's time that engines keep as it is (a record's
// size depends on its time).
var fixedTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// recordOf returns a record of exactly size bytes as store.RecordSize
// counts them, by the length of its snapshot (a JSON string), with the
// timers given.
func recordOf(t *testing.T, size int, timers []store.Timer) store.Record {
	t.Helper()
	rec := store.Record{Snapshot: []byte(`""`), MachineVersion: "v", Updated: fixedTime, Timers: timers}
	base, err := store.RecordSize(rec)
	if err != nil {
		t.Fatal(err)
	}
	if size < base {
		t.Fatalf("no record of %d bytes (the smallest takes %d)", size, base)
	}
	rec.Snapshot = []byte(`"` + strings.Repeat("s", size-base) + `"`)
	if n, _ := store.RecordSize(rec); n != size {
		t.Fatalf("record of %d bytes, want %d", n, size)
	}
	return rec
}

// testRecordLimit: a record of store.MaxRecordSize is stored; a byte more
// (of snapshot, or of timers) is refused, nothing written, for a new
// instance and for one stored.
func testRecordLimit(t *testing.T, e Engine) {
	s := open(t, e, 0)
	ctx := context.Background()
	timer := []store.Timer{{ID: "t", Event: map[string]any{"type": "T"}, Due: fixedTime}}
	stored := store.Key{Machine: "m", Handle: "stored"}
	if _, err := s.Save(ctx, stored, store.Record{Snapshot: []byte(`{}`), Audit: &store.AuditEntry{Tool: "t"}}, 0); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		what string
		rec  store.Record
	}{
		{"a snapshot one byte over", recordOf(t, store.MaxRecordSize+1, nil)},
		{"timers one byte over", recordOf(t, store.MaxRecordSize+1, timer)},
		{"timers alone over", store.Record{Snapshot: []byte(`{}`), Updated: fixedTime, Timers: []store.Timer{
			{ID: "t", Event: map[string]any{"type": "T", "pad": strings.Repeat("p", store.MaxRecordSize)}, Due: fixedTime}}}},
	} {
		k := store.Key{Machine: "m", Handle: "new" + strconv.Itoa(i)}
		rec := c.rec
		rec.Audit = &store.AuditEntry{Tool: "t"}
		_, err := s.Save(ctx, k, rec, 0)
		tooLarge(t, c.what, err)
		nothingWritten(t, s, k, 0, 0)
		_, err = s.Save(ctx, stored, rec, 1)
		tooLarge(t, c.what+", an update", err)
		nothingWritten(t, s, stored, 1, 1)
	}
	if testing.Short() {
		t.Log("-short: the save of a record of 4 MiB is left out")
		return
	}
	at := store.Key{Machine: "m", Handle: "at"}
	rec := recordOf(t, store.MaxRecordSize, timer)
	if _, err := s.Save(ctx, at, rec, 0); err != nil {
		t.Fatalf("save at the record limit: %v", err)
	}
	check := func() {
		t.Helper()
		got, v, err := s.Load(ctx, at)
		if err != nil || v != 1 || string(got.Snapshot) != string(rec.Snapshot) || len(got.Timers) != 1 {
			t.Fatalf("load at the record limit: %d bytes and %d timers at %d, %v", len(got.Snapshot), len(got.Timers), v, err)
		}
	}
	check()
	if s.reopen(t) {
		check()
	}
}

// auditOf returns an audit entry of exactly size bytes as
// store.MarshalAuditEntry counts them once the store sets its version.
func auditOf(t *testing.T, size int, version uint64) *store.AuditEntry {
	t.Helper()
	a := store.AuditEntry{Tool: "t", Version: version, Event: map[string]any{"type": "E", "pad": ""}}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	a.Event["pad"] = strings.Repeat("e", size-len(b))
	if b, _ = json.Marshal(a); len(b) != size {
		t.Fatalf("audit entry of %d bytes, want %d", len(b), size)
	}
	a.Version = 0
	return &a
}

// testAuditEntryLimit: an audit entry of store.MaxRecordSize is stored; a
// byte more is refused, and its save writes nothing (neither the record
// nor the entry).
func testAuditEntryLimit(t *testing.T, e Engine) {
	s := open(t, e, 0)
	ctx := context.Background()
	// An instance stored at version 9, with 9 entries.
	stored := store.Key{Machine: "m", Handle: "stored"}
	var v uint64
	for range 9 {
		var err error
		if v, err = s.Save(ctx, stored, store.Record{Snapshot: []byte(`{}`), Audit: &store.AuditEntry{Tool: "t"}}, v); err != nil {
			t.Fatal(err)
		}
	}
	k := store.Key{Machine: "m", Handle: "new"}
	_, err := s.Save(ctx, k, store.Record{Snapshot: []byte(`{}`), Audit: auditOf(t, store.MaxRecordSize+1, 1)}, 0)
	tooLarge(t, "an audit entry one byte over", err)
	nothingWritten(t, s, k, 0, 0)
	_, err = s.Save(ctx, stored, store.Record{Snapshot: []byte(`{"n":2}`), Audit: auditOf(t, store.MaxRecordSize+1, 10)}, 9)
	tooLarge(t, "an audit entry one byte over, an update", err)
	nothingWritten(t, s, stored, 9, 9)
	// Its version counts: an entry of MaxRecordSize at version 9 is a
	// byte over at version 10, the one the save makes.
	_, err = s.Save(ctx, stored, store.Record{Snapshot: []byte(`{"n":2}`), Audit: auditOf(t, store.MaxRecordSize, 9)}, 9)
	tooLarge(t, "an audit entry over once its version is set", err)
	nothingWritten(t, s, stored, 9, 9)
	if testing.Short() {
		t.Log("-short: the save of an audit entry of 4 MiB is left out")
		return
	}
	at := store.Key{Machine: "m", Handle: "at"}
	// At both limits in one save.
	rec := recordOf(t, store.MaxRecordSize, nil)
	rec.Audit = auditOf(t, store.MaxRecordSize, 1)
	if _, err := s.Save(ctx, at, rec, 0); err != nil {
		t.Fatalf("save at the audit entry's limit: %v", err)
	}
	check := func() {
		t.Helper()
		trail, err := s.Audit(ctx, at, 0)
		if err != nil || len(trail) != 1 || trail[0].Version != 1 {
			t.Fatalf("audit at the limit: %d entries, %v", len(trail), err)
		}
		if b, _ := json.Marshal(trail[0]); len(b) != store.MaxRecordSize {
			t.Fatalf("the entry at the limit came back as %d bytes", len(b))
		}
		if got, _, err := s.Load(ctx, at); err != nil || len(got.Snapshot) != len(rec.Snapshot) {
			t.Fatalf("load at the limits: %d bytes, %v", len(got.Snapshot), err)
		}
	}
	check()
	if s.reopen(t) {
		check()
	}
}
