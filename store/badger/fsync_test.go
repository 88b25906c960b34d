package badger

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkFsync measures the disk's fsync rate: append a small record and
// sync, as a durable write does. Compare durable calls per second with it.
func BenchmarkFsync(b *testing.B) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	rec := make([]byte, 256)
	for b.Loop() {
		if _, err := f.Write(rec); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}
