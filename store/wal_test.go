package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// append writes a batch and syncs it to the disk, as a save does.
func (w *wal) append(ops []walOp) error {
	if err := w.write(ops); err != nil {
		return err
	}
	return w.sync()
}

func TestWALReplaysTheCurrentGeneration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	w, got, err := openWAL(path)
	if err != nil || len(got) != 0 {
		t.Fatalf("new log: %v, %v", got, err)
	}
	batches := [][]walOp{
		{{key: []byte("a"), val: []byte("1")}, {key: []byte("b"), val: []byte("2")}},
		{{del: true, key: []byte("a")}},
	}
	for _, ops := range batches {
		if err := w.append(ops); err != nil {
			t.Fatal(err)
		}
	}
	end := w.off
	w.Close()

	w, got, err = openWAL(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(got, batches, func(a, b []walOp) bool {
		return slices.EqualFunc(a, b, func(x, y walOp) bool {
			return x.del == y.del && string(x.key) == string(y.key) && string(x.val) == string(y.val)
		})
	}) {
		t.Fatalf("replayed %v, want %v", got, batches)
	}
	if w.off != end {
		t.Fatalf("offset %d after replay, want %d", w.off, end)
	}

	// A torn record (its crc does not match) ends the replay.
	if err := w.append([]walOp{{key: []byte("c"), val: []byte("3")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.f.WriteAt([]byte{0xff}, w.off-1); err != nil {
		t.Fatal(err)
	}
	w.Close()
	w, got, err = openWAL(path)
	if err != nil || len(got) != 2 {
		t.Fatalf("after a torn record: %d batches, %v; want 2", len(got), err)
	}

	// A new generation leaves the old records out.
	if err := w.restart(w.gen + 1); err != nil {
		t.Fatal(err)
	}
	w.Close()
	w, got, err = openWAL(path)
	if err != nil || len(got) != 0 {
		t.Fatalf("after restart: %d batches, %v; want none", len(got), err)
	}
	w.Close()
}

func TestWALFull(t *testing.T) {
	w, _, err := openWAL(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	big := []walOp{{key: []byte("k"), val: make([]byte, 1<<20)}}
	var full error
	for range walSize / (1 << 20) {
		if full = w.append(big); full != nil {
			break
		}
	}
	if full != errWALFull {
		t.Fatalf("append to a full log: %v, want errWALFull", full)
	}
}

// TestBadgerRecoversFromTheLog loses what Badger had not synced (its
// memory-mapped tables, as a power cut would) and finds every
// acknowledged save again, from the write-ahead log.
func TestBadgerRecoversFromTheLog(t *testing.T) {
	dir := t.TempDir()
	b, err := OpenBadger(dir, BadgerOptions{GCInterval: -1, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	k := Key{"invoice", "7"}
	var v uint64
	for i := range 20 {
		rec := Record{Snapshot: []byte(`{"n":` + strconv.Itoa(i) + `}`), Audit: &AuditEntry{Tool: "t" + strconv.Itoa(i)}}
		if v, err = b.Save(ctx, k, rec, v); err != nil {
			t.Fatal(err)
		}
	}
	// A copy of the folder as it is now, without Badger's unsynced tables.
	lost := copyWithoutMemtables(t, dir)
	b.Close()

	r, err := OpenBadger(lost, BadgerOptions{GCInterval: -1, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec, got, err := r.Load(ctx, k)
	if err != nil || got != 20 || string(rec.Snapshot) != `{"n":19}` {
		t.Fatalf("after recovery: %s at version %d, %v; want {\"n\":19} at 20", rec.Snapshot, got, err)
	}
	trail, err := r.Audit(ctx, k, 0)
	if err != nil || len(trail) != 20 || trail[19].Tool != "t19" {
		t.Fatalf("audit after recovery: %d entries, %v", len(trail), err)
	}
}

// TestEncodeMatchesMarshal checks the record encoding against json.Marshal.
func TestEncodeMatchesMarshal(t *testing.T) {
	when := time.Date(2026, 11, 29, 23, 45, 1, 123456789, time.UTC)
	for _, rec := range []Record{
		{Snapshot: []byte(`{"status":"active","value":"draft","context":{"a":[1,2]}}`), MachineVersion: "84ba43f72e65c37e", Updated: when},
		{Snapshot: []byte(`{}`), MachineVersion: `odd "<quoted>"`, Updated: when.In(time.FixedZone("x", 3600)),
			Timers: []Timer{{ID: "t1", Event: map[string]any{"type": "xstate.after.1000.m.s"}, Due: when}}},
	} {
		got, err := encode(rec, 7)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(rec)
		if string(got[8:]) != string(want) || binary.BigEndian.Uint64(got) != 7 {
			t.Errorf("encode = %s\n want %s", got[8:], want)
		}
		back, v, err := decode(got)
		if err != nil || v != 7 || string(back.Snapshot) != string(rec.Snapshot) || !back.Updated.Equal(rec.Updated) {
			t.Errorf("decode: %+v %d %v", back, v, err)
		}
	}
	if _, err := encode(Record{Snapshot: []byte(`{`)}, 1); err == nil {
		t.Error("a broken snapshot was encoded")
	}
}

// TestBigBatchesAreSplit saves, at once, more than one transaction (and
// more than the write-ahead log) can hold: every save succeeds.
func TestBigBatchesAreSplit(t *testing.T) {
	if testing.Short() {
		t.Skip("writes about 40 MB")
	}
	b, err := OpenBadger(t.TempDir(), BadgerOptions{GCInterval: -1, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	snap := []byte(`{"big":"` + strings.Repeat("x", 200<<10) + `"}`)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.Save(context.Background(), Key{"m", strconv.Itoa(i)}, Record{Snapshot: snap}, 0)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	saves, commits := b.Stats()
	t.Logf("%d saves in %d commits", saves, commits)
}

// TestFailedSyncStopsSaves checks that a save whose log sync fails is an
// error, and that the store then refuses every save (ErrDiskFailed)
// instead of answering for writes the disk may not hold.
func TestFailedSyncStopsSaves(t *testing.T) {
	b, err := OpenBadger(t.TempDir(), BadgerOptions{GCInterval: -1, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	k := Key{"invoice", "7"}
	v, err := b.Save(ctx, k, Record{Snapshot: []byte(`{"n":1}`)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	ioErr := errors.New("input/output error")
	for _, w := range b.logs {
		w.fdatasync = func(*os.File) error { return ioErr }
	}
	if _, err := b.Save(ctx, k, Record{Snapshot: []byte(`{"n":2}`)}, v); !errors.Is(err, ErrDiskFailed) || !strings.Contains(err.Error(), ioErr.Error()) {
		t.Fatalf("save with a failing sync: %v; want ErrDiskFailed naming the cause", err)
	}
	for _, w := range b.logs {
		w.fdatasync = fdatasync
	}
	if _, err := b.Save(ctx, Key{"invoice", "8"}, Record{Snapshot: []byte(`{"n":1}`)}, 0); !errors.Is(err, ErrDiskFailed) {
		t.Fatalf("a later save: %v; want ErrDiskFailed", err)
	}
}
