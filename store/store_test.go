package store_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/store/storetest"
)

// TestMemory runs the contract suite on the memory store.
func TestMemory(t *testing.T) {
	storetest.Run(t, storetest.Engine{Open: func(t *testing.T, retention int) store.Store {
		m := store.NewMemory()
		if retention > 0 {
			m.Retention = retention
		}
		return m
	}})
}

// TestKeySize: a key counts its machine id and handle, each after its
// length (a byte under 128, two under 16,384), and a byte.
func TestKeySize(t *testing.T) {
	for _, c := range []struct {
		k    store.Key
		want int
	}{
		{store.Key{}, 3},
		{store.Key{Machine: "m", Handle: "h"}, 5},
		{store.Key{Machine: "invoice", Handle: "\x00"}, 1 + 1 + 7 + 1 + 1},
		{store.Key{Machine: strings.Repeat("m", 127), Handle: strings.Repeat("h", 128)}, 1 + 1 + 127 + 2 + 128},
		{store.Key{Machine: "m", Handle: strings.Repeat("h", 16384)}, 1 + 1 + 1 + 3 + 16384},
	} {
		if got := store.KeySize(c.k); got != c.want {
			t.Errorf("KeySize(%d-byte machine id, %d-byte handle) = %d, want %d", len(c.k.Machine), len(c.k.Handle), got, c.want)
		}
		if err := store.CheckKey(c.k); (err != nil) != (c.want > store.MaxKeySize) || err != nil && !errors.Is(err, store.ErrTooLarge) {
			t.Errorf("CheckKey(%d-byte key): %v", c.want, err)
		}
	}
}

// TestAppendRecord: a record's JSON is json.Marshal's (the snapshot taken
// as it is, a reset's written null), its size is RecordSize's, and a
// record that does not fit or whose snapshot is not JSON is refused, with
// nothing appended.
func TestAppendRecord(t *testing.T) {
	when := time.Date(2026, 11, 29, 23, 45, 1, 123456789, time.UTC)
	for _, rec := range []store.Record{
		{Snapshot: []byte(`{"status":"active","value":"draft","context":{"a":[1,2]}}`), MachineVersion: "84ba43f72e65c37e", Updated: when},
		{Snapshot: []byte(`{}`), MachineVersion: `odd "<quoted>" & é`, Updated: when.In(time.FixedZone("x", 3600)),
			Timers: []store.Timer{{ID: "t1", Event: map[string]any{"type": "xstate.after.1000.m.s"}, Due: when, Path: []string{"c"}, To: "/"}}},
		{Updated: when, Audit: &store.AuditEntry{Tool: "not counted"}},
	} {
		got, err := store.AppendRecord([]byte("prefix"), rec)
		if err != nil || !strings.HasPrefix(string(got), "prefix") {
			t.Fatalf("AppendRecord: %q, %v", got, err)
		}
		got = got[len("prefix"):]
		want, _ := json.Marshal(rec)
		if string(got) != string(want) {
			t.Errorf("AppendRecord = %s\n want %s", got, want)
		}
		if n, err := store.RecordSize(rec); err != nil || n != len(got) {
			t.Errorf("RecordSize = %d, %v; the JSON takes %d", n, err, len(got))
		}
		if err := store.CheckRecord(rec); err != nil {
			t.Errorf("CheckRecord: %v", err)
		}
	}
	bad := store.Record{Snapshot: []byte(`{"a":`)}
	if got, err := store.AppendRecord([]byte("p"), bad); err == nil || !strings.Contains(err.Error(), "not valid JSON") || string(got) != "p" {
		t.Errorf("a broken snapshot: %q, %v", got, err)
	}
	if err := store.CheckRecord(bad); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("CheckRecord of a broken snapshot: %v", err)
	}
	big := store.Record{Snapshot: []byte(`"` + strings.Repeat("s", store.MaxRecordSize) + `"`)}
	if got, err := store.AppendRecord([]byte("p"), big); !errors.Is(err, store.ErrTooLarge) || string(got) != "p" || len(err.Error()) > 200 {
		t.Errorf("a record too large: %d bytes, %v", len(got), err)
	}
	if err := store.CheckRecord(big); !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("CheckRecord of a record too large: %v", err)
	}
}

// TestMarshalAuditEntry: an entry's JSON is json.Marshal's; one over
// MaxRecordSize is refused.
func TestMarshalAuditEntry(t *testing.T) {
	e := store.AuditEntry{Tool: "t", Version: 3, Event: map[string]any{"type": "E"}}
	got, err := store.MarshalAuditEntry(e)
	want, _ := json.Marshal(e)
	if err != nil || string(got) != string(want) {
		t.Fatalf("MarshalAuditEntry = %s, %v; want %s", got, err, want)
	}
	e.Event["pad"] = strings.Repeat("e", store.MaxRecordSize)
	if _, err := store.MarshalAuditEntry(e); !errors.Is(err, store.ErrTooLarge) || len(err.Error()) > 200 {
		t.Fatalf("an entry too large: %v", err)
	}
	if err := store.CheckAuditEntry(e); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("CheckAuditEntry of an entry too large: %v", err)
	}
}
