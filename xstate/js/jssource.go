package js

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-sourcemap/sourcemap"
)

// srcMap maps the positions of a bundle's code to the files it was
// bundled from, through the source map esbuild writes inline at the end
// of the code (with the files' contents).
type srcMap struct {
	code  string
	lines []int // the offsets at which the code's lines start
	sm    *sourcemap.Consumer
	// sources are the files of the map, as it names them.
	sources []string
	// wd and module name the files as the bundle's diagnostics do
	// (locationFile).
	wd, module string
	// sourceLines caches the offsets of the lines of each source's
	// content.
	sourceLines map[string][]int
}

// srcPos is a position in one of the files a bundle was made of.
type srcPos struct {
	source string // the file as the source map names it
	file   string // the file as diagnostics name it (locationFile)
	line   int    // from 1
	col    int    // from 1, in bytes
	text   string // the line's text
}

// shimSourcePrefix begins the source-map name of the xstate shim (its
// namespace in the bundle).
const shimSourcePrefix = "stategate-xstate:"

// user reports whether the position is in a file of the module's (not
// the xstate shim's).
func (p srcPos) user() bool { return !strings.HasPrefix(p.source, shimSourcePrefix) }

const inlineMapPrefix = "//# sourceMappingURL=data:application/json;base64,"

// newSrcMap reads the inline source map of a bundle's code.
func newSrcMap(code, wd, module string) (*srcMap, error) {
	trimmed := strings.TrimRight(code, "\n")
	last := trimmed[strings.LastIndexByte(trimmed, '\n')+1:]
	if !strings.HasPrefix(last, inlineMapPrefix) {
		return nil, errors.New("the bundle has no inline source map")
	}
	data, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(last, inlineMapPrefix))
	if err != nil {
		return nil, err
	}
	sm, err := sourcemap.Parse("", data)
	if err != nil {
		return nil, err
	}
	var names struct {
		Sources []string `json:"sources"`
	}
	if err := json.Unmarshal(data, &names); err != nil {
		return nil, err
	}
	return &srcMap{code: code, lines: lineStarts(code), sm: sm, sources: names.Sources, wd: wd, module: module, sourceLines: map[string][]int{}}, nil
}

// content returns the contents of a file, named as diagnostics name it,
// that the source map keeps; "" when the file is not one of the bundle's.
func (m *srcMap) content(file string) string {
	for _, src := range m.sources {
		if m.fileOf(src) == file {
			return m.sm.SourceContent(src)
		}
	}
	return ""
}

// lineStarts returns the offsets at which the lines of s start (lines end
// at \n; a \r before it is the line's, as in the source maps esbuild
// writes).
func lineStarts(s string) []int {
	out := []int{0}
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, i+1)
		}
	}
	return out
}

// pos maps an offset of the bundle's code to the position it was written
// at; false when the code there comes from no file (esbuild's helpers).
func (m *srcMap) pos(off int) (srcPos, bool) {
	if off < 0 || off > len(m.code) {
		return srcPos{}, false
	}
	line := sort.Search(len(m.lines), func(i int) bool { return m.lines[i] > off }) - 1
	// Source map columns count UTF-16 code units.
	col := utf16Len(m.code[m.lines[line]:off])
	source, _, sline, scol, ok := m.sm.Source(line+1, col)
	if !ok || source == "" || sline < 1 {
		return srcPos{}, false
	}
	text, byteCol := m.sourceLine(source, sline, scol)
	return srcPos{source: source, file: m.fileOf(source), line: sline, col: byteCol + 1, text: text}, true
}

// fileOf names a source of the map as diagnostics name files
// (locationFile): the map's are URLs, relative to the working folder
// (esbuild escapes a path's "(" as "%28").
func (m *srcMap) fileOf(source string) string {
	if p, err := url.PathUnescape(source); err == nil {
		source = p
	}
	return locationFile(m.wd, m.module, filepath.FromSlash(source))
}

// sourceLine returns the text of a line of a source (from 1), and the
// byte offset in it of a column counted in UTF-16 code units.
func (m *srcMap) sourceLine(source string, line, col16 int) (string, int) {
	content := m.sm.SourceContent(source)
	starts, ok := m.sourceLines[source]
	if !ok {
		starts = lineStarts(content)
		m.sourceLines[source] = starts
	}
	if line > len(starts) {
		return "", col16
	}
	end := len(content)
	if line < len(starts) {
		end = starts[line] - 1
	}
	text := strings.TrimSuffix(content[starts[line-1]:end], "\r")
	return text, utf16ToBytes(text, col16)
}

// utf16Len counts the UTF-16 code units of s.
func utf16Len(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			n++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		n += utf16.RuneLen(r)
		i += size
	}
	return n
}

// utf16ToBytes converts a column counted in UTF-16 code units of s to
// bytes.
func utf16ToBytes(s string, col16 int) int {
	n := 0
	for i := 0; i < len(s); {
		if n >= col16 {
			return i
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		n += utf16.RuneLen(r)
		i += size
	}
	return len(s)
}
