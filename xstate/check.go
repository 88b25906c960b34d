package xstate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/stategate/stategate/interp"
)

// machineExts are the extensions of machine files.
var machineExts = map[string]bool{".json": true, ".js": true, ".mjs": true, ".ts": true, ".mts": true}

// IsMachineFile reports whether a file name is that of a machine file: a
// JSON config or a JS/TS module, not a dotfile, an editor's backup, a
// conformance case or trace, or an implementations module (NAME.impl.ts).
func IsMachineFile(name string) bool {
	base := filepath.Base(name)
	if strings.HasPrefix(base, ".") || strings.HasSuffix(base, "~") || strings.HasPrefix(base, "#") {
		return false
	}
	ext := strings.ToLower(filepath.Ext(base))
	if !machineExts[ext] {
		return false
	}
	stem := strings.TrimSuffix(base, filepath.Ext(base))
	for _, suffix := range []string{".case", ".trace", ".impl", ".d", ".test", ".spec"} {
		if strings.HasSuffix(stem, suffix) {
			return false
		}
	}
	return true
}

// SkipFolder reports whether the walk of a machines folder skips a
// subfolder by its name: a hidden one (.git, .stategate) and node_modules
// (a project's packages: no machines, and none a machine may import), so
// that an XState project's folder can be served as it is.
func SkipFolder(name string) bool {
	return strings.HasPrefix(name, ".") || name == "node_modules"
}

// NotAMachine says why a machine file's name holds no machine, "" when it
// may: a JSON file is a machine only if it is an object with "states" (an
// XState config, as visual editors export them), so that the
// package.json, tsconfig.json and the like of a project's folder are not
// taken for machines. (A module that exports no machine is told when it
// loads: ErrNoMachine.)
func NotAMachine(file string) string {
	if !strings.EqualFold(filepath.Ext(file), ".json") {
		return ""
	}
	data, err := ReadFile(file)
	if err != nil {
		return "" // the load says what is wrong
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return "" // not an object, or not JSON: the load says so, with the line
	}
	if _, ok := top["states"]; ok {
		return ""
	}
	return `not a machine: a JSON file with no "states" (a machine is an XState config: {"id": ..., "initial": ..., "states": {...}})`
}

// CheckResult is what Check found in one file.
type CheckResult struct {
	File   string
	Diags  []Diagnostic // errors and warnings
	Failed bool
	// Skipped says why a file found in a folder is not a machine of its
	// own, as a server does not serve it: a module that exports no
	// machine (a helper), or a file another machine imports ("" for a
	// machine).
	Skipped string
	States  int
	Events  int
	// Machine is the machine the file makes (nil when it failed).
	Machine *interp.Machine
	// Found is set for a file found in a folder, not named itself: the
	// rules of a served folder (helpers, imported files, clashes) apply.
	Found bool

	noMachine bool     // failed for ErrNoMachine
	sources   []string // the files it was built from (Sources)
}

// Report is the result of checking files.
type Report struct{ Files []CheckResult }

// Failed reports whether any file failed.
func (r *Report) Failed() bool {
	for _, f := range r.Files {
		if f.Failed {
			return true
		}
	}
	return false
}

// Lines renders the report, one line per problem and a summary per file.
func (r *Report) Lines() []string {
	var out []string
	for _, f := range r.Files {
		for _, d := range f.Diags {
			out = append(out, d.Pretty()...)
		}
		if f.Failed {
			out = append(out, fmt.Sprintf("%s: FAILED", f.File))
		} else if f.Skipped != "" {
			out = append(out, fmt.Sprintf("%s: skipped (%s)", f.File, f.Skipped))
		} else {
			out = append(out, fmt.Sprintf("%s: ok (%d states, %d events)", f.File, f.States, f.Events))
		}
	}
	return out
}

// Check loads machine files with the loader's registry and reports every
// problem found, as a running server would when loading them.
//
// Files are read as a server reads them (see Load), each in the Loader's
// Root, else in the folder named (for a file found in it), or the file's
// own folder (for a file named).
func (l *Loader) Check(paths []string) (*Report, error) {
	var files []string
	named := map[string]bool{} // files named themselves, not found in a folder
	roots := map[string]string{}
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			files = append(files, p)
			named[p] = true
			roots[p] = filepath.Dir(p)
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && path != p && SkipFolder(d.Name()) {
				return filepath.SkipDir
			}
			if !d.IsDir() && IsMachineFile(path) {
				found = append(found, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		sort.Strings(found)
		for _, f := range found {
			roots[f] = p
		}
		files = append(files, found...)
	}
	rep := &Report{}
	seen := map[string]bool{}
	for _, f := range files {
		if machine, ok := machineOfImpl(f); ok {
			// An implementations module named itself (a shell glob) is
			// checked with its machine, as the server loads it.
			if machine == "" {
				rep.Files = append(rep.Files, CheckResult{File: f, Failed: true, Diags: []Diagnostic{{File: f,
					Msg: "an implementations module needs its machine beside it: " + strings.TrimSuffix(filepath.Base(f), implExt(f)) + ".json"}}})
				continue
			}
			roots[machine] = cmp.Or(roots[machine], roots[f])
			f = machine
		}
		if seen[f] {
			continue
		}
		seen[f] = true
		if why := NotAMachine(f); why != "" {
			rep.Files = append(rep.Files, CheckResult{File: f, Skipped: why, Found: !named[f]})
			continue
		}
		res := checkFile(l, f, cmp.Or(l.Root, roots[f]))
		if res.Failed && !named[f] && res.noMachine {
			// A helper module beside the machines, as a server skips it.
			res = CheckResult{File: f, Skipped: "it exports no machine: a helper module"}
		}
		res.Found = !named[f]
		rep.Files = append(rep.Files, res)
	}
	// A file another machine is built from (a JSON config a module
	// imports) is part of it, not a machine of its own, as a server
	// sees it.
	importer := map[string]string{}
	for _, r := range rep.Files {
		own, _ := filepath.Abs(r.File)
		for _, src := range r.sources {
			if src != own && importer[src] == "" {
				importer[src] = r.File
			}
		}
	}
	for i, r := range rep.Files {
		if abs, _ := filepath.Abs(r.File); importer[abs] != "" && !named[r.File] {
			rep.Files[i] = CheckResult{File: r.File, Found: true, Skipped: "part of the machine of " + importer[abs] + ", which imports it"}
		}
	}
	return rep, nil
}

// implExt returns the extension of an implementations module
// (NAME.impl.ts gives ".impl.ts"), or "".
func implExt(file string) string {
	for _, ext := range implExts {
		if strings.HasSuffix(file, ext) {
			return ext
		}
	}
	return ""
}

// machineOfImpl reports whether a file is an implementations module, and
// returns the JSON machine beside it that it belongs to ("" when there is
// none).
func machineOfImpl(file string) (string, bool) {
	ext := implExt(file)
	if ext == "" {
		return "", false
	}
	machine := strings.TrimSuffix(file, ext) + ".json"
	if _, err := os.Stat(machine); err != nil {
		return "", true
	}
	return machine, true
}

func checkFile(l *Loader, file, dir string) CheckResult {
	res := checkFileUnsorted(l, file, dir)
	sortDiagnostics(res.Diags)
	return res
}

// sortDiagnostics orders diagnostics by file, line and column (those with
// no line first in their file), errors and warnings together, keeping the
// order of those at one place.
func sortDiagnostics(ds []Diagnostic) {
	slices.SortStableFunc(ds, func(a, b Diagnostic) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
}

func checkFileUnsorted(l *Loader, file, dir string) CheckResult {
	res := CheckResult{File: file}
	var m *interp.Machine
	var warns []Diagnostic
	root, err := OpenRoot(dir)
	if err == nil {
		m, warns, err = l.loadIn(context.Background(), root, file)
	}
	res.Diags = append(res.Diags, warns...)
	if err != nil {
		res.Failed = true
		res.noMachine = errors.Is(err, ErrNoMachine)
		if le, ok := err.(*LoadError); ok {
			res.Diags = append(res.Diags, le.Diags...)
		} else {
			res.Diags = append(res.Diags, Diagnostic{File: file, Msg: err.Error()})
		}
		if root != nil {
			res.Diags = quoteSources(root, res.Diags)
		}
		return res
	}
	// A server refuses a machine that names a guard, actor or delay with
	// no implementation; a missing action is only a warning (XState skips
	// it).
	for _, d := range MissingDiagnostics(file, m) {
		res.Diags = append(res.Diags, d)
		res.Failed = res.Failed || !d.Warning
	}
	if root != nil {
		res.Diags = quoteSources(root, res.Diags)
	}
	res.States = len(m.Nodes)
	res.Events = len(m.EventTypes)
	res.sources = Sources(file, m)
	res.Machine = m
	return res
}

// quoteSources sets the Source of the diagnostics that have a line and
// none, from their files read in root (a file that cannot be read is
// left as it is).
func quoteSources(root *Root, ds []Diagnostic) []Diagnostic {
	read := map[string]bool{}
	for _, d := range ds {
		if d.Line <= 0 || d.Source != "" || d.File == "" || read[d.File] {
			continue
		}
		read[d.File] = true
		if data, err := root.ReadFile(d.File); err == nil {
			SetSources(ds, d.File, data)
		}
	}
	return ds
}

// SortOldestFirst sorts files by modification time, oldest first (a copy
// is newer than its original), keeping the order of files of one time; a
// file that cannot be read sorts first.
func SortOldestFirst(files []string) {
	mtime := make(map[string]time.Time, len(files))
	for _, f := range files {
		if info, err := os.Stat(f); err == nil {
			mtime[f] = info.ModTime()
		}
	}
	slices.SortStableFunc(files, func(a, b string) int { return mtime[a].Compare(mtime[b]) })
}
