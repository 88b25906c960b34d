package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// saveN saves an instance n times after version v, each with an audit
// entry naming its number, and checks after each save that a load sees
// it.
func saveN(t *testing.T, b *Badger, k Key, v uint64, n int) uint64 {
	t.Helper()
	ctx := context.Background()
	for range n {
		next := v + 1
		rec := Record{Snapshot: []byte(`{"n":` + strconv.FormatUint(next, 10) + `}`), Audit: &AuditEntry{Tool: "t" + strconv.FormatUint(next, 10)}}
		var err error
		if v, err = b.Save(ctx, k, rec, v); err != nil {
			t.Error(err)
			return v
		}
		rec, got, err := b.Load(ctx, k)
		if err != nil || got != v || string(rec.Snapshot) != `{"n":`+strconv.FormatUint(v, 10)+`}` {
			t.Errorf("%v after save %d: %s at %d, %v", k, v, rec.Snapshot, got, err)
			return v
		}
	}
	return v
}

// checkInstance checks an instance's record and the whole of its audit
// trail (the last keep versions up to v).
func checkInstance(t *testing.T, s Store, k Key, v uint64, keep int) {
	t.Helper()
	ctx := context.Background()
	rec, got, err := s.Load(ctx, k)
	if err != nil || got != v || string(rec.Snapshot) != `{"n":`+strconv.FormatUint(v, 10)+`}` {
		t.Fatalf("%v: %s at %d, %v; want n %d", k, rec.Snapshot, got, err, v)
	}
	trail, err := s.Audit(ctx, k, 0)
	if err != nil || len(trail) != keep {
		t.Fatalf("%v: %d audit entries, %v; want %d", k, len(trail), err, keep)
	}
	for i, e := range trail {
		want := v - uint64(keep) + uint64(i) + 1
		if e.Version != want || e.Tool != "t"+strconv.FormatUint(want, 10) {
			t.Fatalf("%v: audit entry %d is %d %s, want %d", k, i, e.Version, e.Tool, want)
		}
	}
	last, err := s.Audit(ctx, k, 3)
	if err != nil || len(last) != 3 || last[2].Version != v {
		t.Fatalf("%v: last 3 audit entries %+v, %v", k, last, err)
	}
}

// TestCheckpointsKeepEverySave saves from several goroutines through
// many checkpoints (logs of a few kilobytes) and finds every record and
// audit entry, before and after reopening, whether it was read from
// memory or from Badger.
func TestCheckpointsKeepEverySave(t *testing.T) {
	dir := t.TempDir()
	b, err := OpenBadger(dir, BadgerOptions{GCInterval: -1, AuditRetention: 40, CheckpointBytes: 8 << 10, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	const instances, saves = 8, 200
	var wg sync.WaitGroup
	for i := range instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			saveN(t, b, Key{"m", strconv.Itoa(i)}, 0, saves)
		}()
	}
	wg.Wait()
	if t.Failed() {
		b.Close()
		return
	}
	if n := b.nCheckpoints.Load(); n < 3 {
		t.Fatalf("%d checkpoints; the test wants several", n)
	}
	ctx := context.Background()
	gone := Key{"m", "0"}
	if err := b.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	check := func(s Store) {
		t.Helper()
		for i := 1; i < instances; i++ {
			checkInstance(t, s, Key{"m", strconv.Itoa(i)}, saves, 40)
		}
		if _, _, err := s.Load(ctx, gone); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted instance: %v", err)
		}
		if trail, err := s.Audit(ctx, gone, 0); err != nil || len(trail) != 0 {
			t.Fatalf("deleted instance's audit trail: %d entries, %v", len(trail), err)
		}
		keys, err := s.List(ctx)
		if err != nil || len(keys) != instances-1 || keys[0] != (Key{"m", "1"}) {
			t.Fatalf("list: %v %v", keys, err)
		}
	}
	check(b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := OpenBadger(dir, BadgerOptions{GCInterval: -1, AuditRetention: 40, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	check(r)
	// A deleted instance starts again at version 1, with a trail of its
	// own.
	if v := saveN(t, r, gone, 0, 5); v != 5 {
		t.Fatalf("recreated at %d", v)
	}
	checkInstance(t, r, gone, 5, 5)
}

// copyWithoutMemtables copies a store's folder as a power cut would leave
// it: without what Badger had not synced (its memory-mapped tables).
func copyWithoutMemtables(t *testing.T, dir string) string {
	t.Helper()
	lost := t.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "LOCK" || strings.HasSuffix(e.Name(), ".mem") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(lost, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return lost
}

// TestRecoveryDuringACheckpoint loses Badger's unsynced tables while a
// checkpoint is under way, so that both logs hold acknowledged saves, and
// finds every save again.
func TestRecoveryDuringACheckpoint(t *testing.T) {
	dir := t.TempDir()
	b, err := OpenBadger(dir, BadgerOptions{GCInterval: -1, CheckpointBytes: 4 << 10, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b.beforeCheckpoint = func() {
		once.Do(func() {
			close(started)
			<-release
		})
	}
	k := Key{"invoice", "7"}
	v := uint64(0)
	for {
		v = saveN(t, b, k, v, 1)
		select {
		case <-started:
		default:
			if t.Failed() {
				t.FailNow()
			}
			continue
		}
		break
	}
	// The first log waits for its checkpoint; these go to the second.
	v = saveN(t, b, k, v, 10)
	other := Key{"invoice", "8"}
	saveN(t, b, other, 0, 3)
	lost := copyWithoutMemtables(t, dir)
	close(release)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := OpenBadger(lost, BadgerOptions{GCInterval: -1, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	checkInstance(t, r, k, v, int(v))
	checkInstance(t, r, other, 3, 3)
	t.Logf("%d saves, the first %d in the log being checkpointed", v, v-10)
}

// BenchmarkBadgerSaveParallel measures durable saves of many instances at
// once, as a server under load makes them (group commit).
func BenchmarkBadgerSaveParallel(b *testing.B) {
	st, err := OpenBadger(b.TempDir(), BadgerOptions{GCInterval: -1, Logger: quietLog()})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	var next sync.Mutex
	id := 0
	b.SetParallelism(32) // 64 savers on 2 cores
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		next.Lock()
		k := Key{"m", fmt.Sprint(id)}
		id++
		next.Unlock()
		var v uint64
		rec := Record{Snapshot: []byte(`{"status":"active","value":"draft","context":{"lines":[],"total":0}}`), Audit: &AuditEntry{Tool: "t", Event: map[string]any{"type": "SUBMIT"}, From: "draft", To: "review"}}
		for pb.Next() {
			var err error
			if v, err = st.Save(context.Background(), k, rec, v); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// TestGroupCommitOnOneCore checks that concurrent saves share fsyncs when
// the process has one core (GOMAXPROCS=1, as in a container limited to one
// CPU). There, nothing else runs while a goroutine is in fdatasync, so the
// goroutine that writes a batch must first let the savers that are ready
// to run join it; else each save runs to its end alone, with an fsync of
// its own. Savers that all start at once must share one or two commits.
func TestGroupCommitOnOneCore(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	b, err := OpenBadger(t.TempDir(), BadgerOptions{GCInterval: -1, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// A sync that keeps the core for 200 µs without a system call (so
	// that the runtime does not hand the core to others meanwhile, as it
	// may for a long fdatasync).
	for _, w := range b.logs {
		w.fdatasync = func(*os.File) error {
			for start := time.Now(); time.Since(start) < 200*time.Microsecond; {
			}
			return nil
		}
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

// TestTrailAfterDeleteAcrossCheckpoints deletes an instance whose trail is
// partly in Badger and partly in memory, starts it again, and reads the
// new trail only, whole and in part.
func TestTrailAfterDeleteAcrossCheckpoints(t *testing.T) {
	b, err := OpenBadger(t.TempDir(), BadgerOptions{GCInterval: -1, CheckpointBytes: 2 << 10, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	k := Key{"m", "h"}
	saveN(t, b, k, 0, 60)
	if b.nCheckpoints.Load() == 0 {
		t.Fatal("no checkpoint: the test wants part of the trail in Badger")
	}
	if err := b.Delete(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	saveN(t, b, k, 0, 3)
	checkInstance(t, b, k, 3, 3)
	last, err := b.Audit(context.Background(), k, 2)
	if err != nil || len(last) != 2 || last[0].Version != 2 || last[1].Version != 3 {
		t.Fatalf("last two: %+v %v", last, err)
	}
}

// TestBadRecordFailsOnlyItsSave puts a save whose snapshot is not JSON in
// one batch with good ones: it alone fails.
func TestBadRecordFailsOnlyItsSave(t *testing.T) {
	b, err := OpenBadger(t.TempDir(), BadgerOptions{GCInterval: -1, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// The first batch waits in its sync until the others are queued, so
	// that they make the next batch together.
	release := make(chan struct{})
	first := true
	for _, w := range b.logs {
		w.fdatasync = func(*os.File) error {
			if first {
				first = false
				<-release
			}
			return nil
		}
	}
	ctx := context.Background()
	save := func(h, snap string) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := b.Save(ctx, Key{"m", h}, Record{Snapshot: []byte(snap)}, 0)
			done <- err
		}()
		return done
	}
	queued := func() int {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queue)
	}
	lead := save("lead", `{}`)
	for queued() != 0 || !leading(b) {
		runtime.Gosched()
	}
	good1, bad, good2 := save("good1", `{"a":1}`), save("bad", `{"a":`), save("good2", `{"b":2}`)
	for queued() != 3 {
		runtime.Gosched()
	}
	close(release)
	for name, c := range map[string]<-chan error{"lead": lead, "good1": good1, "good2": good2} {
		if err := <-c; err != nil {
			t.Errorf("save %s: %v", name, err)
		}
	}
	if err := <-bad; err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("bad save: %v, want an invalid-JSON error", err)
	}
	if _, _, err := b.Load(ctx, Key{"m", "bad"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("bad record stored: %v", err)
	}
	if rec, _, err := b.Load(ctx, Key{"m", "good2"}); err != nil || string(rec.Snapshot) != `{"b":2}` {
		t.Errorf("good2: %s %v", rec.Snapshot, err)
	}
}

// leading reports whether a saver is writing a batch.
func leading(b *Badger) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.leading
}

// TestFullLogWaitsForCheckpoint fills the second log while the first one's
// checkpoint is held back: the save that does not fit waits for the
// checkpoint, then goes on, and no save is lost.
func TestFullLogWaitsForCheckpoint(t *testing.T) {
	dir := t.TempDir()
	b, err := OpenBadger(dir, BadgerOptions{GCInterval: -1, NoSync: true, CheckpointBytes: 4 << 10, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	started, release, waiting := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once, waitOnce sync.Once
	b.beforeCheckpoint = func() {
		once.Do(func() {
			close(started)
			<-release
		})
	}
	b.waitCheckpoint = func() { waitOnce.Do(func() { close(waiting) }) }
	// Records of 1 MiB: the log (16 MiB) is full after about 16 of them.
	pad := strings.Repeat("x", 1<<20)
	snap := func(i int) string { return `{"i":` + strconv.Itoa(i) + `,"pad":"` + pad + `"}` }
	const n = 40
	saved := make(chan error, 1)
	go func() {
		for i := range n {
			if _, err := b.Save(context.Background(), Key{"m", strconv.Itoa(i)}, Record{Snapshot: []byte(snap(i))}, 0); err != nil {
				saved <- fmt.Errorf("save %d: %w", i, err)
				return
			}
		}
		saved <- nil
	}()
	select {
	case <-started:
	case err := <-saved:
		t.Fatalf("the saves ended before the first checkpoint began: %v", err)
	}
	select {
	case <-waiting:
	case err := <-saved:
		t.Fatalf("the saves ended while the first checkpoint was held: %v", err)
	}
	close(release)
	if err := <-saved; err != nil {
		t.Fatal(err)
	}
	check := func(s *Badger) {
		t.Helper()
		for i := range n {
			rec, v, err := s.Load(context.Background(), Key{"m", strconv.Itoa(i)})
			if err != nil || v != 1 || string(rec.Snapshot) != snap(i) {
				t.Fatalf("record %d: %d bytes at %d, %v", i, len(rec.Snapshot), v, err)
			}
		}
	}
	check(b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := OpenBadger(dir, BadgerOptions{GCInterval: -1, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	check(r)
}
