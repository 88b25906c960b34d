//go:build linux

package badger

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stategate/stategate/store"
)

var fullDisk = flag.Bool("store.fulldisk", false, "fill a small tmpfs (mounted by the test: needs root)")

// smallDisk mounts a tmpfs of size bytes for a test, if asked and root.
func smallDisk(t *testing.T, size int64) string {
	t.Helper()
	if !*fullDisk {
		t.Skip("fills a disk: run with -store.fulldisk (as root)")
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fill appends to a file until the
// disk has about left bytes free.
func fill(t *testing.T, path string, left int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := []byte(strings.Repeat("f", 1<<20))
	for {
		free, err := freeSpace(filepath.Dir(path))
		if err != nil {
			t.Fatal(err)
		}
		n := min(int64(len(block)), free-left)
		if n <= 0 {
			return
		}
		if _, err := f.Write(block[:n]); err != nil {
			return // the disk is full
		}
	}
}

// incompressible returns n bytes of letters and digits at random (a
// record Badger's compression cannot shrink).
func incompressible(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return string(b)
}

// TestFullDisk saves into a store on a 256 MiB tmpfs from 8 savers,
// records of 36 KiB that do not compress, each a new instance, until the
// reserve stops them, and goes on trying for two seconds while Badger
// flushes and compacts: the process does not die (Badger's memory-mapped
// files take a SIGBUS on a full disk: in runs like this one with a reserve
// of 32 MiB, it died so in a compaction), saves fail with ErrNoSpace and
// change
// nothing, reads go on, and once space is freed saves succeed again. On a
// disk with no space left, the store does not open for writing (a clear
// error, no crash), and opens to read.
func TestFullDisk(t *testing.T) {
	disk := smallDisk(t, 256<<20)
	ctx := context.Background()
	dir := filepath.Join(disk, "store")
	b := openTest(t, dir, Options{})
	filler := filepath.Join(disk, "filler")
	fill(t, filler, DefaultMinFree+64<<20)
	var lowest atomic.Int64 // the least free space seen
	lowest.Store(1 << 62)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
			if f, err := freeSpace(disk); err == nil && f < lowest.Load() {
				lowest.Store(f)
			}
		}
	}()
	pad := incompressible(40 << 10)
	var mu sync.Mutex
	saved := map[store.Key]bool{}
	refused := 0
	var firstRefusal time.Time
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				k := store.Key{Machine: "m", Handle: fmt.Sprint(g, "-", i)}
				_, err := b.Save(ctx, k, store.Record{Snapshot: []byte(`{"pad":"` + pad[i%4096:] + `"}`), Audit: &store.AuditEntry{Tool: "t"}}, 0)
				mu.Lock()
				switch {
				case err == nil:
					saved[k] = true
				case errors.Is(err, store.ErrNoSpace):
					refused++
					if firstRefusal.IsZero() {
						firstRefusal = time.Now()
					}
				default:
					mu.Unlock()
					t.Error(err)
					return
				}
				done := !firstRefusal.IsZero() && time.Since(firstRefusal) > 2*time.Second
				mu.Unlock()
				if done {
					return
				}
				if err != nil {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	free, _ := freeSpace(disk)
	t.Logf("%d saves, then %d refused; %d MiB free, at least %d MiB free all along (reserve %d MiB)",
		len(saved), refused, free>>20, lowest.Load()>>20, DefaultMinFree>>20)
	if len(saved) == 0 || refused == 0 {
		t.Fatalf("saved %d, refused %d", len(saved), refused)
	}
	// Refused saves changed nothing; reads go on.
	for g := range 8 {
		for i := 0; ; i++ {
			k := store.Key{Machine: "m", Handle: fmt.Sprint(g, "-", i)}
			_, v, err := b.Load(ctx, k)
			if !saved[k] {
				if !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("%v, refused, is stored: %d %v", k, v, err)
				}
				break
			}
			if err != nil || v != 1 {
				t.Fatalf("%v at %d, %v", k, v, err)
			}
		}
	}
	// Space freed: saves go on.
	os.Remove(filler)
	k := store.Key{Machine: "m", Handle: "after"}
	if _, err := b.Save(ctx, k, store.Record{Snapshot: []byte(`{}`)}, 0); err != nil {
		t.Fatalf("save once space is freed: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// A disk with nothing left: no open for writing, reading is fine.
	fill(t, filler, 0)
	if _, err := Open(dir, Options{Logger: quietLog()}); !errors.Is(err, store.ErrNoSpace) {
		t.Fatalf("open on a full disk: %v", err)
	}
	r := openTest(t, dir, Options{ReadOnly: true})
	if _, v, err := r.Load(ctx, k); err != nil || v != 1 {
		t.Fatalf("read-only on a full disk: %d %v", v, err)
	}
	r.Close()
	os.Remove(filler)
	b = openTest(t, dir, Options{})
	defer b.Close()
	if _, err := b.Save(ctx, k, store.Record{Snapshot: []byte(`{}`)}, 1); err != nil {
		t.Fatalf("save after reopening: %v", err)
	}
}
