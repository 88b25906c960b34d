package badger

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

	dgbadger "github.com/dgraph-io/badger/v4"

	"github.com/stategate/stategate/store"
)

// TestGroupCommitOnOneCore checks that concurrent saves share commits
// when the process has one core (GOMAXPROCS=1, as in a container limited
// to one CPU). There, nothing else runs while a goroutine waits for the
// disk, so the goroutine that writes a batch must first let the savers
// that are ready to run join it; else each save runs to its end alone,
// with a sync of its own. Savers that all start at once must share a few
// commits.
func TestGroupCommitOnOneCore(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	b := openTest(t, t.TempDir(), Options{})
	defer b.Close()
	// A commit that keeps the core for 200 µs without a system call (so
	// that the runtime does not hand the core to others meanwhile).
	b.commit = func(txn *dgbadger.Txn) error {
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
			if _, err := b.Save(context.Background(), store.Key{Machine: "m", Handle: strconv.Itoa(i)}, store.Record{Snapshot: []byte(`{}`)}, 0); err != nil {
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
func holdFirstCommit(b *Store) (release func()) {
	ch := make(chan struct{})
	var once sync.Once
	inner := b.commit
	b.commit = func(txn *dgbadger.Txn) error {
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
func queued(b *Store) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// saveAsync saves in a goroutine and returns its outcome's channel.
func saveAsync(b *Store, k store.Key, rec store.Record, v uint64) <-chan error {
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
	b := openTest(t, dir, Options{})
	// Once armed, the third commit fails: the held one's, the batch's
	// first, then its second. (The hook is set before any save, so that
	// no saver reads it as it changes.)
	var armed atomic.Bool
	commits := 0
	inner := b.commit
	b.commit = func(txn *dgbadger.Txn) error {
		if armed.Load() {
			if commits++; commits == 3 {
				return errors.New("injected: input/output error")
			}
		}
		return inner(txn)
	}
	release := holdFirstCommit(b)
	lead := saveAsync(b, store.Key{Machine: "m", Handle: "lead"}, store.Record{Snapshot: []byte(`{}`)}, 0)
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
		rec := store.Record{Snapshot: []byte(`"` + pad + `"`), Audit: &store.AuditEntry{Tool: pad}}
		outs = append(outs, saveAsync(b, store.Key{Machine: "m", Handle: strconv.Itoa(i)}, rec, 0))
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
		case errors.Is(err, store.ErrOutcomeUnknown):
			unknown++
		case errors.Is(err, store.ErrDiskFailed):
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
	r := openTest(t, dir, Options{})
	defer r.Close()
	stored := 0
	for i := range n {
		k := store.Key{Machine: "m", Handle: strconv.Itoa(i)}
		_, v, err := r.Load(context.Background(), k)
		trail, _ := r.Audit(context.Background(), k, 0)
		switch {
		case err == nil && v == 1 && len(trail) == 1:
			stored++
		case errors.Is(err, store.ErrNotFound) && len(trail) == 0:
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
			b := openTest(t, dir, Options{})
			k := store.Key{Machine: "invoice", Handle: "7"}
			v, err := b.Save(ctx, k, store.Record{Snapshot: []byte(`{"n":1}`)}, 0)
			if err != nil {
				t.Fatal(err)
			}
			ioErr := errors.New("input/output error")
			b.commit = func(txn *dgbadger.Txn) error {
				if written {
					if err := txn.Commit(); err != nil {
						return err
					}
				} else {
					txn.Discard()
				}
				return ioErr
			}
			_, err = b.Save(ctx, k, store.Record{Snapshot: []byte(`{"n":2}`)}, v)
			if !errors.Is(err, store.ErrOutcomeUnknown) || !errors.Is(err, ioErr) || !strings.Contains(err.Error(), "may or may not") {
				t.Fatalf("save with a failing sync: %v", err)
			}
			b.commit = func(txn *dgbadger.Txn) error { return txn.Commit() }
			if _, err := b.Save(ctx, store.Key{Machine: "invoice", Handle: "8"}, store.Record{Snapshot: []byte(`{}`)}, 0); !errors.Is(err, store.ErrDiskFailed) {
				t.Fatalf("a later save: %v", err)
			}
			if err := b.Delete(ctx, k); !errors.Is(err, store.ErrDiskFailed) {
				t.Fatalf("a later delete: %v", err)
			}
			if _, _, err := b.Load(ctx, k); err != nil {
				t.Fatalf("a read after the failure: %v", err)
			}
			b.Close()
			r := openTest(t, dir, Options{})
			defer r.Close()
			rec, v, err := r.Load(ctx, k)
			want := map[bool]string{true: `{"n":2}`, false: `{"n":1}`}[written]
			if err != nil || string(rec.Snapshot) != want || v != map[bool]uint64{true: 2, false: 1}[written] {
				t.Fatalf("reopened: %s at %d, %v", rec.Snapshot, v, err)
			}
			if _, err := r.Save(ctx, k, store.Record{Snapshot: []byte(`{}`)}, v); err != nil {
				t.Fatalf("a save after reopening: %v", err)
			}
		})
	}
}

// TestValueLogSyncFailure: Badger logs a failed sync of a value log file
// and goes on; the store takes it as the commit's failure.
func TestValueLogSyncFailure(t *testing.T) {
	b := openTest(t, t.TempDir(), Options{})
	defer b.Close()
	ctx := context.Background()
	inner := b.commit
	b.commit = func(txn *dgbadger.Txn) error {
		err := inner(txn)
		badgerLogger{log: quietLog(), syncErr: &b.syncErr}.Errorf("Error while curlf sync: %v\n", errors.New("no space left on device"))
		return err
	}
	if _, err := b.Save(ctx, store.Key{Machine: "m", Handle: "h"}, store.Record{Snapshot: []byte(`{}`)}, 0); !errors.Is(err, store.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("save: %v", err)
	}
}

// TestReserve: below the free-space reserve, saves fail with ErrNoSpace
// and change nothing while reads go on; once space is back, saves go on.
// Opening for writing is refused too.
func TestReserve(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := openTest(t, dir, Options{MinFree: 100 << 20})
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
	k := store.Key{Machine: "m", Handle: "h"}
	v, err := b.Save(ctx, k, store.Record{Snapshot: []byte(`{"n":1}`), Audit: &store.AuditEntry{Tool: "a"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	set(100 << 20) // any write would eat into the reserve
	_, err = b.Save(ctx, k, store.Record{Snapshot: []byte(`{"n":2}`), Audit: &store.AuditEntry{Tool: "b"}}, v)
	if !errors.Is(err, store.ErrNoSpace) || !strings.Contains(err.Error(), "--min-free") {
		t.Fatalf("save under the reserve: %v", err)
	}
	if err := b.Delete(ctx, k); !errors.Is(err, store.ErrNoSpace) {
		t.Fatalf("delete under the reserve: %v", err)
	}
	rec, got, err := b.Load(ctx, k)
	trail, _ := b.Audit(ctx, k, 0)
	if err != nil || got != 1 || string(rec.Snapshot) != `{"n":1}` || len(trail) != 1 {
		t.Fatalf("after the refused save: %s at %d, %d entries, %v", rec.Snapshot, got, len(trail), err)
	}
	set(1 << 30)
	if v, err = b.Save(ctx, k, store.Record{Snapshot: []byte(`{"n":2}`)}, v); err != nil || v != 2 {
		t.Fatalf("save once space is back: %d %v", v, err)
	}
	b.Close()
	// The reserve is larger than the disk's free space: no open for
	// writing; reading is fine.
	if _, err := Open(dir, Options{MinFree: 1 << 62, Logger: quietLog()}); !errors.Is(err, store.ErrNoSpace) {
		t.Fatalf("open under the reserve: %v", err)
	}
	r := openTest(t, dir, Options{MinFree: 1 << 62, ReadOnly: true})
	defer r.Close()
	if _, v, err := r.Load(ctx, k); err != nil || v != 2 {
		t.Fatalf("read-only open under the reserve: %d %v", v, err)
	}
}

// TestReadOnly: a read-only store refuses writes; a second reader is
// fine, a writer is refused while it reads.
func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir, Options{})
	b.Save(context.Background(), store.Key{Machine: "m", Handle: "h"}, store.Record{Snapshot: []byte(`{}`)}, 0)
	b.Close()
	r := openTest(t, dir, Options{ReadOnly: true})
	defer r.Close()
	if _, err := r.Save(context.Background(), store.Key{Machine: "m", Handle: "h"}, store.Record{Snapshot: []byte(`{}`)}, 1); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("save: %v", err)
	}
	if err := r.Delete(context.Background(), store.Key{Machine: "m", Handle: "h"}); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("delete: %v", err)
	}
	r2 := openTest(t, dir, Options{ReadOnly: true})
	r2.Close()
	if _, err := Open(dir, Options{Logger: quietLog()}); !errors.Is(err, ErrLocked) {
		t.Fatalf("a writer while a reader reads: %v", err)
	}
	if _, err := Open(t.TempDir(), Options{ReadOnly: true, Logger: quietLog()}); !errors.Is(err, ErrNoStore) {
		t.Fatalf("read-only open of an empty folder: %v", err)
	}
}

// leading reports whether a saver is writing a batch.
func leading(b *Store) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.leading
}

// TestEncodeMatchesMarshal checks the record encoding against json.Marshal.
func TestEncodeMatchesMarshal(t *testing.T) {
	when := time.Date(2026, 11, 29, 23, 45, 1, 123456789, time.UTC)
	for _, rec := range []store.Record{
		{Snapshot: []byte(`{"status":"active","value":"draft","context":{"a":[1,2]}}`), MachineVersion: "84ba43f72e65c37e", Updated: when},
		{Snapshot: []byte(`{}`), MachineVersion: `odd "<quoted>"`, Updated: when.In(time.FixedZone("x", 3600)),
			Timers: []store.Timer{{ID: "t1", Event: map[string]any{"type": "xstate.after.1000.m.s"}, Due: when}}},
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
	if _, err := encode(store.Record{Snapshot: []byte(`{`)}, 1); err == nil {
		t.Error("a broken snapshot was encoded")
	}
	// A reset (no snapshot) is written null and read back as none.
	enc, err := encode(store.Record{Updated: when}, 3)
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
	b := openTest(t, t.TempDir(), Options{})
	defer b.Close()
	ctx := context.Background()
	if _, err := b.Save(ctx, store.Key{Machine: "m", Handle: "bad"}, store.Record{Snapshot: []byte(`{"a":`)}, 0); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("bad save: %v", err)
	}
	if _, _, err := b.Load(ctx, store.Key{Machine: "m", Handle: "bad"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bad record stored: %v", err)
	}
	if _, err := b.Save(ctx, store.Key{Machine: "m", Handle: "good"}, store.Record{Snapshot: []byte(`{}`)}, 0); err != nil {
		t.Fatal(err)
	}
}
