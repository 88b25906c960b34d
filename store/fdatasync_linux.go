package store

import (
	"errors"
	"os"
	"syscall"
)

// fdatasync flushes a file's data (and only the metadata needed to read
// it back) to the disk.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
