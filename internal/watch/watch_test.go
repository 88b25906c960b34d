package watch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// wait is how long a test waits for what it awaits before it fails; the
// tests wait on signals, so it is only the bound of a broken run.
const wait = 10 * time.Second

// run is a watcher run by a test: its debounce never ends a burst, the
// test does (settle); seen tells it of every event, in order.
type run struct {
	t      *testing.T
	calls  chan struct{}     // one per call of fn
	seen   chan seenEvent    // every event Run handled
	settle chan struct{}     // ends a burst
	names  map[string][]bool // the events seen so far, by name: counts
	dir    string            // where the sentinels go
	n      int               // sentinels made
}

type seenEvent struct {
	name   string
	counts bool
}

func start(t *testing.T, w *Watcher, dir string) *run {
	t.Helper()
	r := &run{t: t, calls: make(chan struct{}, 100), seen: make(chan seenEvent, 10000), settle: make(chan struct{}), names: map[string][]bool{}, dir: dir}
	w.seen = func(name string, counts bool) { r.seen <- seenEvent{name, counts} }
	w.settle = r.settle
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, func() { r.calls <- struct{}{} })
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return r
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// until reads the events Run handled until one of name.
func (r *run) until(name string) seenEvent {
	r.t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case ev := <-r.seen:
			r.names[ev.name] = append(r.names[ev.name], ev.counts)
			if ev.name == name {
				return ev
			}
		case <-timeout:
			r.t.Fatalf("no event for %s", name)
		}
	}
}

// settled ends the burst, and returns how many calls of fn there were
// since the last look. A sentinel (a hidden folder, made in one event,
// which counts as a change in a tree and not in a file's folder) is seen
// first: the events before it were handled. The second settle is taken
// only once the first one's call has returned.
func (r *run) settled() int {
	r.t.Helper()
	r.n++
	sentinel := filepath.Join(r.dir, fmt.Sprintf(".sentinel-%d", r.n))
	if err := os.Mkdir(sentinel, 0o755); err != nil {
		r.t.Fatal(err)
	}
	r.until(sentinel)
	for range 2 {
		select {
		case r.settle <- struct{}{}:
		case <-time.After(wait):
			r.t.Fatal("Run does not run")
		}
	}
	return r.count()
}

func (r *run) count() int {
	n := 0
	for {
		select {
		case <-r.calls:
			n++
		default:
			return n
		}
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// atomicSave writes a file as editors do: a new file renamed over it.
func atomicSave(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	write(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestFileBurstCallsOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "upstreams.json")
	w, err := NewFile(file, time.Hour, quiet())
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, w, dir)

	for i := range 50 {
		write(t, file, fmt.Sprint(i))
	}
	if n := r.settled(); n != 1 {
		t.Fatalf("a burst of 50 writes: %d calls, want 1", n)
	}
	if n := r.settled(); n != 0 {
		t.Fatalf("no change since: %d calls, want 0", n)
	}

	// An atomic save is a change of the file; the temporary file's events
	// are not.
	atomicSave(t, file, "saved")
	if n := r.settled(); n != 1 {
		t.Fatalf("an atomic save: %d calls, want 1", n)
	}
	if c := r.names[file]; len(c) == 0 || !c[len(c)-1] {
		t.Fatalf("the file renamed over: %v", c)
	}
	tmp := filepath.Join(dir, ".tmp-upstreams.json")
	if c := r.names[tmp]; len(c) == 0 || c[0] {
		t.Fatalf("the temporary file's events: %v", c)
	}

	// Other files of the folder are not the file.
	notes := filepath.Join(dir, "notes.txt")
	write(t, notes, "x")
	if n := r.settled(); n != 0 {
		t.Fatalf("another file written: %d calls, want 0", n)
	}
	if c := r.names[notes]; len(c) == 0 || c[0] {
		t.Fatalf("notes.txt's events: %v", c)
	}

	// Removed.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if n := r.settled(); n != 1 {
		t.Fatalf("removed: %d calls, want 1", n)
	}
}

func TestTree(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	deep := filepath.Join(dir, "old", "deep", "m.json")
	if err := os.MkdirAll(filepath.Dir(deep), 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := NewTree(dir, time.Hour, quiet())
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, w, dir)

	// A burst of writes in folders that were there: one call (the
	// sentinel is one more change of the burst).
	for i := range 20 {
		write(t, filepath.Join(dir, fmt.Sprintf("m%d.json", i%5)), fmt.Sprint(i))
		write(t, deep, fmt.Sprint(i))
	}
	if n := r.settled(); n != 1 {
		t.Fatalf("a burst of writes: %d calls, want 1", n)
	}
	if c := r.names[deep]; len(c) == 0 || !c[0] {
		t.Fatalf("a subfolder's file: %v", c)
	}

	// A new subfolder, and folders made in it at once: their files are
	// seen.
	nested := filepath.Join(dir, "new", "a", "b")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	r.until(filepath.Join(dir, "new")) // Run has watched the new folders
	m := filepath.Join(nested, "m.json")
	atomicSave(t, m, "{}")
	if n := r.settled(); n != 1 {
		t.Fatalf("a new subfolder and its file: %d calls, want 1", n)
	}
	if c := r.names[m]; len(c) == 0 || !c[0] {
		t.Fatalf("a new subfolder's file: %v", c)
	}

	// What is in a hidden folder or node_modules is not watched; the
	// folder itself is.
	for _, name := range []string{".git", "node_modules"} {
		skipped := filepath.Join(dir, name)
		if err := os.Mkdir(skipped, 0o755); err != nil {
			t.Fatal(err)
		}
		r.until(skipped)
		write(t, filepath.Join(skipped, "HEAD"), "x")
		r.settled()
		if c := r.names[filepath.Join(skipped, "HEAD")]; len(c) != 0 {
			t.Fatalf("a file in %s seen: %v", name, c)
		}
		if c := r.names[skipped]; len(c) == 0 || !c[0] {
			t.Fatalf("the creation of %s: %v", name, c)
		}
	}
}

// TestRealDebounce runs the debounce itself: a burst ends by the clock.
// (How many calls a burst makes then depends on the machine's speed, so
// only the call is awaited.)
func TestRealDebounce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan struct{}, 100)
	w, err := NewFile(file, time.Millisecond, quiet())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, func() { calls <- struct{}{} })
	}()
	atomicSave(t, file, "x")
	select {
	case <-calls:
	case <-time.After(wait):
		t.Fatal("no call after a change")
	}
	cancel()
	<-done
}

func TestSetupErrors(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing")
	if err := Tree(context.Background(), missing, 0, quiet(), func() {}); err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Fatalf("a missing folder: %v", err)
	}
	if err := File(context.Background(), filepath.Join(missing, "f.json"), 0, quiet(), func() {}); err == nil {
		t.Fatal("a file in a missing folder: no error")
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}
