package badger

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4/table"

	"github.com/stategate/stategate/store"
)

// richStore saves, with small tables (so that flushes make tables), 100
// instances five times each, some with records large enough for the
// value log. It returns the folder closed cleanly, another that a process
// killed with SIGKILL left after the same saves, and the records as
// saved.
func richStore(t *testing.T, machine string) (closed, killed string, want map[store.Key]string) {
	t.Helper()
	closed = t.TempDir()
	b := openTest(t, closed, Options{SmallTables: true, NoSync: true})
	want = fillRich(t, b, machine)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return closed, killedStore(t, machine), want
}

func fillRich(t testing.TB, b *Store, machine string) map[store.Key]string {
	want := map[store.Key]string{}
	ctx := context.Background()
	for i := range 100 {
		k := store.Key{Machine: machine, Handle: "h" + strconv.Itoa(i)}
		pad := strings.Repeat("p", 900)
		if i%8 == 0 {
			pad = strings.Repeat("V", 20<<10) // over the value threshold
		}
		var v uint64
		for j := range 5 {
			snap := `{"i":` + strconv.Itoa(i) + `,"j":` + strconv.Itoa(j) + `,"pad":"` + pad + `"}`
			var err error
			if v, err = b.Save(ctx, k, store.Record{Snapshot: []byte(snap), Audit: &store.AuditEntry{Tool: "t" + strconv.Itoa(j)}}, v); err != nil {
				t.Fatal(err)
			}
			want[k] = snap
		}
	}
	return want
}

// killedStore runs fillRich in a child process (this test binary), and
// kills it with SIGKILL once the saves are acknowledged.
func killedStore(t *testing.T, machine string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRichStoreProcess$")
	cmd.Env = append(os.Environ(), "STATEGATE_RICH_STORE="+dir, "STATEGATE_RICH_MACHINE="+machine)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	cmd.Process.Kill()
	cmd.Wait()
	if err != nil || line != "saved\n" {
		t.Fatalf("the child process said %q, %v", line, err)
	}
	return dir
}

// TestRichStoreProcess is killedStore's child process.
func TestRichStoreProcess(t *testing.T) {
	dir := os.Getenv("STATEGATE_RICH_STORE")
	if dir == "" {
		t.Skip("the child process of killedStore")
	}
	// Not synced: a killed process loses nothing of what it wrote.
	b := openTest(t, dir, Options{SmallTables: true, NoSync: true})
	fillRich(t, b, os.Getenv("STATEGATE_RICH_MACHINE"))
	fmt.Println("saved")
	select {} // until killed
}

// copyDir copies a folder's files (sparse where they are zeros).
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := copyFile(filepath.Join(dir, e.Name()), filepath.Join(out, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// files returns a folder's files with an extension, sorted.
func files(t *testing.T, dir, ext string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "*"+ext))
	if len(m) == 0 {
		t.Fatalf("no %s file in %s", ext, dir)
	}
	return m
}

// flip garbles 16 bytes of a file. (A single flipped bit in a table's
// compressed block can leave it as it was: the copy of a run of equal
// bytes from another offset in the run.)
func flip(t *testing.T, path string, at func(size int) int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := at(len(data)); i < min(len(data), at(len(data))+16); i++ {
		data[i] ^= 0x5a
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func cut(t *testing.T, path string, to func(size int) int) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, int64(to(int(st.Size())))); err != nil {
		t.Fatal(err)
	}
}

// checkAll opens a store and finds every record as saved.
func checkAll(t *testing.T, dir string, o Options, want map[store.Key]string) {
	t.Helper()
	b := openTest(t, dir, o)
	defer b.Close()
	for k, snap := range want {
		rec, v, err := b.Load(context.Background(), k)
		if err != nil || v != 5 || string(rec.Snapshot) != snap {
			t.Fatalf("%v: %d bytes at %d, %v", k, len(rec.Snapshot), v, err)
		}
		if trail, err := b.Audit(context.Background(), k, 0); err != nil || len(trail) != 5 {
			t.Fatalf("%v: %d audit entries, %v", k, len(trail), err)
		}
	}
	keys, err := b.List(context.Background())
	if err != nil || len(keys) != len(want) {
		t.Fatalf("listed %d, %v", len(keys), err)
	}
}

// busiestLog returns the memtable log of a killed store that holds the
// most committed transactions: which one the kill left full (a flush may
// have just started an empty one) is a matter of timing.
func busiestLog(t *testing.T, dir string) string {
	t.Helper()
	best, bestEnd := "", 0
	for _, f := range files(t, dir, memExt) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, end := lastTxn(data); end > bestEnd {
			best, bestEnd = f, end
		}
	}
	if best == "" {
		t.Fatal("no memtable log holds a transaction")
	}
	return best
}

// lastTxn returns the offset where a memtable log's last whole
// transaction starts, and where it ends.
func lastTxn(data []byte) (start, end int) {
	off, txnStart := logHeader, logHeader
	for {
		r, next, ok := readRecord(data, off)
		if !ok {
			return start, end
		}
		if r.meta&bitFinTxn != 0 {
			start, end = txnStart, next
			txnStart = next
		}
		off = next
	}
}

// TestDamageIsRefused damages a store's files as a disk or an operator
// might, and opens it read-write and read-only: where Badger would lose
// acknowledged data without a word, the open is refused with ErrDamaged,
// naming what is damaged and how to recover, and nothing on disk changes;
// what a crash leaves opens with every record.
func TestDamageIsRefused(t *testing.T) {
	closed, killed, want := richStore(t, "m")
	other, _, _ := richStore(t, "other") // a store with tables of other data
	for _, c := range []struct {
		name   string
		killed bool // damage the killed server's copy
		damage func(t *testing.T, dir string)
		// want is what the refusal says; "": opens with every record; a
		// leading "?": the damage may have lost nothing (a change cut
		// from the MANIFEST may be a compaction's, whose inputs it still
		// names), so it is refused or opens with every record.
		want string
	}{
		{"closed cleanly", false, func(*testing.T, string) {}, ""},
		{"killed", true, func(*testing.T, string) {}, ""},
		{"MANIFEST deleted", false, func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, manifestName)) }, "MANIFEST file is missing"},
		{"MANIFEST deleted after a kill", true, func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, manifestName)) }, "MANIFEST file is missing"},
		{"MANIFEST emptied", false, func(t *testing.T, dir string) { cut(t, filepath.Join(dir, manifestName), func(int) int { return 0 }) }, "MANIFEST"},
		{"MANIFEST cut to its magic", false, func(t *testing.T, dir string) { cut(t, filepath.Join(dir, manifestName), func(int) int { return 8 }) }, "not in the MANIFEST"},
		{"MANIFEST cut in half", false, func(t *testing.T, dir string) {
			cut(t, filepath.Join(dir, manifestName), func(n int) int { return n / 2 })
		}, "?MANIFEST"},
		{"MANIFEST cut in half after a kill", true, func(t *testing.T, dir string) {
			cut(t, filepath.Join(dir, manifestName), func(n int) int { return n / 2 })
		}, "?MANIFEST"},
		{"MANIFEST flipped byte", false, func(t *testing.T, dir string) {
			flip(t, filepath.Join(dir, manifestName), func(n int) int { return n / 2 })
		}, "MANIFEST"},
		{"table cut in half", false, func(t *testing.T, dir string) {
			cut(t, files(t, dir, ".sst")[0], func(n int) int { return n / 2 })
		}, "table"},
		{"table flipped byte", false, func(t *testing.T, dir string) {
			flip(t, files(t, dir, ".sst")[0], func(n int) int { return n / 3 })
		}, "table"},
		{"table deleted", false, func(t *testing.T, dir string) { os.Remove(files(t, dir, ".sst")[0]) }, "is missing"},
		{"value log flipped byte", false, func(t *testing.T, dir string) {
			flip(t, files(t, dir, ".vlog")[0], func(n int) int { return n / 2 })
		}, "cannot be read"},
		{"value log cut in half", false, func(t *testing.T, dir string) {
			cut(t, files(t, dir, ".vlog")[0], func(n int) int { return n / 2 })
		}, "cannot be read"},
		{"memtable log cut short", true, func(t *testing.T, dir string) {
			path := busiestLog(t, dir)
			data, _ := os.ReadFile(path)
			_, end := lastTxn(data)
			cut(t, path, func(int) int { return end / 2 })
		}, "cut short"},
		{"memtable log flipped byte", true, func(t *testing.T, dir string) {
			flip(t, busiestLog(t, dir), func(int) int { return logHeader + 30 })
		}, "committed transactions follow it"},
		{"orphan table of this store's data", false, func(t *testing.T, dir string) {
			// As a crash between a compaction's tables and its MANIFEST
			// change leaves: data that is also elsewhere.
			if err := copyFile(files(t, dir, ".sst")[0], filepath.Join(dir, "009999.sst")); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"orphan table of data nowhere else", false, func(t *testing.T, dir string) {
			for i, f := range files(t, other, ".sst") {
				if err := copyFile(f, table.NewFilename(uint64(9000+i), dir)); err != nil {
					t.Fatal(err)
				}
			}
		}, "not in the MANIFEST"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := closed
			if c.killed {
				src = killed
			}
			dir := copyDir(t, src)
			c.damage(t, dir)
			before := folderHashes(t, dir)
			mayOpen := strings.HasPrefix(c.want, "?")
			c.want = strings.TrimPrefix(c.want, "?")
			if c.want == "" {
				checkAll(t, dir, Options{ReadOnly: true, SmallTables: true}, want)
				sameHashes(t, before, folderHashes(t, dir))
				checkAll(t, dir, Options{SmallTables: true}, want)
				checkAll(t, dir, Options{ReadOnly: true, SmallTables: true}, want)
				return
			}
			for _, ro := range []bool{true, false} {
				b, err := Open(dir, Options{ReadOnly: ro, SmallTables: true, GCInterval: -1, Logger: quietLog()})
				if err == nil {
					b.Close()
					if mayOpen {
						t.Logf("opens: the damage lost nothing")
						checkAll(t, dir, Options{ReadOnly: true, SmallTables: true}, want)
						return
					}
				}
				if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Restore the folder from a backup") {
					t.Fatalf("open (read-only %v): %v; want ErrDamaged saying %q", ro, err, c.want)
				}
				if ro {
					t.Log(err)
				}
			}
			sameHashes(t, before, folderHashes(t, dir))
		})
	}
}

// TestTornLastWriteOpens: a memtable log whose last transaction a crash
// tore (its records zeroed from the middle on) opens, without that
// transaction; the saves before it are all there.
func TestTornLastWriteOpens(t *testing.T) {
	_, killed, want := richStore(t, "m")
	dir := copyDir(t, killed)
	mems := files(t, dir, memExt)
	path := mems[len(mems)-1] // the memtable being written
	data, _ := os.ReadFile(path)
	start, end := lastTxn(data)
	clear(data[(start+end)/2 : end])
	os.WriteFile(path, data, 0o644)
	b := openTest(t, dir, Options{SmallTables: true})
	defer b.Close()
	lost := 0
	for k, snap := range want {
		rec, v, err := b.Load(context.Background(), k)
		switch {
		case err == nil && v == 5 && string(rec.Snapshot) == snap:
		case err == nil && v == 4:
			lost++
		default:
			t.Fatalf("%v: at %d, %v", k, v, err)
		}
	}
	if lost != 1 {
		t.Fatalf("%d saves lost; want the torn one", lost)
	}
}

// TestEmptyMemtableLogOpens: a kill between Badger's making a memtable's
// log and sizing it leaves an empty .mem file, which Badger itself cannot
// open ("Create a new file"); it holds nothing, and the store opens, read
// only (changing nothing) and to write, with every record.
func TestEmptyMemtableLogOpens(t *testing.T) {
	_, killed, want := richStore(t, "m")
	dir := copyDir(t, killed)
	mems := files(t, dir, memExt)
	next := fmt.Sprintf("%05d%s", logID(filepath.Base(mems[len(mems)-1]))+1, memExt)
	empty := filepath.Join(dir, next)
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	checkAll(t, dir, Options{ReadOnly: true, GCInterval: -1}, want)
	if _, err := os.Stat(empty); err != nil {
		t.Fatalf("a read-only open changed the store: %v", err)
	}
	checkAll(t, dir, Options{SmallTables: true}, want)
}

// TestRemovedMemtableLogIsRefused: a memtable log removed before the
// last one leaves no gap in the logs' numbers, but one in the versions
// of the writes (the tables end before the oldest log left starts). The
// store is refused then, or (when the log removed had been flushed to a
// table already, and only its removal was left to do) opens with every
// record.
func TestRemovedMemtableLogIsRefused(t *testing.T) {
	// A kill leaves two logs when it lands while a memtable waits to be
	// flushed (four times in ten here), and the older one still holds
	// writes no table has in about half of those.
	for range 24 {
		killed := killedStore(t, "m")
		mems := files(t, killed, memExt)
		if len(mems) < 2 {
			continue
		}
		dir := copyDir(t, killed)
		if err := os.Remove(filepath.Join(dir, filepath.Base(mems[0]))); err != nil {
			t.Fatal(err)
		}
		b, err := Open(dir, Options{GCInterval: -1, Logger: quietLog()})
		if err != nil {
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "a memtable log before it was removed") {
				t.Fatalf("err = %v", err)
			}
			return
		}
		for k, snap := range richRecords("m") {
			if rec, _, err := b.Load(context.Background(), k); err != nil || string(rec.Snapshot) != snap {
				t.Fatalf("the store opened without the writes of the log removed: %v: %v", k, err)
			}
		}
		b.Close()
	}
	t.Skip("no kill left an unflushed memtable log before the last one")
}

// richRecords are the records fillRich leaves.
func richRecords(machine string) map[store.Key]string {
	want := map[store.Key]string{}
	for i := range 100 {
		pad := strings.Repeat("p", 900)
		if i%8 == 0 {
			pad = strings.Repeat("V", 20<<10)
		}
		want[store.Key{Machine: machine, Handle: "h" + strconv.Itoa(i)}] = `{"i":` + strconv.Itoa(i) + `,"j":4,"pad":"` + pad + `"}`
	}
	return want
}

var damageRuns = flag.Int("store.damage", 12, "random damages TestRandomDamage makes")

// TestRandomDamage damages a store's files at random (a cut, 16 garbled
// bytes, or a deleted file, anywhere in the MANIFEST, a table, a value
// log, or a memtable's log before its last transaction, which a crash
// may tear) and opens it: it is refused (ErrDamaged, nothing changed) or
// it opens with every record and audit entry. It is never silently less.
// (-store.damage N runs more.)
func TestRandomDamage(t *testing.T) {
	closed, killed, want := richStore(t, "m")
	refused, opened := 0, 0
	for seed := range *damageRuns {
		rnd := rand.New(rand.NewPCG(uint64(seed), 15))
		src := closed
		if seed%2 == 1 {
			src = killed
		}
		dir := copyDir(t, src)
		var targets []string
		for _, ext := range []string{".sst", ".vlog", memExt} {
			m, _ := filepath.Glob(filepath.Join(dir, "*"+ext))
			targets = append(targets, m...)
		}
		targets = append(targets, filepath.Join(dir, manifestName))
		path := targets[rnd.IntN(len(targets))]
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		limit := len(data)
		if strings.HasSuffix(path, memExt) {
			if start, _ := lastTxn(data); start > 0 {
				limit = start
			}
		}
		if limit == 0 {
			continue
		}
		at := rnd.IntN(limit)
		var what string
		action := rnd.IntN(5)
		if mems, _ := filepath.Glob(filepath.Join(dir, "*"+memExt)); action == 0 && len(mems) > 1 && path == mems[len(mems)-1] {
			// The newest of several memtable logs, removed, cannot be
			// told from a crash just after the write that filled the
			// one before it (see inspect): not a damage this test makes.
			action = 1
		}
		switch action {
		case 0:
			what = "deleted"
			os.Remove(path)
		case 1, 2:
			what = fmt.Sprintf("cut at %d of %d", at, len(data))
			os.Truncate(path, int64(at))
		default:
			what = fmt.Sprintf("garbled at %d of %d", at, len(data))
			for i := at; i < min(len(data), at+16); i++ {
				data[i] ^= 0x5a
			}
			os.WriteFile(path, data, 0o644)
		}
		what = filepath.Base(path) + " " + what
		before := folderHashes(t, dir)
		b, err := Open(dir, Options{SmallTables: true, GCInterval: -1, Logger: quietLog()})
		if err != nil {
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("%s: %v; want ErrDamaged or every record", what, err)
			}
			sameHashes(t, before, folderHashes(t, dir))
			refused++
			t.Logf("%s: refused: %v", what, err)
			continue
		}
		b.Close()
		opened++
		t.Logf("%s: opens", what)
		checkAll(t, dir, Options{SmallTables: true}, want)
	}
	t.Logf("%d damages refused, %d opened with every record", refused, opened)
}
