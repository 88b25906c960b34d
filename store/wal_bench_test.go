package store

import (
	"path/filepath"
	"testing"
)

// BenchmarkWALAppend measures one durable append of a save's writes to
// the write-ahead log (compare BenchmarkFsync).
func BenchmarkWALAppend(b *testing.B) {
	w, _, err := openWAL(filepath.Join(b.TempDir(), "log"))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	ops := []walOp{{key: []byte("i/invoice\x00h"), val: make([]byte, 400)}, {key: []byte("a/invoice\x00h\x00\x00\x00\x00\x00\x00\x00\x01"), val: make([]byte, 300)}}
	for b.Loop() {
		if err := w.append(ops); err != nil {
			if err == errWALFull {
				if err := w.restart(w.gen + 1); err != nil {
					b.Fatal(err)
				}
				continue
			}
			b.Fatal(err)
		}
	}
}

// BenchmarkBadgerSaveNoSync measures a save that does not wait for the
// disk (--no-sync).
func BenchmarkBadgerSaveNoSync(b *testing.B) {
	st, err := OpenBadger(b.TempDir(), BadgerOptions{NoSync: true, GCInterval: -1, Logger: quietLog()})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	k := Key{"m", "h"}
	var v uint64
	rec := Record{Snapshot: []byte(`{"status":"active","value":"draft","context":{}}`), Audit: &AuditEntry{Tool: "t"}}
	for b.Loop() {
		if v, err = st.Save(b.Context(), k, rec, v); err != nil {
			b.Fatal(err)
		}
	}
}
