//go:build unix

package xstate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func fifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("cannot make a FIFO: %v", err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestReadOnlyRegularFiles checks that only regular files of at most
// MaxFileSize are read, and that a FIFO or a device is refused at once,
// not waited on or read without end.
func TestReadOnlyRegularFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{"ok.json": `{"id":"ok"}`})
	fifo(t, filepath.Join(dir, "pipe.json"))
	symlink(t, "/dev/zero", filepath.Join(dir, "zero.json"))
	if err := os.Mkdir(filepath.Join(dir, "folder.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(dir, "big.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(MaxFileSize + 1); err != nil { // sparse: costs no disk
		t.Fatal(err)
	}
	big.Close()
	for name, want := range map[string]error{
		"ok.json":     nil,
		"pipe.json":   ErrNotRegular,
		"zero.json":   ErrNotRegular,
		"folder.json": ErrNotRegular,
		"big.json":    ErrTooLarge,
	} {
		start := time.Now()
		_, err := ReadFile(filepath.Join(dir, name))
		if !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %v", name, d)
		}
		// Loading it as a machine fails the same way, with the file named
		// (a link to /dev/zero is outside the folder, first).
		if name == "zero.json" {
			want = ErrOutsideRoot
		}
		_, _, err = (&Loader{}).Load(filepath.Join(dir, name))
		if want != nil && (!errors.Is(err, want) || !strings.Contains(err.Error(), name)) {
			t.Errorf("loading %s: %v, want %v naming the file", name, err, want)
		}
	}
}
