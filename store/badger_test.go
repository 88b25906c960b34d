package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

func openTest(t testing.TB, dir string, o BadgerOptions) *Badger {
	t.Helper()
	if o.GCInterval == 0 {
		o.GCInterval = -1
	}
	if o.Logger == nil {
		o.Logger = quietLog()
	}
	b, err := OpenBadger(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLimits saves a key and a record at the store's limits, in a store
// of either size, and loads them back after reopening; one byte more is
// refused with ErrTooLarge, and the message says how large without the
// key's bytes.
func TestLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("writes records of 4 MiB")
	}
	ctx := context.Background()
	for _, small := range []bool{false, true} {
		t.Run(fmt.Sprint("small=", small), func(t *testing.T) {
			dir := t.TempDir()
			b := openTest(t, dir, BadgerOptions{SmallTables: small})
			// A handle that makes the key exactly MaxKeySize long.
			h := strings.Repeat("h", MaxKeySize-1-1-len("m")-2)
			atKey := Key{"m", h}
			if keyLen(atKey) != MaxKeySize {
				t.Fatalf("key of %d bytes", keyLen(atKey))
			}
			// A snapshot that makes the record exactly MaxRecordSize long.
			snapFor := func(n int) []byte {
				rec, _ := encode(Record{Snapshot: []byte(`""`), MachineVersion: "v", Updated: time.Unix(1, 0).UTC()}, 1)
				return []byte(`"` + strings.Repeat("s", n-(len(rec)-8)) + `"`)
			}
			rec := Record{Snapshot: snapFor(MaxRecordSize), MachineVersion: "v", Updated: time.Unix(1, 0).UTC()}
			if enc, _ := encode(rec, 1); len(enc)-8 != MaxRecordSize {
				t.Fatalf("record of %d bytes", len(enc)-8)
			}
			big := &AuditEntry{Tool: "t", Event: map[string]any{"pad": strings.Repeat("e", MaxRecordSize-200)}}
			if _, err := b.Save(ctx, atKey, Record{Snapshot: rec.Snapshot, MachineVersion: "v", Updated: rec.Updated, Audit: big}, 0); err != nil {
				t.Fatalf("save at the limits: %v", err)
			}
			// One more byte of key, of record, of audit entry.
			over := Key{"m", h + "h"}
			_, err := b.Save(ctx, over, Record{Snapshot: []byte(`{}`)}, 0)
			if !errors.Is(err, ErrTooLarge) || strings.Contains(err.Error(), "hhhh") || len(err.Error()) > 200 {
				t.Fatalf("a key one byte over: %v", err)
			}
			rec2 := rec
			rec2.Snapshot = snapFor(MaxRecordSize + 1)
			if _, err := b.Save(ctx, Key{"m", "r"}, rec2, 0); !errors.Is(err, ErrTooLarge) || len(err.Error()) > 200 {
				t.Fatalf("a record one byte over: %v", err)
			}
			huge := &AuditEntry{Tool: "t", Event: map[string]any{"pad": strings.Repeat("e", MaxRecordSize)}}
			if _, err := b.Save(ctx, Key{"m", "a"}, Record{Snapshot: []byte(`{}`), Audit: huge}, 0); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("an audit entry over: %v", err)
			}
			for _, k := range []Key{over, {"m", "r"}, {"m", "a"}} {
				if _, _, err := b.Load(ctx, k); !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrTooLarge) {
					t.Fatalf("%d-byte handle: %v", len(k.Handle), err)
				}
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			b = openTest(t, dir, BadgerOptions{SmallTables: small})
			defer b.Close()
			got, v, err := b.Load(ctx, atKey)
			if err != nil || v != 1 || string(got.Snapshot) != string(rec.Snapshot) {
				t.Fatalf("load at the limits: %d bytes at %d, %v", len(got.Snapshot), v, err)
			}
			trail, err := b.Audit(ctx, atKey, 0)
			if err != nil || len(trail) != 1 || len(trail[0].Event["pad"].(string)) != MaxRecordSize-200 {
				t.Fatalf("audit at the limits: %d entries, %v", len(trail), err)
			}
			// The memory store refuses the same key.
			if _, err := NewMemory().Save(ctx, over, Record{Snapshot: []byte(`{}`)}, 0); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("memory store, a key one byte over: %v", err)
			}
		})
	}
}

// TestResetRecord: a reset is a record with no snapshot at the next
// version, with its audit entry; the instance is then saved on from it.
func TestResetRecord(t *testing.T) { stores(t, testResetRecord) }

func testResetRecord(t *testing.T, s Store) {
	ctx := context.Background()
	k := Key{"invoice", "1"}
	v, err := s.Save(ctx, k, Record{Snapshot: []byte(`{"value":"paid"}`), Audit: &AuditEntry{Tool: "pay", To: "paid"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Reset(ctx, s, k, v+1, "paid", ""); !errors.Is(err, ErrConflict) {
		t.Fatalf("reset at a stale version: %v", err)
	}
	if v, err = Reset(ctx, s, k, v, "paid", ""); err != nil || v != 2 {
		t.Fatalf("reset: %d %v", v, err)
	}
	rec, got, err := s.Load(ctx, k)
	if err != nil || !rec.IsReset() || got != 2 || rec.Updated.IsZero() {
		t.Fatalf("after the reset: %+v at %d, %v", rec, got, err)
	}
	if v, err = s.Save(ctx, k, Record{Snapshot: []byte(`{"value":"draft"}`), Audit: &AuditEntry{Tool: "add"}}, v); err != nil || v != 3 {
		t.Fatalf("save after the reset: %d %v", v, err)
	}
	trail, err := s.Audit(ctx, k, 0)
	if err != nil || len(trail) != 3 {
		t.Fatalf("trail: %+v %v", trail, err)
	}
	if r := trail[1]; r.Tool != ResetTool || r.From != "paid" || r.Version != 2 || r.Note != "reset by an operator" || r.Machine != "invoice" || r.Handle != "1" {
		t.Fatalf("reset entry: %+v", r)
	}
}

// TestGroupCommitOnOneCore checks that concurrent saves share commits
// when the process has one core (GOMAXPROCS=1, as in a container limited
// to one CPU). There, nothing else runs while a goroutine waits for the
// disk, so the goroutine that writes a batch must first let the savers
// that are ready to run join it; else each save runs to its end alone,
// with a sync of its own. Savers that all start at once must share a few
// commits.
func TestGroupCommitOnOneCore(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	b := openTest(t, t.TempDir(), BadgerOptions{})
	defer b.Close()
	// A commit that keeps the core for 200 µs without a system call (so
	// that the runtime does not hand the core to others meanwhile).
	b.commit = func(txn *badger.Txn) error {
		for start := time.Now(); time.Since(start) < 200*time.Microsecond; {
		}
		return txn.Commit()
	}
	const savers = 32
	var wg sync.WaitGroup
	for i := range savers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Save(context.Background(), Key{"m", strconv.Itoa(i)}, Record{Snapshot: []byte(`{}`)}, 0); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	saves, commits := b.Stats()
	t.Logf("%d saves in %d commits", saves, commits)
	if saves != savers || commits > 4 {
		t.Fatalf("%d saves in %d commits; want them in a few commits", saves, commits)
	}
}

// holdFirstCommit makes the store's first commit wait until the returned
// function is called, so that saves queue behind it and make the next
// batch together.
func holdFirstCommit(b *Badger) (release func()) {
	ch := make(chan struct{})
	var once sync.Once
	inner := b.commit
	b.commit = func(txn *badger.Txn) error {
		first := false
		once.Do(func() { first = true })
		if first {
			<-ch
		}
		return inner(txn)
	}
	return func() { close(ch) }
}

// queued returns how many saves wait.
func queued(b *Badger) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// saveAsync saves in a goroutine and returns its outcome's channel.
func saveAsync(b *Badger, k Key, rec Record, v uint64) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := b.Save(context.Background(), k, rec, v)
		done <- err
	}()
	return done
}

// TestBigBatchIsSplitBetweenSaves queues, behind a held commit, saves
// that together exceed Badger's transaction size, then fails the batch's
// second transaction: every save of the first is stored whole (record and
// audit entry), every save of the second not at all, and the store
// reopens with each instance's record and trail agreeing.
func TestBigBatchIsSplitBetweenSaves(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir, BadgerOptions{})
	// Once armed, the third commit fails: the held one's, the batch's
	// first, then its second. (The hook is set before any save, so that
	// no saver reads it as it changes.)
	var armed atomic.Bool
	commits := 0
	inner := b.commit
	b.commit = func(txn *badger.Txn) error {
		if armed.Load() {
			if commits++; commits == 3 {
				return errors.New("injected: input/output error")
			}
		}
		return inner(txn)
	}
	release := holdFirstCommit(b)
	lead := saveAsync(b, Key{"m", "lead"}, Record{Snapshot: []byte(`{}`)}, 0)
	for !leading(b) || queued(b) != 0 {
		runtime.Gosched()
	}
	// Records and audit entries of 100 KiB each (under the value
	// threshold, so they count whole): about 200 KiB a save, three saves
	// a transaction.
	pad := strings.Repeat("x", 100<<10)
	const n = 8
	var outs []<-chan error
	for i := range n {
		rec := Record{Snapshot: []byte(`"` + pad + `"`), Audit: &AuditEntry{Tool: pad}}
		outs = append(outs, saveAsync(b, Key{"m", strconv.Itoa(i)}, rec, 0))
	}
	for queued(b) != n {
		runtime.Gosched()
	}
	armed.Store(true)
	release()
	if err := <-lead; err != nil {
		t.Fatal(err)
	}
	var ok, unknown, refused int
	for _, c := range outs {
		switch err := <-c; {
		case err == nil:
			ok++
		case errors.Is(err, ErrOutcomeUnknown):
			unknown++
		case errors.Is(err, ErrDiskFailed):
			refused++
		default:
			t.Fatalf("save: %v", err)
		}
	}
	t.Logf("%d saves stored, %d of outcome unknown, %d refused", ok, unknown, refused)
	if ok == 0 || unknown == 0 || refused == 0 || ok+unknown+refused != n {
		t.Fatalf("want a stored transaction, a failed one and one not written")
	}
	b.Close()
	r := openTest(t, dir, BadgerOptions{})
	defer r.Close()
	stored := 0
	for i := range n {
		k := Key{"m", strconv.Itoa(i)}
		_, v, err := r.Load(context.Background(), k)
		trail, _ := r.Audit(context.Background(), k, 0)
		switch {
		case err == nil && v == 1 && len(trail) == 1:
			stored++
		case errors.Is(err, ErrNotFound) && len(trail) == 0:
		default:
			t.Fatalf("%v: record at %d (%v), %d audit entries: a save was split", k, v, err, len(trail))
		}
	}
	if stored != ok {
		t.Fatalf("%d stored after reopening, %d acknowledged", stored, ok)
	}
}

// TestSyncFailure makes a commit fail, after writing and before: the save
// says its outcome is unknown (wrapping the cause), every later write is
// refused, reads go on, and the store opened again holds the save or not
// as the disk kept it.
func TestSyncFailure(t *testing.T) {
	for _, written := range []bool{true, false} {
		t.Run(fmt.Sprint("written=", written), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			b := openTest(t, dir, BadgerOptions{})
			k := Key{"invoice", "7"}
			v, err := b.Save(ctx, k, Record{Snapshot: []byte(`{"n":1}`)}, 0)
			if err != nil {
				t.Fatal(err)
			}
			ioErr := errors.New("input/output error")
			b.commit = func(txn *badger.Txn) error {
				if written {
					if err := txn.Commit(); err != nil {
						return err
					}
				} else {
					txn.Discard()
				}
				return ioErr
			}
			_, err = b.Save(ctx, k, Record{Snapshot: []byte(`{"n":2}`)}, v)
			if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, ioErr) || !strings.Contains(err.Error(), "may or may not") {
				t.Fatalf("save with a failing sync: %v", err)
			}
			b.commit = func(txn *badger.Txn) error { return txn.Commit() }
			if _, err := b.Save(ctx, Key{"invoice", "8"}, Record{Snapshot: []byte(`{}`)}, 0); !errors.Is(err, ErrDiskFailed) {
				t.Fatalf("a later save: %v", err)
			}
			if err := b.Delete(ctx, k); !errors.Is(err, ErrDiskFailed) {
				t.Fatalf("a later delete: %v", err)
			}
			if _, _, err := b.Load(ctx, k); err != nil {
				t.Fatalf("a read after the failure: %v", err)
			}
			b.Close()
			r := openTest(t, dir, BadgerOptions{})
			defer r.Close()
			rec, v, err := r.Load(ctx, k)
			want := map[bool]string{true: `{"n":2}`, false: `{"n":1}`}[written]
			if err != nil || string(rec.Snapshot) != want || v != map[bool]uint64{true: 2, false: 1}[written] {
				t.Fatalf("reopened: %s at %d, %v", rec.Snapshot, v, err)
			}
			if _, err := r.Save(ctx, k, Record{Snapshot: []byte(`{}`)}, v); err != nil {
				t.Fatalf("a save after reopening: %v", err)
			}
		})
	}
}

// TestValueLogSyncFailure: Badger logs a failed sync of a value log file
// and goes on; the store takes it as the commit's failure.
func TestValueLogSyncFailure(t *testing.T) {
	b := openTest(t, t.TempDir(), BadgerOptions{})
	defer b.Close()
	ctx := context.Background()
	inner := b.commit
	b.commit = func(txn *badger.Txn) error {
		err := inner(txn)
		badgerLogger{log: quietLog(), syncErr: &b.syncErr}.Errorf("Error while curlf sync: %v\n", errors.New("no space left on device"))
		return err
	}
	if _, err := b.Save(ctx, Key{"m", "h"}, Record{Snapshot: []byte(`{}`)}, 0); !errors.Is(err, ErrOutcomeUnknown) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("save: %v", err)
	}
}

// TestReserve: below the free-space reserve, saves fail with ErrNoSpace
// and change nothing while reads go on; once space is back, saves go on.
// Opening for writing is refused too.
func TestReserve(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := openTest(t, dir, BadgerOptions{MinFree: 100 << 20})
	var free struct {
		sync.Mutex
		n int64
	}
	free.n = 1 << 30
	b.free = func() (int64, error) {
		free.Lock()
		defer free.Unlock()
		return free.n, nil
	}
	set := func(n int64) { free.Lock(); free.n = n; free.Unlock() }
	k := Key{"m", "h"}
	v, err := b.Save(ctx, k, Record{Snapshot: []byte(`{"n":1}`), Audit: &AuditEntry{Tool: "a"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	set(100 << 20) // any write would eat into the reserve
	_, err = b.Save(ctx, k, Record{Snapshot: []byte(`{"n":2}`), Audit: &AuditEntry{Tool: "b"}}, v)
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "--min-free") {
		t.Fatalf("save under the reserve: %v", err)
	}
	if err := b.Delete(ctx, k); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("delete under the reserve: %v", err)
	}
	rec, got, err := b.Load(ctx, k)
	trail, _ := b.Audit(ctx, k, 0)
	if err != nil || got != 1 || string(rec.Snapshot) != `{"n":1}` || len(trail) != 1 {
		t.Fatalf("after the refused save: %s at %d, %d entries, %v", rec.Snapshot, got, len(trail), err)
	}
	set(1 << 30)
	if v, err = b.Save(ctx, k, Record{Snapshot: []byte(`{"n":2}`)}, v); err != nil || v != 2 {
		t.Fatalf("save once space is back: %d %v", v, err)
	}
	b.Close()
	// The reserve is larger than the disk's free space: no open for
	// writing; reading is fine.
	if _, err := OpenBadger(dir, BadgerOptions{MinFree: 1 << 62, Logger: quietLog()}); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("open under the reserve: %v", err)
	}
	r := openTest(t, dir, BadgerOptions{MinFree: 1 << 62, ReadOnly: true})
	defer r.Close()
	if _, v, err := r.Load(ctx, k); err != nil || v != 2 {
		t.Fatalf("read-only open under the reserve: %d %v", v, err)
	}
}

// TestReadOnly: a read-only store refuses writes; a second reader is
// fine, a writer is refused while it reads.
func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir, BadgerOptions{})
	b.Save(context.Background(), Key{"m", "h"}, Record{Snapshot: []byte(`{}`)}, 0)
	b.Close()
	r := openTest(t, dir, BadgerOptions{ReadOnly: true})
	defer r.Close()
	if _, err := r.Save(context.Background(), Key{"m", "h"}, Record{Snapshot: []byte(`{}`)}, 1); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("save: %v", err)
	}
	if err := r.Delete(context.Background(), Key{"m", "h"}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("delete: %v", err)
	}
	r2 := openTest(t, dir, BadgerOptions{ReadOnly: true})
	r2.Close()
	if _, err := OpenBadger(dir, BadgerOptions{Logger: quietLog()}); !errors.Is(err, ErrLocked) {
		t.Fatalf("a writer while a reader reads: %v", err)
	}
	if _, err := OpenBadger(t.TempDir(), BadgerOptions{ReadOnly: true, Logger: quietLog()}); !errors.Is(err, ErrNoStore) {
		t.Fatalf("read-only open of an empty folder: %v", err)
	}
}

// leading reports whether a saver is writing a batch.
func leading(b *Badger) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.leading
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
	// A reset (no snapshot) is written null and read back as none.
	enc, err := encode(Record{Updated: when}, 3)
	if err != nil || !strings.Contains(string(enc), `"snapshot":null`) {
		t.Fatalf("reset encoded as %s, %v", enc, err)
	}
	if back, v, err := decode(enc); err != nil || !back.IsReset() || v != 3 {
		t.Fatalf("reset decoded as %+v %d %v", back, v, err)
	}
}

// TestBadRecordFailsItsSave: a snapshot that is not JSON fails its save
// alone, before it is queued.
func TestBadRecordFailsItsSave(t *testing.T) {
	b := openTest(t, t.TempDir(), BadgerOptions{})
	defer b.Close()
	ctx := context.Background()
	if _, err := b.Save(ctx, Key{"m", "bad"}, Record{Snapshot: []byte(`{"a":`)}, 0); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("bad save: %v", err)
	}
	if _, _, err := b.Load(ctx, Key{"m", "bad"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bad record stored: %v", err)
	}
	if _, err := b.Save(ctx, Key{"m", "good"}, Record{Snapshot: []byte(`{}`)}, 0); err != nil {
		t.Fatal(err)
	}
}
