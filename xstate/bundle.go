package xstate

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/evanw/esbuild/pkg/api"
)

//go:embed shim.js
var shimSource string

// bundleGlobal is the global the bundled module's exports are put in.
const bundleGlobal = "__sgModule"

// bundle bundles a machine or implementations module and its relative
// imports into one script for goja, with types stripped and 'xstate'
// resolved to stategate's shim. It also returns the files it read.
func bundle(file string) (code string, files []string, diags []Diagnostic) {
	var rejected []Diagnostic
	plugin := api.Plugin{
		Name: "stategate",
		Setup: func(b api.PluginBuild) {
			// 'xstate/actions', 'xstate/actors' and 'xstate/guards' export
			// parts of the same API; the shim has them all.
			b.OnResolve(api.OnResolveOptions{Filter: `^xstate(/(actions|actors|guards))?$`}, func(args api.OnResolveArgs) (api.OnResolveResult, error) {
				return api.OnResolveResult{Path: "xstate", Namespace: "stategate-xstate"}, nil
			})
			b.OnLoad(api.OnLoadOptions{Filter: `.*`, Namespace: "stategate-xstate"}, func(api.OnLoadArgs) (api.OnLoadResult, error) {
				return api.OnLoadResult{Contents: &shimSource, Loader: api.LoaderJS}, nil
			})
			// Anything that is not 'xstate' or a path (a package, a Node
			// built-in) cannot be imported: the machine runs in a sandbox.
			b.OnResolve(api.OnResolveOptions{Filter: `^[^./]`}, func(args api.OnResolveArgs) (api.OnResolveResult, error) {
				if filepath.IsAbs(args.Path) {
					return api.OnResolveResult{}, nil
				}
				return api.OnResolveResult{}, fmt.Errorf("cannot import %q: a machine module may import only 'xstate' and its own files (relative paths)", args.Path)
			})
		},
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", nil, []Diagnostic{{File: file, Msg: err.Error()}}
	}
	res := api.Build(api.BuildOptions{
		AbsWorkingDir: wd,
		EntryPoints:   []string{file},
		Bundle:        true,
		Write:         false,
		Format:        api.FormatIIFE,
		GlobalName:    bundleGlobal,
		Platform:      api.PlatformNeutral,
		Target:        api.ES2017,
		Charset:       api.CharsetUTF8,
		LogLevel:      api.LogLevelSilent,
		Metafile:      true,
		Sourcemap:     api.SourceMapInline,
		Plugins:       []api.Plugin{plugin},
	})
	for _, m := range res.Errors {
		d := Diagnostic{File: file, Msg: m.Text}
		if m.Location != nil {
			d.File = locationFile(wd, file, m.Location.File)
			d.Line = m.Location.Line
			if m.Location.LineText != "" {
				d.Msg = fmt.Sprintf("%s (column %d: %s)", m.Text, m.Location.Column+1, strings.TrimSpace(m.Location.LineText))
			}
		}
		rejected = append(rejected, d)
	}
	if len(rejected) > 0 {
		return "", nil, rejected
	}
	if len(res.OutputFiles) == 0 {
		return "", nil, []Diagnostic{{File: file, Msg: "esbuild produced no output"}}
	}
	return string(res.OutputFiles[0].Contents), metaInputs(wd, res.Metafile), nil
}

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
