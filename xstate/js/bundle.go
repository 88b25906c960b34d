package js

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/evanw/esbuild/pkg/api"

	"github.com/stategate/stategate/internal/config"
	"github.com/stategate/stategate/xstate"
)

//go:embed shim.js
var shimSource string

// bundled is a module bundled for goja.
type bundled struct {
	code  string
	wd    string   // the folder esbuild ran in, which the source map's paths are relative to
	files []string // the files read (absolute paths)
	// locks is set when a file's code may lock objects (objectLocks).
	locks bool
	// unavailable is set when a file's code may use a global machine
	// code does not have (mayUseUnavailable; see ioWarnings).
	unavailable bool
}

// Extensions a module may import without naming them, in the order they
// are tried (as esbuild's), and the loader of each file a module may
// import.
var (
	resolveExts = []string{".ts", ".mts", ".cts", ".js", ".mjs", ".cjs", ".json"}
	loaders     = map[string]api.Loader{
		".ts": api.LoaderTS, ".mts": api.LoaderTS, ".cts": api.LoaderTS,
		".js": api.LoaderJS, ".mjs": api.LoaderJS, ".cjs": api.LoaderJS,
		".json": api.LoaderJSON,
	}
	// A TypeScript import may name the .js its file compiles to.
	tsExts = map[string][]string{".js": {".ts"}, ".mjs": {".mts"}, ".cjs": {".cts"}}
)

// tsconfig makes TypeScript keep every import that is not `import type`,
// used or not (as TypeScript's verbatimModuleSyntax): an import of a
// package or a Node built-in then fails even when the module never uses
// it, as one it uses does. It also keeps esbuild from reading a
// tsconfig.json of its own.
const tsconfig = `{"compilerOptions": {"verbatimModuleSyntax": true}}`

// bundle bundles a machine or implementations module and its imports into
// one script for goja, with types stripped and 'xstate' resolved to
// stategate's shim. Every file is read by the plugin, through root
// (ReadFile's rules, and only files inside the root): esbuild reads none
// itself. It also returns the files it read.
//
// The exports go in a variable named exports (esbuild's global name; the
// code is compiled into a function, where it is a local: see instrument).
func bundle(file string, root *xstate.Root, exports string) (*bundled, []xstate.Diagnostic) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, []xstate.Diagnostic{{File: file, Msg: err.Error()}}
	}
	out := &bundled{wd: wd}
	plugin := api.Plugin{
		Name: "stategate",
		Setup: func(b api.PluginBuild) {
			// 'xstate/actions', 'xstate/actors' and 'xstate/guards' export
			// parts of the same API; the shim has them all. It is loaded as
			// TypeScript: a name it lacks, imported as a value though it is
			// a type (ActorRefFrom), is then not an error.
			b.OnResolve(api.OnResolveOptions{Filter: `^xstate(/(actions|actors|guards))?$`}, func(args api.OnResolveArgs) (api.OnResolveResult, error) {
				return api.OnResolveResult{Path: "xstate", Namespace: "stategate-xstate"}, nil
			})
			b.OnLoad(api.OnLoadOptions{Filter: `.*`, Namespace: "stategate-xstate"}, func(api.OnLoadArgs) (api.OnLoadResult, error) {
				return api.OnLoadResult{Contents: &shimSource, Loader: api.LoaderTS}, nil
			})
			b.OnResolve(api.OnResolveOptions{Filter: `.*`}, func(args api.OnResolveArgs) (api.OnResolveResult, error) {
				return resolveImport(root, args)
			})
			b.OnLoad(api.OnLoadOptions{Filter: `.*`, Namespace: "file"}, func(args api.OnLoadArgs) (api.OnLoadResult, error) {
				ext := strings.ToLower(filepath.Ext(args.Path))
				loader, ok := loaders[ext]
				if !ok {
					return api.OnLoadResult{}, fmt.Errorf("cannot import %s: a machine module may import only its own modules and JSON files (%s)", args.Path, strings.Join(resolveExts, ", "))
				}
				data, err := root.ReadFile(args.Path)
				if err != nil {
					return api.OnLoadResult{}, err
				}
				if err := config.CheckNesting(data); err != nil {
					return api.OnLoadResult{}, err
				}
				out.locks = out.locks || objectLocks.Match(data)
				out.unavailable = out.unavailable || mayUseUnavailable.Match(data)
				src := string(data)
				return api.OnLoadResult{Contents: &src, Loader: loader, ResolveDir: filepath.Dir(args.Path)}, nil
			})
		},
	}
	res := api.Build(api.BuildOptions{
		AbsWorkingDir: wd,
		EntryPoints:   []string{file},
		Bundle:        true,
		Write:         false,
		Format:        api.FormatIIFE,
		GlobalName:    exports,
		Platform:      api.PlatformNeutral,
		Target:        api.ES2017,
		Charset:       api.CharsetUTF8,
		LogLevel:      api.LogLevelSilent,
		Metafile:      true,
		Sourcemap:     api.SourceMapInline,
		TsconfigRaw:   tsconfig,
		Plugins:       []api.Plugin{plugin},
	})
	var rejected []xstate.Diagnostic
	for _, m := range res.Errors {
		d := xstate.Diagnostic{File: file, Msg: m.Text}
		if m.Location != nil {
			d.File = locationFile(wd, file, m.Location.File)
			d.Line = m.Location.Line
			d.Column = m.Location.Column + 1
			d.Source = strings.TrimSpace(m.Location.LineText)
		}
		if m.PluginName == "" {
			// esbuild's own words may quote the file ("Expected ; but
			// found ..."): not for clients (see xstate.Diagnostic.Public).
			d.Quotes = true
		}
		rejected = append(rejected, d)
	}
	if len(rejected) > 0 {
		return nil, rejected
	}
	if len(res.OutputFiles) == 0 {
		return nil, []xstate.Diagnostic{{File: file, Msg: "esbuild produced no output"}}
	}
	out.code = string(res.OutputFiles[0].Contents)
	out.files = metaInputs(wd, res.Metafile)
	return out, nil
}

// resolveImport resolves a module's import (or the entry point): 'xstate'
// is the shim (resolved before); a package or a Node built-in is refused;
// a path is a file inside the root, found as esbuild finds one (the path,
// with an extension added, a TypeScript file for a .js, an index file).
func resolveImport(root *xstate.Root, args api.OnResolveArgs) (api.OnResolveResult, error) {
	p := args.Path
	if !filepath.IsAbs(p) && !strings.HasPrefix(p, "./") && !strings.HasPrefix(p, "../") && p != "." && p != ".." {
		msg := fmt.Sprintf("cannot import %q: a machine module may import only 'xstate' and its own files (relative paths): it runs in a sandbox with no packages and no I/O", p)
		if isTypeScript(args.Importer) {
			msg += "; an import used only for its types should be `import type`"
		}
		return api.OnResolveResult{}, errors.New(msg)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(args.ResolveDir, p)
	}
	p = filepath.Clean(p)
	var candidates []string
	candidates = append(candidates, p)
	for _, ext := range resolveExts {
		candidates = append(candidates, p+ext)
	}
	for _, ext := range tsExts[strings.ToLower(filepath.Ext(p))] {
		candidates = append(candidates, strings.TrimSuffix(p, filepath.Ext(p))+ext)
	}
	for _, ext := range resolveExts {
		candidates = append(candidates, filepath.Join(p, "index"+ext))
	}
	for _, c := range candidates {
		if root.IsFile(c) {
			return api.OnResolveResult{Path: c}, nil
		}
	}
	// Say why the first one that is there cannot be read (outside the
	// root, not a regular file), else that none is.
	for _, c := range candidates {
		if exists(c) {
			if _, err := root.ReadFile(c); err != nil {
				return api.OnResolveResult{}, err
			}
		}
	}
	return api.OnResolveResult{}, fmt.Errorf("cannot find %q (from %s)", args.Path, args.ResolveDir)
}

func isTypeScript(file string) bool {
	switch strings.ToLower(filepath.Ext(file)) {
	case ".ts", ".mts", ".cts":
		return true
	}
	return false
}

// objectLocks matches code that may freeze or seal an object, or define
// a property with attributes of its own (Object.create takes them too):
// the dynamic objects that contexts and events are given as (see ctxObj)
// refuse that, so a module with such code gets plain objects instead; and
// only such code makes properties that are not enumerable (keysOf). The
// match is on words, so a mention in a comment or a name errs on the safe
// side.
var objectLocks = regexp.MustCompile(`\b(freeze|seal|preventExtensions|defineProperty|defineProperties|create)\b`)

// locationFile names the file of an esbuild message (a path relative to
// wd) as the user named the module: the module's own path for the module,
// and for a file it imports, a path relative to wd, or an absolute one
// when that would climb out of wd.
func locationFile(wd, module, loc string) string {
	abs := loc
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(wd, loc)
	}
	if m, err := filepath.Abs(module); err == nil && m == abs {
		return module
	}
	if rel, err := filepath.Rel(wd, abs); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return abs
}

// metaInputs lists the files of esbuild's metafile (not the shim), as
// absolute paths (the metafile's are relative to wd).
func metaInputs(wd, meta string) []string {
	var m struct {
		Inputs map[string]any `json:"inputs"`
	}
	if err := jsonUnmarshal([]byte(meta), &m); err != nil {
		return nil
	}
	var out []string
	for in := range m.Inputs {
		if !strings.Contains(in, ":") {
			if !filepath.IsAbs(in) {
				in = filepath.Join(wd, in)
			}
			out = append(out, in)
		}
	}
	sort.Strings(out)
	return out
}

// exists reports whether something is at path, whatever it is (a link
// that leads nowhere does not count).
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
