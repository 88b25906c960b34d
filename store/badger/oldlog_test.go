package badger

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/store"
)

// oldLogFile builds a write-ahead log of the earlier format, as its
// writer laid it out.
type oldLogFile struct {
	data []byte
	off  int
}

func newOldLogFile(gen uint64) *oldLogFile {
	l := &oldLogFile{data: make([]byte, oldLogSize), off: oldLogHeader}
	copy(l.data, oldLogMagic)
	binary.LittleEndian.PutUint64(l.data[8:], gen)
	return l
}

// add appends a record of generation gen and returns its offset.
func (l *oldLogFile) add(gen uint64, ops ...oldOp) int {
	var body []byte
	for _, op := range ops {
		kind := byte(0)
		if op.del {
			kind = 1
		}
		body = append(body, kind)
		body = binary.AppendUvarint(body, uint64(len(op.key)))
		body = append(body, op.key...)
		body = binary.AppendUvarint(body, uint64(len(op.val)))
		body = append(body, op.val...)
	}
	var g [8]byte
	binary.LittleEndian.PutUint64(g[:], gen)
	at := l.off
	binary.LittleEndian.PutUint32(l.data[at:], uint32(len(body)))
	binary.LittleEndian.PutUint32(l.data[at+4:], crc32.Update(crc32.Checksum(g[:], castagnoli), castagnoli, body))
	copy(l.data[at+8:], body)
	l.off += 8 + len(body)
	return at
}

func (l *oldLogFile) write(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, l.data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// oldSet is the old store's write of an instance's record.
func oldSet(m, h string, version uint64, snap string) oldOp {
	val, _ := encode(store.Record{Snapshot: []byte(snap), Updated: time.Unix(1e9, 0).UTC()}, version)
	return oldOp{key: []byte(oldInstancePrefix + m + "\x00" + h), val: val}
}

// oldAudit is the old store's write of an audit entry.
func oldAudit(m, h string, version uint64, tool string) oldOp {
	val, _ := json.Marshal(store.AuditEntry{Tool: tool, Version: version})
	return oldOp{key: binary.BigEndian.AppendUint64([]byte(oldAuditPrefix+m+"\x00"+h+"\x00"), version), val: val}
}

// folderHashes returns every file of a folder with its content's hash.
func folderHashes(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out[rel] = fmt.Sprintf("%x", sha256.Sum256(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameHashes(t *testing.T, before, after map[string]string) {
	t.Helper()
	for name, h := range before {
		if after[name] != h {
			t.Errorf("%s changed", name)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("%s appeared", name)
		}
	}
}

// TestImportOldLogs opens a store whose two logs hold saves not in
// Badger: they are imported, the older generation's first (so the newer
// log's writes win), their keys are rewritten, and the logs go.
func TestImportOldLogs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := openTest(t, dir, Options{})
	b.Close()
	older, newer := newOldLogFile(6), newOldLogFile(7)
	older.add(6, oldSet("m", "a", 1, `{"v":"older"}`), oldAudit("m", "a", 1, "t1"))
	older.add(6, oldSet("m", "gone", 1, `{}`), oldAudit("m", "gone", 1, "g1"))
	// Stale records of an earlier generation after the current ones: not
	// imported.
	older.add(5, oldSet("m", "stale", 1, `{}`))
	newer.add(7, oldSet("m", "a", 2, `{"v":"newer"}`), oldAudit("m", "a", 2, "t2"))
	newer.add(7, oldOp{del: true, key: []byte(oldInstancePrefix + "m\x00gone")}, oldOp{del: true, key: oldAudit("m", "gone", 1, "").key})
	newer.add(7, oldSet("m", "a\x00evil", 1, `{"v":"evil"}`), oldAudit("m", "a\x00evil", 1, "e1"))
	// The logs' names do not say which is older.
	newer.write(t, filepath.Join(dir, "stategate.wal"))
	older.write(t, filepath.Join(dir, "stategate-2.wal"))

	// With NoSync, the import is synced all the same.
	b = openTest(t, dir, Options{NoSync: true})
	check := func(b *Store) {
		t.Helper()
		rec, v, err := b.Load(ctx, store.Key{Machine: "m", Handle: "a"})
		if err != nil || v != 2 || string(rec.Snapshot) != `{"v":"newer"}` {
			t.Fatalf("m/a: %s at %d, %v", rec.Snapshot, v, err)
		}
		trail, _ := b.Audit(ctx, store.Key{Machine: "m", Handle: "a"}, 0)
		if len(trail) != 2 || trail[0].Tool != "t1" || trail[1].Tool != "t2" {
			t.Fatalf("m/a's trail: %+v", trail)
		}
		if trail, _ := b.Audit(ctx, store.Key{Machine: "m", Handle: "a\x00evil"}, 0); len(trail) != 1 || trail[0].Tool != "e1" {
			t.Fatalf("m/a\\x00evil's trail: %+v", trail)
		}
		for _, h := range []string{"gone", "stale"} {
			if _, _, err := b.Load(ctx, store.Key{Machine: "m", Handle: h}); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("m/%s: %v", h, err)
			}
		}
		keys, _ := b.List(ctx)
		if len(keys) != 2 {
			t.Fatalf("listed %v", keys)
		}
	}
	check(b)
	b.Close()
	for _, name := range oldLogNames {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Fatalf("%s is still there (%v)", name, err)
		}
	}
	b = openTest(t, dir, Options{ReadOnly: true})
	defer b.Close()
	if b.scratch != "" || !b.upgraded() {
		t.Fatal("the upgraded store is not read in place")
	}
	check(b)
}

// TestOldLogDamage: a log the old store would have read past, losing
// saves over it, refuses the open, naming the file and what is wrong,
// and changes nothing; what a crash leaves (a torn last record, a log it
// had not finished making) opens.
func TestOldLogDamage(t *testing.T) {
	type logs struct{ first, second *oldLogFile }
	healthy := func() logs {
		a, b := newOldLogFile(10), newOldLogFile(11)
		a.add(10, oldSet("m", "x", 1, `{"n":1}`))
		a.add(10, oldSet("m", "x", 2, `{"n":2}`))
		a.add(10, oldSet("m", "x", 3, `{"n":3}`))
		b.add(11, oldSet("m", "y", 1, `{"n":1}`))
		return logs{a, b}
	}
	for _, c := range []struct {
		name   string
		damage func(l logs) []byte // the first log's file
		want   string              // "" : opens, x at want version
		at     uint64
	}{
		{"flipped byte in a middle record", func(l logs) []byte {
			l.first.data[oldLogHeader+8+20] ^= 0x10
			return l.first.data
		}, "fails its checksum, and an intact record of the same generation follows it", 0},
		{"flipped crc of a middle record", func(l logs) []byte {
			l.first.data[oldLogHeader+4] ^= 1
			return l.first.data
		}, "fails its checksum", 0},
		{"short file", func(l logs) []byte { return l.first.data[:5<<20] }, "cut short", 0},
		{"short file at the header", func(l logs) []byte { return l.first.data[:16] }, "cut short", 0},
		{"bad magic", func(l logs) []byte { l.first.data[2] ^= 4; return l.first.data }, "magic", 0},
		{"flipped bit in the generation", func(l logs) []byte { l.first.data[8] ^= 1 << 3; return l.first.data }, "do not follow each other", 0},
		{"zero generation", func(l logs) []byte { clear(l.first.data[8:16]); return l.first.data }, "generation is 0", 0},
		{"record that checks but does not decode", func(l logs) []byte {
			l.first.add(10, oldOp{key: []byte("k")})
			body := l.first.data[l.first.off-4 : l.first.off] // kind, key length, key, value length
			body[0] = 7
			var g [8]byte
			binary.LittleEndian.PutUint64(g[:], 10)
			at := l.first.off - 4 - 8
			binary.LittleEndian.PutUint32(l.first.data[at+4:], crc32.Update(crc32.Checksum(g[:], castagnoli), castagnoli, l.first.data[at+8:l.first.off]))
			return l.first.data
		}, "does not decode", 0},
		{"torn last record", func(l logs) []byte { l.first.data[l.first.off-1] ^= 0xff; return l.first.data }, "", 2},
		{"log never finished", func(l logs) []byte { return make([]byte, 3<<20) }, "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			b := openTest(t, dir, Options{})
			b.Close()
			l := healthy()
			if err := os.WriteFile(filepath.Join(dir, "stategate.wal"), c.damage(l), 0o644); err != nil {
				t.Fatal(err)
			}
			l.second.write(t, filepath.Join(dir, "stategate-2.wal"))
			before := folderHashes(t, dir)
			r, err := Open(dir, Options{GCInterval: -1, Logger: quietLog()})
			if c.want != "" {
				if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "stategate") {
					t.Fatalf("open: %v; want ErrDamaged saying %q", err, c.want)
				}
				if r2, err := Open(dir, Options{ReadOnly: true, Logger: quietLog()}); !errors.Is(err, ErrDamaged) {
					r2.Close()
					t.Fatalf("read-only open: %v", err)
				}
				sameHashes(t, before, folderHashes(t, dir))
				return
			}
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer r.Close()
			_, v, err := r.Load(context.Background(), store.Key{Machine: "m", Handle: "x"})
			if c.at == 0 && !errors.Is(err, store.ErrNotFound) || c.at > 0 && (err != nil || v != c.at) {
				t.Fatalf("m/x at %d, %v; want %d", v, err, c.at)
			}
			if _, v, err := r.Load(context.Background(), store.Key{Machine: "m", Handle: "y"}); err != nil || v != 1 {
				t.Fatalf("m/y at %d, %v", v, err)
			}
		})
	}
}

// extractStore unpacks a store's tar.gz into a folder, leaving blocks of
// zeros as holes (Badger's logs are large sparse files).
func extractStore(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(z)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		path := filepath.Join(dir, filepath.Base(h.Name))
		tmp := path + ".part"
		out, err := os.Create(tmp)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, tr); err != nil {
			t.Fatal(err)
		}
		out.Close()
		if err := copyFile(tmp, path); err != nil {
			t.Fatal(err)
		}
		os.Remove(tmp)
	}
}

// TestUpgradeFromTheOldStore opens a store that stategate at commit
// 314fc77 (a write-ahead log of its own in front of Badger) left when it
// was killed: some saves were in Badger, the rest only in its two logs
// (the older log also holds records of an earlier generation); instances
// "a" and "a\x00evil" shared their audit trails' key range. Read-only,
// then read-write, every instance is as that store acknowledged it, with
// its own trail; the read-only open changes nothing.
//
// testdata/oldstore.tar.gz was made in that commit's tree by a test that
// saved these instances (audit retention 50, checkpoints every 6 KiB)
// and copied the store's folder before closing it; expected.json lists
// what it acknowledged.
func TestUpgradeFromTheOldStore(t *testing.T) {
	dir := t.TempDir()
	extractStore(t, "testdata/oldstore.tar.gz", dir)
	var want []struct {
		Machine, Handle string
		Version         uint64
		Snapshot        string
		Tools           []string
		Deleted         bool
	}
	data, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "expected.json"))
	ctx := context.Background()
	check := func(b *Store) {
		t.Helper()
		keys, err := b.List(ctx)
		if err != nil || len(keys) != len(want)-1 {
			t.Fatalf("listed %d, %v; want %d", len(keys), err, len(want)-1)
		}
		// The index, built in the upgrade (on the scratch copy, read-only).
		if recent, err := b.Recent(ctx, "", 100); err != nil || len(recent) != len(keys) {
			t.Fatalf("Recent lists %d, %v; want %d", len(recent), err, len(keys))
		}
		if n, err := b.Count(ctx, ""); err != nil || n != len(keys) {
			t.Fatalf("Count = %d, %v; want %d", n, err, len(keys))
		}
		for _, w := range want {
			k := store.Key{Machine: w.Machine, Handle: w.Handle}
			rec, v, err := b.Load(ctx, k)
			trail, terr := b.Audit(ctx, k, 0)
			if terr != nil {
				t.Fatal(terr)
			}
			if w.Deleted {
				if !errors.Is(err, store.ErrNotFound) || len(trail) != 0 {
					t.Fatalf("%q was deleted: %v, %d entries", w.Handle, err, len(trail))
				}
				continue
			}
			if err != nil || v != w.Version || string(rec.Snapshot) != w.Snapshot {
				t.Fatalf("%q: %s at %d, %v; want %s at %d", truncate(w.Handle), rec.Snapshot, v, err, w.Snapshot, w.Version)
			}
			if len(trail) != len(w.Tools) {
				t.Fatalf("%q: %d audit entries, want %d", truncate(w.Handle), len(trail), len(w.Tools))
			}
			for i, e := range trail {
				if e.Tool != w.Tools[i] || w.Machine == "invoice" && e.Handle != w.Handle {
					t.Fatalf("%q: entry %d is %s of %q, want %s", truncate(w.Handle), i, e.Tool, truncate(e.Handle), w.Tools[i])
				}
			}
		}
	}
	before := folderHashes(t, dir)
	r := openTest(t, dir, Options{ReadOnly: true})
	check(r)
	r.Close()
	sameHashes(t, before, folderHashes(t, dir))

	b := openTest(t, dir, Options{})
	check(b)
	b.Close()
	for _, name := range oldLogNames {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Fatalf("%s is still there", name)
		}
	}
	b = openTest(t, dir, Options{})
	defer b.Close()
	check(b)
}
