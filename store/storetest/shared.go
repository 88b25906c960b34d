package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stategate/stategate/store"
)

// SharedEngine is a shared store engine under test (store.Shared): two
// stores on one database are two replicas.
type SharedEngine struct {
	// Open returns two stores on one new, empty database, as two server
	// processes open it (their runs differ). The suite closes them.
	Open func(t *testing.T) (a, b store.Shared)
	// CutFeed cuts the change feeds of a and b (as a lost connection
	// does), for them to tell Resync once they are back.
	CutFeed func(t *testing.T, a, b store.Shared)
}

// RunShared runs the shared stores' contract on an engine, each test in
// a subtest of its own on stores of their own: saves racing across
// replicas lose nothing, the change feed tells every replica every
// change in commit order (and Resync after a cut), claims of timers never
// overlap and end with their lease or a save, open intents are kept, and
// runs are alive until they expire or close. It knows nothing of any
// engine but through store.Shared.
func RunShared(t *testing.T, e SharedEngine) {
	if e.Open == nil {
		t.Fatal("storetest: SharedEngine.Open is nil")
	}
	for _, c := range []struct {
		name string
		test func(t *testing.T, e SharedEngine)
	}{
		{"RacingReplicas", testRacingReplicas},
		{"FeedInCommitOrder", testFeedInCommitOrder},
		{"Resync", testResync},
		{"LoadIfChanged", testLoadIfChanged},
		{"OpenIntent", testOpenIntent},
		{"ClaimsDoNotOverlap", testClaimsDoNotOverlap},
		{"ClaimsEnd", testClaimsEnd},
		{"Grace", testGrace},
		{"Runs", testRuns},
		{"OppositeOrders", testOppositeOrders},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, e) })
	}
}

func openShared(t *testing.T, e SharedEngine) (a, b store.Shared) {
	t.Helper()
	a, b = e.Open(t)
	t.Cleanup(func() {
		for _, s := range []store.Shared{a, b} {
			if err := s.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		}
	})
	if a.Run() == "" || a.Run() == b.Run() {
		t.Fatalf("the replicas' runs: %q and %q", a.Run(), b.Run())
	}
	return a, b
}

// feedWait bounds the wait for a change the feed must tell: far more
// than it takes, on a loaded machine too.
const feedWait = 30 * time.Second

// collector keeps what a store's feed tells.
type collector struct{ ch chan store.Change }

func watch(t *testing.T, s store.Shared) *collector {
	c := &collector{ch: make(chan store.Change, 1<<14)}
	cancel := s.Watch(func(ch store.Change) { c.ch <- ch })
	t.Cleanup(cancel)
	return c
}

// next returns the next change told.
func (c *collector) next(t *testing.T) store.Change {
	t.Helper()
	select {
	case ch := <-c.ch:
		return ch
	case <-time.After(feedWait):
		t.Fatalf("the feed told nothing in %v", feedWait)
		return store.Change{}
	}
}

// until returns the changes told up to and including the first of key k
// at version v.
func (c *collector) until(t *testing.T, k store.Key, v uint64) []store.Change {
	t.Helper()
	var out []store.Change
	for {
		ch := c.next(t)
		out = append(out, ch)
		if ch.Key == k && ch.Version == v && !ch.Resync {
			return out
		}
	}
}

// increment adds one to the counter a key holds, again until no other
// save came between its load and its save.
func increment(ctx context.Context, s store.Store, k store.Key) error {
	for {
		rec, v, err := s.Load(ctx, k)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		n, _ := strconv.Atoi(string(rec.Snapshot))
		_, err = s.Save(ctx, k, store.Record{Snapshot: []byte(strconv.Itoa(n + 1)), Audit: &store.AuditEntry{Tool: "inc"}}, v)
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
}

// testRacingReplicas: increments of one counter by both replicas at once
// lose none, and its trail has one entry per increment.
func testRacingReplicas(t *testing.T, e SharedEngine) {
	a, b := openShared(t, e)
	ctx := context.Background()
	k := store.Key{Machine: "counter", Handle: "1"}
	const workers, each = 16, 10
	var wg sync.WaitGroup
	for i := range workers {
		s := []store.Shared{a, b}[i%2]
		wg.Go(func() {
			for range each {
				if err := increment(ctx, s, k); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	rec, v, err := b.Load(ctx, k)
	if err != nil || string(rec.Snapshot) != strconv.Itoa(workers*each) || v != workers*each {
		t.Fatalf("%s increments kept at version %d, %v; want %d", rec.Snapshot, v, err, workers*each)
	}
	trail, err := a.Audit(ctx, k, 0)
	if err != nil || len(trail) != workers*each || trail[len(trail)-1].Version != v {
		t.Fatalf("trail: %d entries, %v", len(trail), err)
	}
}

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func timerAt(due time.Time) []store.Timer {
	return []store.Timer{{ID: "t", Event: map[string]any{"type": "T"}, Due: due}, {ID: "u", Event: map[string]any{"type": "U"}, Due: due.Add(time.Hour)}}
}

// testFeedInCommitOrder: both replicas' feeds tell every change of
// either (saves, with their version, earliest timer, open intent and
// run; deletions), in one order, the order of a key's versions; a save
// refused tells nothing.
func testFeedInCommitOrder(t *testing.T, e SharedEngine) {
	a, b := openShared(t, e)
	ctx := context.Background()
	fa, fb := watch(t, a), watch(t, b)
	k, own, gone := store.Key{Machine: "m", Handle: "k\x00\xff"}, store.Key{Machine: "m", Handle: "own"}, store.Key{Machine: "m", Handle: "gone"}
	var want []store.Change
	var v uint64
	for i := range 5 {
		rec := store.Record{Snapshot: []byte(`{}`), Audit: &store.AuditEntry{Tool: "t"}}
		c := store.Change{Key: k, Version: v + 1, Run: b.Run()}
		if i%2 == 0 {
			rec.Timers = timerAt(t0.Add(time.Duration(i) * time.Second))
			c.NextDue = t0.Add(time.Duration(i) * time.Second)
		}
		switch i {
		case 2:
			rec.Audit.Intent = &store.Intent{Event: "DONE", Run: b.Run()}
		case 4:
			rec.Audit.Settles = 3
		}
		if i == 2 || i == 3 {
			c.Intent = store.OpenIntent{Version: 3, Run: b.Run()}
		}
		var err error
		if v, err = b.Save(ctx, k, rec, v); err != nil {
			t.Fatal(err)
		}
		want = append(want, c)
		if i == 1 {
			if _, err := a.Save(ctx, own, store.Record{Snapshot: []byte(`1`)}, 0); err != nil {
				t.Fatal(err)
			}
			want = append(want, store.Change{Key: own, Version: 1, Run: a.Run()})
		}
	}
	if _, err := a.Save(ctx, k, store.Record{Snapshot: []byte(`{}`)}, 1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a stale save: %v", err)
	}
	if _, err := a.Save(ctx, gone, store.Record{Snapshot: []byte(`{}`)}, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, store.Key{Machine: "m", Handle: "never"}); err != nil {
		t.Fatal(err)
	}
	want = append(want, store.Change{Key: gone, Version: 1, Run: a.Run()}, store.Change{Key: gone, Run: b.Run()})
	// A last save: the feed told everything before it once it tells it.
	if _, err := a.Save(ctx, own, store.Record{Snapshot: []byte(`2`)}, 1); err != nil {
		t.Fatal(err)
	}
	want = append(want, store.Change{Key: own, Version: 2, Run: a.Run()})
	for name, f := range map[string]*collector{"a": fa, "b": fb} {
		got := f.until(t, own, 2)
		if len(got) != len(want) {
			t.Fatalf("%s's feed told %d changes, want %d:\n%v", name, len(got), len(want), got)
		}
		for i, c := range got {
			if !sameChange(c, want[i]) {
				t.Fatalf("%s's feed: change %d is %+v, want %+v", name, i, c, want[i])
			}
		}
	}
}

func sameChange(a, b store.Change) bool {
	return a.Key == b.Key && a.Version == b.Version && a.NextDue.Equal(b.NextDue) && a.Intent == b.Intent && a.Run == b.Run && a.Resync == b.Resync
}

// testResync: a feed cut tells Resync once it is back, then the changes
// that follow.
func testResync(t *testing.T, e SharedEngine) {
	if e.CutFeed == nil {
		t.Skip("the engine cannot cut its feed")
	}
	a, b := openShared(t, e)
	ctx := context.Background()
	fa, fb := watch(t, a), watch(t, b)
	e.CutFeed(t, a, b)
	for name, f := range map[string]*collector{"a": fa, "b": fb} {
		if c := f.next(t); !c.Resync {
			t.Fatalf("%s's feed told %+v after the cut, want Resync", name, c)
		}
	}
	k := store.Key{Machine: "m", Handle: "after"}
	if _, err := b.Save(ctx, k, store.Record{Snapshot: []byte(`{}`)}, 0); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]*collector{"a": fa, "b": fb} {
		for _, c := range f.until(t, k, 1) {
			if c.Key != k && !c.Resync {
				t.Fatalf("%s's feed told %+v", name, c)
			}
		}
	}
}

// testLoadIfChanged: the record comes only when the version is not the
// caller's; the version, open intent and earliest timer always.
func testLoadIfChanged(t *testing.T, e SharedEngine) {
	a, b := openShared(t, e)
	ctx := context.Background()
	k := store.Key{Machine: "m", Handle: "h"}
	if _, err := a.LoadIfChanged(ctx, k, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an instance never stored: %v", err)
	}
	v, err := a.Save(ctx, k, store.Record{Snapshot: []byte(`{"n":1}`), MachineVersion: "mv", Timers: timerAt(t0)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, have := range []uint64{0, 7} {
		l, err := b.LoadIfChanged(ctx, k, have)
		if err != nil || !l.Changed || l.Version != v || string(l.Record.Snapshot) != `{"n":1}` || l.Record.MachineVersion != "mv" ||
			len(l.Record.Timers) != 2 || !l.NextDue.Equal(t0) || l.Intent != (store.OpenIntent{}) {
			t.Fatalf("LoadIfChanged(%d): %+v, %v", have, l, err)
		}
	}
	l, err := b.LoadIfChanged(ctx, k, v)
	if err != nil || l.Changed || l.Version != v || l.Record.Snapshot != nil || l.Record.Timers != nil || !l.NextDue.Equal(t0) {
		t.Fatalf("LoadIfChanged at the version stored: %+v, %v", l, err)
	}
	if v, err = b.Save(ctx, k, store.Record{Snapshot: []byte(`{"n":2}`)}, v); err != nil {
		t.Fatal(err)
	}
	if l, err := a.LoadIfChanged(ctx, k, v-1); err != nil || !l.Changed || string(l.Record.Snapshot) != `{"n":2}` || !l.NextDue.IsZero() {
		t.Fatalf("after another's save: %+v, %v", l, err)
	}
	if err := b.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	if _, err := a.LoadIfChanged(ctx, k, v); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a deleted instance: %v", err)
	}
}

// testOpenIntent: a save whose entry is an intent opens it (the last
// one wins), a save that settles it closes it, other saves keep it.
func testOpenIntent(t *testing.T, e SharedEngine) {
	a, b := openShared(t, e)
	ctx := context.Background()
	k := store.Key{Machine: "pay", Handle: "1"}
	steps := []struct {
		by   store.Shared
		a    *store.AuditEntry
		want store.OpenIntent
	}{
		{a, &store.AuditEntry{Tool: "start"}, store.OpenIntent{}},
		{a, &store.AuditEntry{Tool: "pay", Intent: &store.Intent{Event: "PAID", Run: "run-a"}}, store.OpenIntent{Version: 2, Run: "run-a"}},
		{b, &store.AuditEntry{Tool: "note"}, store.OpenIntent{Version: 2, Run: "run-a"}},
		{b, nil, store.OpenIntent{Version: 2, Run: "run-a"}},
		{b, &store.AuditEntry{Tool: "other", Settles: 1}, store.OpenIntent{Version: 2, Run: "run-a"}},
		{a, &store.AuditEntry{Tool: "pay", Settles: 2}, store.OpenIntent{}},
		{b, &store.AuditEntry{Tool: "pay", Intent: &store.Intent{Event: "PAID", Run: "run-b"}}, store.OpenIntent{Version: 7, Run: "run-b"}},
		{a, &store.AuditEntry{Tool: "pay", Intent: &store.Intent{Event: "PAID", Run: "run-a\x00"}}, store.OpenIntent{Version: 8, Run: "run-a\x00"}},
	}
	var v uint64
	for i, s := range steps {
		var err error
		if v, err = s.by.Save(ctx, k, store.Record{Snapshot: []byte(`{}`), Audit: s.a}, v); err != nil {
			t.Fatal(err)
		}
		for _, r := range []store.Shared{a, b} {
			if l, err := r.LoadIfChanged(ctx, k, v); err != nil || l.Intent != s.want {
				t.Fatalf("step %d: open intent %+v, %v; want %+v", i, l.Intent, err, s.want)
			}
		}
	}
	if u := store.Unsettled(must(a.Audit(ctx, k, 0))); len(u) != 2 || u[0].Version != 7 || u[1].Version != 8 {
		t.Fatalf("the trail's unsettled intents: %+v", u)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// dueInstances saves n instances by s, instance i with a timer due at
// t0+i ms, and returns their keys.
func dueInstances(t *testing.T, s store.Shared, prefix string, n int) []store.Key {
	t.Helper()
	ctx := context.Background()
	var keys []store.Key
	for i := range n {
		k := store.Key{Machine: "timer", Handle: fmt.Sprintf("%s%03d", prefix, i)}
		if _, err := s.Save(ctx, k, store.Record{Snapshot: []byte(`{}`), Timers: timerAt(t0.Add(time.Duration(i) * time.Millisecond))}, 0); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	return keys
}

// claimAll claims with workers goroutines on each store until no claim
// finds anything, and returns how often each instance was claimed.
func claimAll(t *testing.T, req store.ClaimRequest, workers int, stores ...store.Shared) map[store.Key]int {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	got := map[store.Key]int{}
	var wg sync.WaitGroup
	for _, s := range stores {
		for range workers {
			wg.Go(func() {
				for {
					cs, err := s.ClaimTimers(ctx, req)
					if err != nil {
						t.Error(err)
						return
					}
					if len(cs) == 0 {
						return
					}
					if len(cs) > req.Max {
						t.Errorf("a claim of at most %d took %d", req.Max, len(cs))
					}
					for i, c := range cs {
						if i > 0 && c.NextDue.Before(cs[i-1].NextDue) || !c.Until.Equal(req.Now.Add(req.Lease)) || c.Version != 1 {
							t.Errorf("claim %d of %d: %+v", i, len(cs), c)
						}
					}
					mu.Lock()
					for _, c := range cs {
						got[c.Key]++
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	return got
}

// testClaimsDoNotOverlap: claims racing on two replicas take each
// instance with a timer due once, none with a timer not due yet, and,
// once their leases end, all of them once again.
func testClaimsDoNotOverlap(t *testing.T, e SharedEngine) {
	a, b := openShared(t, e)
	ctx := context.Background()
	keys := dueInstances(t, b, "i", 120)
	if at, ok, err := a.NextDue(ctx); err != nil || !ok || !at.Equal(t0) {
		t.Fatalf("NextDue: %v %v %v, want %v", at, ok, err, t0)
	}
	req := store.ClaimRequest{Now: t0.Add(99 * time.Millisecond), Lease: time.Minute, Max: 7}
	check := func(got map[store.Key]int) {
		t.Helper()
		for i, k := range keys {
			want := 0
			if i < 100 {
				want = 1
			}
			if got[k] != want {
				t.Fatalf("instance %d (due at +%d ms) claimed %d times, want %d", i, i, got[k], want)
			}
		}
		if len(got) != 100 {
			t.Fatalf("%d instances claimed", len(got))
		}
	}
	check(claimAll(t, req, 4, a, b))
	if cs, err := b.ClaimTimers(ctx, req); err != nil || len(cs) != 0 {
		t.Fatalf("a claim while the leases hold: %+v %v", cs, err)
	}
	// The earliest claimable now: the first timer not claimed (due at
	// +100 ms), before the leases end.
	if at, ok, err := a.NextDue(ctx); err != nil || !ok || !at.Equal(t0.Add(100*time.Millisecond)) {
		t.Fatalf("NextDue after the claims: %v %v %v", at, ok, err)
	}
	// Once the leases end, every instance is claimed (once) again: those
	// due since too.
	req.Now = req.Now.Add(time.Minute + time.Millisecond)
	got := claimAll(t, req, 4, a, b)
	for i, k := range keys {
		if got[k] != 1 {
			t.Fatalf("instance %d claimed %d times once the leases ended", i, got[k])
		}
	}
}

// testClaimsEnd: a save of a claimed instance ends its lease (the fire
// itself, or any other save), and so does the close of the replica that
// claimed it.
func testClaimsEnd(t *testing.T, e SharedEngine) {
	a, b := openShared(t, e)
	ctx := context.Background()
	keys := dueInstances(t, a, "c", 3)
	req := store.ClaimRequest{Now: t0.Add(time.Second), Lease: time.Minute, Max: 10}
	cs, err := a.ClaimTimers(ctx, req)
	if err != nil || len(cs) != 3 {
		t.Fatalf("claims: %+v %v", cs, err)
	}
	// Fired: its earliest timer gone (the next due in an hour).
	if _, err := a.Save(ctx, keys[0], store.Record{Snapshot: []byte(`{}`), Timers: timerAt(t0)[1:]}, 1); err != nil {
		t.Fatal(err)
	}
	// Saved by another replica, its timers kept.
	if _, err := b.Save(ctx, keys[1], store.Record{Snapshot: []byte(`{}`), Timers: timerAt(t0.Add(time.Millisecond))}, 1); err != nil {
		t.Fatal(err)
	}
	cs, err = b.ClaimTimers(ctx, req)
	if err != nil || len(cs) != 1 || cs[0].Key != keys[1] || cs[0].Version != 2 {
		t.Fatalf("claims after the saves: %+v %v", cs, err)
	}
	// keys[2] is a's until it closes.
	if cs, err := b.ClaimTimers(ctx, store.ClaimRequest{Now: req.Now, Lease: time.Minute, Max: 10}); err != nil || len(cs) != 0 {
		t.Fatalf("claims of a's: %+v %v", cs, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	cs, err = b.ClaimTimers(ctx, req)
	if err != nil || len(cs) != 1 || cs[0].Key != keys[2] {
		t.Fatalf("claims once a closed: %+v %v", cs, err)
	}
	// The earliest claimable: when b's leases end (before keys[0]'s next
	// timer, in an hour).
	if at, ok, err := b.NextDue(ctx); err != nil || !ok || !at.Equal(req.Now.Add(req.Lease)) {
		t.Fatalf("NextDue: %v %v %v, want %v", at, ok, err, req.Now.Add(req.Lease))
	}
}

// testGrace: the replica that saved an instance claims its timers at
// once; another only once they are Grace overdue.
func testGrace(t *testing.T, e SharedEngine) {
	a, b := openShared(t, e)
	ctx := context.Background()
	keys := dueInstances(t, a, "g", 2)
	grace := 10 * time.Second
	if cs, err := b.ClaimTimers(ctx, store.ClaimRequest{Now: t0.Add(grace / 2), Lease: time.Minute, Max: 10, Grace: grace}); err != nil || len(cs) != 0 {
		t.Fatalf("another's claim within the grace: %+v %v", cs, err)
	}
	cs, err := a.ClaimTimers(ctx, store.ClaimRequest{Now: t0, Lease: time.Minute, Max: 10, Grace: grace})
	if err != nil || len(cs) != 1 || cs[0].Key != keys[0] {
		t.Fatalf("the owner's claim: %+v %v", cs, err)
	}
	cs, err = b.ClaimTimers(ctx, store.ClaimRequest{Now: t0.Add(grace).Add(time.Millisecond), Lease: time.Minute, Max: 10, Grace: grace})
	if err != nil || len(cs) != 1 || cs[0].Key != keys[1] {
		t.Fatalf("another's claim past the grace: %+v %v", cs, err)
	}
}

// testRuns: a run is alive from its registration until it expires
// (renewed by registering again) or its store closes.
func testRuns(t *testing.T, e SharedEngine) {
	a, b := openShared(t, e)
	ctx := context.Background()
	live := func(at time.Time, want ...string) {
		t.Helper()
		slices.Sort(want)
		for _, s := range []store.Shared{a, b} {
			if got, err := s.Live(ctx, at); err != nil || !slices.Equal(got, want) {
				t.Fatalf("live at %v: %v %v, want %v", at.Sub(t0), got, err, want)
			}
		}
	}
	live(t0)
	if err := a.RegisterRun(ctx, t0, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := b.RegisterRun(ctx, t0, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	live(t0, a.Run(), b.Run())
	live(t0.Add(15*time.Second), b.Run())
	if err := a.RegisterRun(ctx, t0.Add(12*time.Second), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	live(t0.Add(15*time.Second), a.Run(), b.Run())
	live(t0.Add(21*time.Second), a.Run())
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Live(ctx, t0.Add(15*time.Second)); err != nil || !slices.Equal(got, []string{b.Run()}) {
		t.Fatalf("live once a closed: %v %v", got, err)
	}
}

// testOppositeOrders: two replicas saving the same instances at once,
// one in ascending order and the other in descending, in batches as
// large as their saves make, never deadlock: every save is stored or
// refused as a conflict, and each instance ends at the version of the
// saves stored.
func testOppositeOrders(t *testing.T, e SharedEngine) {
	a, b := openShared(t, e)
	ctx := context.Background()
	const n, rounds = 50, 6
	keys := make([]store.Key, n)
	for i := range keys {
		keys[i] = store.Key{Machine: "m", Handle: fmt.Sprintf("k%02d", i)}
	}
	var mu sync.Mutex
	stored := map[store.Key]int{}
	var wg sync.WaitGroup
	for side, s := range []store.Shared{a, b} {
		wg.Go(func() {
			for range rounds {
				var round sync.WaitGroup
				for j := range n {
					k := keys[j]
					if side == 1 {
						k = keys[n-1-j]
					}
					round.Go(func() {
						if err := increment(ctx, s, k); err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						stored[k]++
						mu.Unlock()
					})
				}
				round.Wait()
			}
		})
	}
	wg.Wait()
	for _, k := range keys {
		rec, v, err := a.Load(ctx, k)
		if err != nil || v != uint64(stored[k]) || string(rec.Snapshot) != strconv.Itoa(stored[k]) || stored[k] != 2*rounds {
			t.Fatalf("%s: %s at %d, %v; %d increments", k.Handle, rec.Snapshot, v, err, stored[k])
		}
	}
}
