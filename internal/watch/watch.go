// Package watch owns the debounced watching of files and folders: one
// fsnotify loop that calls a function once a burst of changes has settled,
// for a folder and its subfolders (Tree) or for one file (File).
//
// It knows nothing of what the files hold nor of what the function does:
// machine folders and upstreams files are its callers' business. It is
// the only package of the module that imports fsnotify, so that the
// packages the gate links (gate, upstream) need not.
package watch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Debounce is how long a watcher waits, when it is given no other time,
// after the last change of a burst before it calls its function: editors
// write a file in several steps.
const Debounce = 100 * time.Millisecond

// Watcher is a watch set up and not yet run: the changes from the moment
// NewTree or NewFile returned are seen by Run.
type Watcher struct {
	fs       *fsnotify.Watcher
	root     string // Tree: the folder; File: the file's folder
	file     string // File: the file, absolute; Tree: ""
	debounce time.Duration
	log      *slog.Logger

	// For the tests: seen is told of every event Run handled (after a new
	// folder was added), and whether it counts as a change; settle, when
	// not nil, ends a burst at once (the tests give a debounce too long to
	// end one).
	seen   func(name string, counts bool)
	settle <-chan struct{}
}

// NewTree watches a folder and its subfolders, those made later included;
// hidden subfolders (a name beginning with '.') are skipped, with what is
// in them, though their own creation or removal is a change. debounce 0
// is Debounce; a nil log is slog.Default().
func NewTree(dir string, debounce time.Duration, log *slog.Logger) (*Watcher, error) {
	w, err := newWatcher(dir, debounce, log)
	if err != nil {
		return nil, err
	}
	if err := w.fs.Add(dir); err != nil {
		_ = w.fs.Close()
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	w.addTree(dir, false)
	return w, nil
}

// NewFile watches one file, through its folder (editors replace a file
// rather than write it: a new file renamed over the old one); changes of
// the folder's other files are not changes of the file. The file need not
// exist yet; its folder must.
func NewFile(file string, debounce time.Duration, log *slog.Logger) (*Watcher, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", file, err)
	}
	w, err := newWatcher(filepath.Dir(abs), debounce, log)
	if err != nil {
		return nil, err
	}
	w.file = abs
	if err := w.fs.Add(w.root); err != nil {
		_ = w.fs.Close()
		return nil, fmt.Errorf("watch %s: %w", file, err)
	}
	return w, nil
}

func newWatcher(root string, debounce time.Duration, log *slog.Logger) (*Watcher, error) {
	if debounce <= 0 {
		debounce = Debounce
	}
	if log == nil {
		log = slog.Default()
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", root, err)
	}
	return &Watcher{fs: fw, root: root, debounce: debounce, log: log}, nil
}

// Tree watches a folder (NewTree) and calls fn after each settled change
// under it, until ctx ends. It returns an error only when the watch cannot
// be set up.
func Tree(ctx context.Context, dir string, debounce time.Duration, log *slog.Logger, fn func()) error {
	w, err := NewTree(dir, debounce, log)
	if err != nil {
		return err
	}
	w.Run(ctx, fn)
	return nil
}

// File watches a file (NewFile) and calls fn after each settled change of
// it, until ctx ends. It returns an error only when the watch cannot be
// set up.
func File(ctx context.Context, file string, debounce time.Duration, log *slog.Logger, fn func()) error {
	w, err := NewFile(file, debounce, log)
	if err != nil {
		return err
	}
	w.Run(ctx, fn)
	return nil
}

// Run calls fn once after each settled change (no other change for the
// watcher's debounce), on Run's goroutine, one call at a time: changes
// made while fn runs make one more call after it. It returns when ctx
// ends, and closes the watcher.
func (w *Watcher) Run(ctx context.Context, fn func()) {
	defer w.fs.Close()
	timer := time.NewTimer(w.debounce)
	timer.Stop()
	defer timer.Stop()
	pending := false
	changed := func() {
		pending = true
		timer.Reset(w.debounce)
	}
	fire := func() {
		if pending {
			pending = false
			fn()
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case err, ok := <-w.fs.Errors:
			if !ok {
				return
			}
			w.log.Warn("watching files", "dir", w.root, "err", err)
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				changed() // events were lost: one of them may have been a change
			}
		case ev, ok := <-w.fs.Events:
			if !ok {
				return
			}
			counts := w.handle(ev)
			if w.seen != nil {
				w.seen(ev.Name, counts)
			}
			if counts {
				changed()
			}
		case <-timer.C:
			fire()
		case <-w.settle:
			fire()
		}
	}
}

// Close releases a watcher that is not to be run.
func (w *Watcher) Close() error { return w.fs.Close() }

// handle adds the folders an event made, and reports whether the event is
// a change of what is watched.
func (w *Watcher) handle(ev fsnotify.Event) bool {
	if w.file != "" {
		return filepath.Clean(ev.Name) == w.file
	}
	if ev.Has(fsnotify.Create) {
		if info, err := os.Lstat(ev.Name); err == nil && info.IsDir() {
			for _, f := range w.addTree(ev.Name, true) {
				// Written before its folder was watched: no event of its
				// own came, and this event's change is its.
				if w.seen != nil {
					w.seen(f, true)
				}
			}
		}
	}
	return true
}

// skipFolder reports whether a tree's watch leaves out a subfolder: a
// hidden one, or node_modules (thousands of folders of packages, whose
// changes are no one's), as xstate.SkipFolder leaves them out of a
// machines folder.
func skipFolder(name string) bool {
	return strings.HasPrefix(name, ".") || name == "node_modules"
}

// addTree watches a folder's subfolders (and the folder itself when add),
// but hidden ones and node_modules, and returns the files it found in the folders it
// added: each folder is watched before its entries are read, so a file
// made in it is either found here or has an event of its own.
func (w *Watcher) addTree(dir string, add bool) (files []string) {
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if !d.IsDir() {
			if add {
				files = append(files, path)
			}
			return nil
		}
		if path == dir && !add {
			return nil
		}
		if skipFolder(d.Name()) {
			return filepath.SkipDir
		}
		if err := w.fs.Add(path); err != nil {
			w.log.Warn("cannot watch folder", "dir", path, "err", err)
		}
		return nil
	})
	return files
}
