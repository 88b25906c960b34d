//go:build unix

package badger

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// freeSpace returns the bytes free for an unprivileged user on the
// filesystem that holds dir.
func freeSpace(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// lockDir takes the lock on a store's folder that Badger takes (flock on
// the folder: exclusive, or shared to read only), so that the folder is
// checked under it before Badger opens it. It returns errLockHeld if
// another process has it.
func lockDir(dir string, shared bool) (func() error, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	how := unix.LOCK_EX
	if shared {
		how = unix.LOCK_SH
	}
	if err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, errLockHeld
		}
		return nil, &os.PathError{Op: "flock", Path: dir, Err: err}
	}
	return f.Close, nil
}

// bypassBadgerLock: the store takes Badger's lock itself.
const bypassBadgerLock = true

// syncDir makes a folder's entries (files made or removed) durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// mapFile maps a file into memory to read it (a log may be a sparse file
// far larger than what it holds).
func mapFile(path string) ([]byte, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if st.Size() == 0 {
		return nil, func() {}, nil
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, &os.PathError{Op: "mmap", Path: path, Err: err}
	}
	return data, func() { unix.Munmap(data) }, nil
}
