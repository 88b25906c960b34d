//go:build !unix

package badger

import "os"

// freeSpace is not known here: the reserve is not checked.
func freeSpace(dir string) (int64, error) { return 1 << 62, nil }

// lockDir leaves the lock to Badger.
func lockDir(dir string, shared bool) (func() error, error) { return func() error { return nil }, nil }

// bypassBadgerLock: Badger takes its own lock.
const bypassBadgerLock = false

// syncDir does nothing where folders cannot be synced.
func syncDir(dir string) error { return nil }

// mapFile reads a file.
func mapFile(path string) ([]byte, func(), error) {
	data, err := os.ReadFile(path)
	return data, func() {}, err
}
