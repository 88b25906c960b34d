package xstate

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// MaxFileSize is the size of the largest machine file stategate reads: a
// JSON config, a module, or a file a module imports.
const MaxFileSize = 4 << 20

// Errors of reading a machine file, which callers can test with errors.Is.
var (
	// ErrNotRegular: the file is a FIFO, a device, a socket or a folder,
	// which stategate does not read (a FIFO would block it, a device such
	// as /dev/zero never ends).
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge: the file is larger than MaxFileSize.
	ErrTooLarge = fmt.Errorf("larger than %d MiB", MaxFileSize>>20)
	// ErrOutsideRoot: the file, or the file a symbolic link points to, is
	// outside the Loader's Root (the machines folder).
	ErrOutsideRoot = errors.New("outside the machines folder")
)

// ReadFile reads a machine file as stategate reads every file it loads or
// hashes: only a regular file, opened without blocking (a FIFO is refused,
// not waited on), and of at most MaxFileSize bytes.
func ReadFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, openFlags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readOpened(path, f)
}

// readOpened reads an opened file through the limit, once it knows it is
// a regular file.
func readOpened(path string, f *os.File) ([]byte, error) {
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, fileKind(info.Mode()))
	}
	if info.Size() > MaxFileSize {
		return nil, fmt.Errorf("%s: %w", path, ErrTooLarge)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: %w", path, ErrTooLarge)
	}
	return data, nil
}

// fileKind names what a file that is not regular is.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a folder"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeDevice != 0, m&os.ModeCharDevice != 0:
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "not a file"
}

// Root reads the machine files of one folder and below it, as ReadFile
// reads a file: a file named by a path that climbs out of the folder, or
// a symbolic link that points out of it, is refused (ErrOutsideRoot). A
// Loader reads every file through the Root of its machines folder, and
// gives it to its Modules for the files a module imports.
type Root struct {
	dir  string // the folder, absolute
	real string // the folder with symbolic links resolved
}

// OpenRoot returns the Root of a folder.
func OpenRoot(dir string) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, err
	}
	return &Root{dir: abs, real: real}, nil
}

// rel returns the path of a file inside the root, relative to its real
// folder, with symbolic links resolved: a link is followed only when its
// target is inside the root too.
func (r *Root) rel(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(r.real, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		if real != abs {
			return "", fmt.Errorf("%s: %w %s (it is a link to %s)", path, ErrOutsideRoot, r.dir, real)
		}
		return "", fmt.Errorf("%s: %w %s", path, ErrOutsideRoot, r.dir)
	}
	return rel, nil
}

// ReadFile reads a file inside the root, as the function ReadFile reads
// one.
func (r *Root) ReadFile(path string) ([]byte, error) {
	rel, err := r.rel(path)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(r.real)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// Opened through the root, which also refuses a link put in place
	// since rel was found that would lead out of it.
	f, err := root.OpenFile(rel, openFlags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readOpened(path, f)
}

// IsFile reports whether path is a regular file inside the root (a link
// to one inside counts).
func (r *Root) IsFile(path string) bool {
	if _, err := r.rel(path); err != nil {
		return false
	}
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular()
}

// root returns the Root a file is read in: the Loader's Root, else the
// file's own folder.
func (l *Loader) root(file string) (*Root, error) {
	if l.Root != "" {
		return OpenRoot(l.Root)
	}
	return OpenRoot(filepath.Dir(file))
}
