package config

import "fmt"

// esbuild's and goja's parsers recurse once per level of an expression or
// a statement, with no bound: a module of a megabyte of `(` or `!`, or of
// `a=a=...`, overflows the Go stack, which ends the process (a Go stack
// overflow cannot be recovered). A machine file is read through
// CheckNesting first, which refuses code nested far deeper than any
// program is, long before the parsers would fail: brackets (and a
// template's ${...}) more than maxSourceDepth deep, more than
// maxSourceChain operators in one expression (between a ; or a , and the
// next), or more than maxSourceChain else in one block.
const (
	maxSourceDepth = 1000
	maxSourceChain = 10000
)

// CheckNesting scans a machine file's text (JavaScript, TypeScript or
// JSON) with a light lexer: strings, template literals and comments are
// skipped; a regular expression literal is not told from a division, so
// the brackets in one count, which only makes the scan stricter.
func CheckNesting(src []byte) error {
	type frame struct {
		open  byte // ( [ { or $ for a template's ${
		elses int  // else keywords in the block
	}
	stack := []frame{{}}
	inTemplate := []bool{false} // per ${ level: whether its text is a template's
	ops, line := 0, 1
	tooDeep := func(what string) error {
		return fmt.Errorf("line %d: the code nests too deeply (%s): stategate refuses code nested more than %d levels, or expressions of more than %d operators, which its parsers cannot take", line, what, maxSourceDepth, maxSourceChain)
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		if c == '\n' {
			line++
		}
		if inTemplate[len(inTemplate)-1] {
			switch {
			case c == '\\':
				i++
			case c == '`':
				inTemplate = inTemplate[:len(inTemplate)-1]
			case c == '$' && i+1 < len(src) && src[i+1] == '{':
				i++
				if len(stack) > maxSourceDepth {
					return tooDeep("brackets")
				}
				stack = append(stack, frame{open: '$'})
				inTemplate = append(inTemplate, false)
			}
			continue
		}
		switch {
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			line++
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			for i += 2; i+1 < len(src) && !(src[i] == '*' && src[i+1] == '/'); i++ {
				if src[i] == '\n' {
					line++
				}
			}
			i++
		case c == '\'' || c == '"':
			for i++; i < len(src) && src[i] != c && src[i] != '\n'; i++ {
				if src[i] == '\\' {
					i++
				}
			}
		case c == '`':
			inTemplate = append(inTemplate, true)
		case c == '(' || c == '[' || c == '{':
			if len(stack) > maxSourceDepth {
				return tooDeep("brackets")
			}
			stack = append(stack, frame{open: c})
		case c == ')' || c == ']' || c == '}':
			if len(stack) > 1 {
				top := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				if top.open == '$' && len(inTemplate) > 1 {
					inTemplate = inTemplate[:len(inTemplate)-1] // back in the template's text
				}
			}
		case c == ';' || c == ',':
			ops = 0
		case c == '!' || c == '~' || c == '+' || c == '-' || c == '=' || c == '?' || c == ':' || c == '*' || c == '&' || c == '|' || c == '^' || c == '%' || c == '<' || c == '>':
			if ops++; ops > maxSourceChain {
				return tooDeep("operators")
			}
		case c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(src) && (src[j] == '_' || src[j] == '$' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9') {
				j++
			}
			switch string(src[i:j]) {
			case "typeof", "void", "delete", "await", "new", "yield":
				if ops++; ops > maxSourceChain {
					return tooDeep("operators")
				}
			case "else":
				top := &stack[len(stack)-1]
				if top.elses++; top.elses > maxSourceChain {
					return tooDeep("else")
				}
			}
			i = j - 1
		}
	}
	return nil
}
