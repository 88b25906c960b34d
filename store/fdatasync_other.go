//go:build !linux

package store

import "os"

// fdatasync flushes a file to the disk (fsync where fdatasync is not had).
func fdatasync(f *os.File) error { return f.Sync() }
