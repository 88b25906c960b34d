package workflow

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/stategate/stategate/xstate"
)

// Library keeps the workflows of a folder of machine files: the last good
// version of each file, and the error of a file that fails to load now.
// Reload loads the folder again (a watcher of the folder calls it after
// each change); each reload gives what to serve now to Serve. The library
// knows nothing of how files are watched, nor of who serves its
// workflows.
type Library struct {
	dir       string
	loader    *xstate.Loader
	handleKey string
	log       *slog.Logger
	serve     func(Reload) error

	// reloadMu serializes reloads.
	reloadMu sync.Mutex

	mu     sync.Mutex
	good   map[string]*Workflow // by file
	errors map[string]error     // by file
	// warned is, by file, what the last warnings logged for it were
	// about (its version and the warnings): they are logged once per
	// version of the file. irregular are the files skipped for not being
	// regular files, warned about once.
	warned    map[string]string
	irregular map[string]bool
	// loaded is set once the folder was loaded a first time: machines
	// added later are logged as such.
	loaded bool
	// helpers are the modules that export no machine (modules the
	// machines import), by file, with their versions; notMachines the
	// JSON files that hold none (package.json), with theirs.
	helpers     map[string]string
	notMachines map[string]string
	// served is what was served last, by file.
	served map[string]*Workflow

	// reloaded are told after every reload (Subscribe).
	reloaded listeners[struct{}]
}

// A Reload is what a library serves after loading its folder.
type Reload struct {
	// Dir is the library's folder.
	Dir string
	// Workflows are the workflows to serve, sorted by file: each file's
	// last good version (a file that fails now may still serve one).
	Workflows []*Workflow
	// Failed are the files that fail to load now, with their errors.
	Failed map[string]error
}

// LibraryOptions configure a Library.
type LibraryOptions struct {
	// Dir is the folder of machine files (subfolders too, but hidden
	// ones).
	Dir string
	// Loader loads the files; one with no Root gets Dir as its root:
	// machine files read only files inside it.
	Loader *xstate.Loader
	// HandleKey is the argument that picks an instance, for machines
	// whose meta.handleKey names none.
	HandleKey string
	// Logger receives what the library says of the files (added,
	// reloaded, removed, rejected); slog.Default() when nil.
	Logger *slog.Logger
	// Serve is given what to serve after each reload (a gate's
	// Reloaded). A Serve that fails fails the reload.
	Serve func(Reload) error
}

// NewLibrary makes the library of a folder.
func NewLibrary(o LibraryOptions) *Library {
	if o.Loader == nil {
		o.Loader = &xstate.Loader{}
	}
	if o.Loader.Root == "" {
		o.Loader.Root = o.Dir
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Library{dir: o.Dir, loader: o.Loader, handleKey: o.HandleKey, log: o.Logger, serve: o.Serve,
		good: map[string]*Workflow{}, errors: map[string]error{}, helpers: map[string]string{}, notMachines: map[string]string{},
		warned: map[string]string{}, irregular: map[string]bool{}}
}

// Errors returns the files that fail to load now, with their errors (a
// failing file that loaded before is still served in its last good
// version).
func (lib *Library) Errors() map[string]error {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	out := make(map[string]error, len(lib.errors))
	for f, err := range lib.errors {
		out[f] = err
	}
	return out
}

// Reload loads the folder again: files whose content changed are loaded
// and validated fully before they replace their last good version; a file
// that fails keeps its last good version serving; a deleted file takes its
// tools away. What to serve then goes to Serve, and subscribers are told.
// Reloads are serialized.
func (lib *Library) Reload(ctx context.Context) error {
	lib.reloadMu.Lock()
	defer lib.reloadMu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	files, irregular, err := machineFiles(lib.dir)
	if err != nil {
		return err
	}
	lib.mu.Lock()
	lib.skipIrregular(irregular)
	before := maps.Clone(lib.errors) // errors are logged when they change
	// First load what changed, then decide: a file that another machine
	// imports (a JSON config a module builds its machine from, a helper)
	// is part of that machine, not one of its own.
	type loaded struct {
		m     *Workflow
		warns []xstate.Diagnostic
		err   error
		fresh bool // loaded now (not the last good version, unchanged)
	}
	results := make(map[string]loaded, len(files))
	present := map[string]bool{}
	var toLoad []string
	for _, f := range files {
		present[f] = true
		if why := xstate.NotAMachine(f); why != "" {
			if lib.notMachines[f] != fileVersion(f) {
				lib.log.Debug("skipped: "+why, "file", f)
				lib.notMachines[f] = fileVersion(f)
			}
			continue
		}
		delete(lib.notMachines, f)
		if m := lib.good[f]; m != nil && m.Version == sourcesVersion(m.Sources) {
			results[f] = loaded{m: m}
			continue
		}
		if v, ok := lib.helpers[f]; ok && v == fileVersion(f) {
			continue // a module that exports no machine, unchanged
		}
		toLoad = append(toLoad, f)
	}
	// The files are loaded without the lock: what is served, and the
	// files' errors, are read meanwhile as they were (reloads themselves
	// are serialized). A load ends with ctx (a shutdown).
	lib.mu.Unlock()
	for _, f := range toLoad {
		m, warns, err := LoadContext(ctx, lib.loader, f, lib.handleKey)
		results[f] = loaded{m: m, warns: warns, err: err, fresh: true}
	}
	lib.mu.Lock()
	if err := ctx.Err(); err != nil {
		lib.mu.Unlock()
		return err // nothing changes: what was served stays
	}
	var good []*Workflow
	for _, r := range results {
		if r.m != nil {
			good = append(good, r.m)
		}
	}
	imported := importedBy(good)
	for _, f := range files {
		r, ok := results[f]
		if !ok {
			continue
		}
		noMachine := errors.Is(r.err, xstate.ErrNoMachine) && lib.good[f] == nil
		if imported[absPath(f)] || noMachine {
			// A helper module or a file another machine is built from: not
			// served. (A machine file that stops exporting its machine
			// keeps its last good version, as for any other error.)
			if _, known := lib.helpers[f]; !known {
				lib.log.Info("not served on its own: imported by a machine, or exports none", "file", f)
			}
			lib.helpers[f] = ""
			if noMachine && !imported[absPath(f)] {
				lib.helpers[f] = fileVersion(f) // loaded again only once it changes
			}
			delete(lib.good, f)
			delete(lib.errors, f)
			continue
		}
		delete(lib.helpers, f)
		if r.fresh {
			lib.warnOnce(f, r.warns)
		}
		if r.err != nil {
			lib.errors[f] = r.err
			continue
		}
		if old := lib.good[f]; old != nil && r.fresh {
			lib.log.Info("machine reloaded", "machine", r.m.ID, "file", f, "version", r.m.Version)
		}
		delete(lib.errors, f)
		lib.good[f] = r.m
	}
	for f, m := range lib.good {
		if !present[f] {
			lib.log.Info("machine file removed: its tools are gone", "machine", m.ID, "file", f)
			delete(lib.good, f)
		}
	}
	for f := range lib.errors {
		if !present[f] {
			delete(lib.errors, f)
		}
	}
	for f := range lib.helpers {
		if !present[f] {
			delete(lib.helpers, f)
		}
	}
	for f := range lib.notMachines {
		if !present[f] {
			delete(lib.notMachines, f)
		}
	}
	for f := range lib.warned {
		if !present[f] {
			delete(lib.warned, f)
		}
	}
	ms := lib.withoutClashes()
	lib.copies(ms)
	for f, err := range lib.errors {
		if before[f] == nil || before[f].Error() != err.Error() {
			lib.log.Error("machine file rejected; its last good version (if any) keeps serving", "file", f, "err", err)
		}
	}
	if lib.loaded {
		for _, m := range ms {
			if lib.served[m.File] == nil {
				lib.log.Info("machine added", "machine", m.ID, "file", m.File, "tools", len(m.ToolNames()), "version", m.Version)
			}
		}
	}
	lib.loaded = true
	lib.mu.Unlock()
	defer lib.reloaded.tell(ctx, struct{}{})
	if lib.serve != nil {
		if err := lib.serve(Reload{Dir: lib.dir, Workflows: ms, Failed: lib.Errors()}); err != nil {
			return err
		}
	}
	lib.mu.Lock()
	lib.served = map[string]*Workflow{}
	for _, m := range ms {
		lib.served[m.File] = m
	}
	lib.mu.Unlock()
	return nil
}

// Workflows returns the workflows served after the last reload, sorted
// by file.
func (lib *Library) Workflows() []*Workflow {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	out := slices.Collect(maps.Values(lib.served))
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out
}

// Subscribe calls f after every reload (whether or not anything changed):
// what is served and the files' errors (Errors) are the new ones when f
// runs. f must return quickly. The returned function ends the
// subscription.
func (lib *Library) Subscribe(f func()) (cancel func()) {
	return lib.reloaded.add(func(context.Context, struct{}) { f() })
}

// Dir returns the library's folder.
func (lib *Library) Dir() string { return lib.dir }

// withoutClashes returns the good machines to serve, sorted by file,
// leaving out a file whose machine takes a machine id or tool name that
// another file's machine has: the one served already keeps it (else the
// older file), and the other file's error says why. Such a file keeps the
// version it served before, if that one clashes with nothing. (A copy of
// a machine file dropped in the folder does not stop the others.)
func (lib *Library) withoutClashes() []*Workflow {
	files := slices.Sorted(maps.Keys(lib.good))
	// Files served now come first, then older files (a copy is newer than
	// its original).
	xstate.SortOldestFirst(files)
	slices.SortStableFunc(files, func(a, b string) int {
		_, sa := lib.served[a]
		_, sb := lib.served[b]
		switch {
		case sa && !sb:
			return -1
		case sb && !sa:
			return 1
		}
		return 0
	})
	held := claims{}
	clash := func(m *Workflow) error {
		switch kind, name, f := held.taken(m); kind {
		case "id":
			return fmt.Errorf("%w: %s", ErrToolClash, copyMessage(m.File, name, f))
		case "tool":
			return fmt.Errorf("%w: tool %s is already served from %s", ErrToolClash, name, f)
		}
		return nil
	}
	var out []*Workflow
	for _, f := range files {
		m := lib.good[f]
		if err := clash(m); err != nil {
			lib.errors[f] = err
			if prev := lib.served[f]; prev != nil && prev != m && clash(prev) == nil {
				m = prev
			} else {
				continue
			}
		}
		held.take(m, f)
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out
}

// claims records which file's machine holds each machine id and tool
// name, for the rule that a folder's first machine keeps them.
type claims struct{ ids, names map[string]string }

// taken returns what of m's a machine taken before holds: kind "id" (its
// machine id) or "tool" (a tool name), the name, and that machine's file;
// kind "" when nothing.
func (c *claims) taken(m *Workflow) (kind, name, file string) {
	if f, dup := c.ids[m.ID]; dup {
		return "id", m.ID, f
	}
	for _, n := range m.ToolNames() {
		if f, dup := c.names[n]; dup {
			return "tool", n, f
		}
	}
	return "", "", ""
}

// take records m's id and tool names as held by file.
func (c *claims) take(m *Workflow, file string) {
	if c.ids == nil {
		c.ids, c.names = map[string]string{}, map[string]string{}
	}
	c.ids[m.ID] = file
	for _, n := range m.ToolNames() {
		c.names[n] = file
	}
}

// importedBy returns the files (absolute paths) that machines were built
// from besides their own files.
func importedBy(ms []*Workflow) map[string]bool {
	out := map[string]bool{}
	for _, m := range ms {
		own := absPath(m.File)
		for _, f := range m.Sources {
			if f != own {
				out[f] = true
			}
		}
	}
	return out
}

func absPath(f string) string {
	if a, err := filepath.Abs(f); err == nil {
		return a
	}
	return f
}

// machineFiles lists the machine files of a folder and its subfolders:
// regular files, and links to regular files (whether they lead inside the
// folder is the loader's to say); irregular are those of machine files'
// names that are not (a FIFO, a device, a socket), which are never read.
func machineFiles(dir string) (files, irregular []string, err error) {
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir && xstate.SkipFolder(d.Name()) {
			return filepath.SkipDir
		}
		if d.IsDir() || !xstate.IsMachineFile(path) {
			return nil
		}
		mode := d.Type()
		if mode&fs.ModeSymlink != 0 {
			if info, err := os.Stat(path); err == nil { // follows the link; opens nothing
				mode = info.Mode().Type()
			}
		}
		if mode.IsRegular() {
			files = append(files, path)
		} else if mode&fs.ModeSymlink == 0 {
			irregular = append(irregular, path) // a link that leads nowhere is as a missing file
		}
		return nil
	})
	sort.Strings(files)
	return files, irregular, err
}

// skipIrregular warns, once, of the files of machine files' names that
// are not regular files (under lib.mu).
func (lib *Library) skipIrregular(files []string) {
	now := map[string]bool{}
	for _, f := range files {
		now[f] = true
		if !lib.irregular[f] {
			lib.log.Warn("not a regular file (a FIFO, a device or a socket): skipped; machine files are regular files", "file", f)
		}
	}
	lib.irregular = now
}

// warnOnce logs a file's warnings, once per version of the file (and of
// what it warns about): a file rejected again at every reload does not
// log them again (under lib.mu).
func (lib *Library) warnOnce(f string, warns []xstate.Diagnostic) {
	if len(warns) == 0 {
		delete(lib.warned, f)
		return
	}
	var key strings.Builder
	key.WriteString(fileVersion(f))
	for _, w := range warns {
		key.WriteString("\n" + w.String())
	}
	if lib.warned[f] == key.String() {
		return
	}
	lib.warned[f] = key.String()
	for _, w := range warns {
		lib.log.Warn(w.String())
	}
}

// copies gives a file rejected for missing implementations whose machine
// id a served machine of another file has (a copy of a JSON machine,
// whose implementations module is looked up by the copy's name) the error
// that tells: the id is taken (under lib.mu).
func (lib *Library) copies(served []*Workflow) {
	byID := map[string]*Workflow{}
	for _, m := range served {
		byID[m.ID] = m
	}
	for f, err := range lib.errors {
		var le *xstate.LoadError
		if !errors.As(err, &le) || le.Machine == "" {
			continue
		}
		if m := byID[le.Machine]; m != nil && m.File != f {
			lib.errors[f] = fmt.Errorf("%w: %s", ErrToolClash, copyMessage(f, le.Machine, m.File))
		}
	}
}

// copyMessage says why a file whose machine has the id of another file's
// is rejected, and how to make it a machine of its own.
func copyMessage(file, id, other string) string {
	return fmt.Sprintf("machine id %q is already served from %s: %s", id, other, copyHint(file))
}

// copyHint says how a copy of a machine file becomes a machine of its own.
func copyHint(file string) string {
	hint := "a copy of a machine file needs an id of its own"
	if strings.EqualFold(filepath.Ext(file), ".json") {
		stem := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
		hint += fmt.Sprintf(" (and, for a JSON machine, its implementations beside it, as %s.impl.ts)", stem)
	}
	return hint
}

// ErrToolClash is wrapped by the error of a machine whose id or tool
// names another machine has (SetWorkflows, a library's file that copies
// another's).
var ErrToolClash = errors.New("tool name clash")

// PublicError renders a machine file's error for clients: the file, line
// and what is wrong, without quoting a line of the file
// (xstate.PublicError), with paths relative to the machines folder dir
// (the server's own folders are not the clients' business).
func PublicError(dir string, err error) string {
	s := xstate.PublicError(err)
	if dir == "" {
		return s
	}
	for _, r := range []string{absPath(dir), filepath.Clean(dir)} {
		s = strings.ReplaceAll(s, r+string(filepath.Separator), "")
		s = strings.ReplaceAll(s, " "+r, "")
	}
	return s
}
