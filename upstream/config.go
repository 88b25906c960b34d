package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// DefaultTimeout is a server's deadline for one call when its entry sets
// none.
const DefaultTimeout = 60 * time.Second

// ExposeAlways is the Expose value that shows a server's tools even when
// no machine binds them.
const ExposeAlways = "always"

// Config is an upstreams file: {"mcpServers": {NAME: Server, ...}}.
// Disabled entries are not in it.
type Config struct {
	Servers map[string]Server
}

// Server is one entry of an upstreams file: a stdio server (Command) or a
// Streamable HTTP one (URL), never both.
type Server struct {
	Name string // the entry's key; usable as a tool-name prefix

	// stdio
	Command string
	Args    []string
	Env     map[string]string // added to stategate's own environment
	Cwd     string            // absolute, or relative to the process's; "" is stategate's own

	// Streamable HTTP
	URL     string
	Headers map[string]string

	Expose  string        // "" (tools no machine binds are hidden) or "always"
	Timeout time.Duration // per call; DefaultTimeout unless the entry says

	// ForwardMeta are the keys of a caller's _meta that its calls to the
	// server carry, as the caller gave them ("forwardMeta"). Others are
	// not sent (a client's _meta may say who it is and what it can do);
	// a progress token is always replaced by one of stategate's own.
	ForwardMeta []string
}

// Stdio reports whether the server is a child process.
func (s Server) Stdio() bool { return s.Command != "" }

// Equal reports whether two entries describe the same server, so that a
// reload restarts only the entries that changed.
func (s Server) Equal(o Server) bool {
	return s.Name == o.Name && s.Command == o.Command && slices.Equal(s.Args, o.Args) &&
		maps.Equal(s.Env, o.Env) && s.Cwd == o.Cwd && s.URL == o.URL &&
		maps.Equal(s.Headers, o.Headers) && s.Expose == o.Expose && s.Timeout == o.Timeout &&
		slices.Equal(s.ForwardMeta, o.ForwardMeta)
}

// Load reads and parses an upstreams file, expanding ${VAR} from the
// process's environment.
func Load(file string) (*Config, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("upstreams file: %w", err)
	}
	return Parse(file, data, os.LookupEnv)
}

var (
	nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	varRE  = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
)

// ignoredKeys are keys other clients put in entries that mean nothing to
// stategate.
var ignoredKeys = map[string]bool{"description": true, "alwaysAllow": true, "autoApprove": true}

// Parse parses an upstreams file's data; file names it in errors, and its
// folder is what a relative cwd is relative to. getenv expands ${VAR} in
// command, args, env values, cwd, url and header values.
func Parse(file string, data []byte, getenv func(string) (string, bool)) (*Config, error) {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%s: %s", file, fmt.Sprintf(format, a...))
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fail("not a JSON object: %v", err)
	}
	if top == nil {
		return nil, fail("not a JSON object")
	}
	for k := range top {
		if k != "mcpServers" {
			return nil, fail("unknown field %q (want only \"mcpServers\")", k)
		}
	}
	raw, ok := top["mcpServers"]
	if !ok {
		return nil, fail(`no "mcpServers" object`)
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil || entries == nil {
		return nil, fail(`"mcpServers" must be an object of servers`)
	}
	names := slices.Sorted(maps.Keys(entries))
	c := &Config{Servers: make(map[string]Server, len(entries))}
	for _, name := range names {
		s, disabled, err := parseServer(file, name, entries[name], getenv)
		if err != nil {
			return nil, err
		}
		if !disabled {
			c.Servers[name] = s
		}
	}
	return c, nil
}

func parseServer(file, name string, raw json.RawMessage, getenv func(string) (string, bool)) (s Server, disabled bool, err error) {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%s: server %q: %s", file, name, fmt.Sprintf(format, a...))
	}
	if !nameRE.MatchString(name) {
		return s, false, fail("the name must be 1 to 64 letters, digits, '_' or '-' (it prefixes the server's tool names)")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return s, false, fail("must be an object")
	}
	s.Name = name
	var typ string
	var timeout json.RawMessage
	field := func(key string, into any, want string) error {
		if err := strictUnmarshal(fields[key], into); err != nil {
			return fail("%q must be %s", key, want)
		}
		return nil
	}
	for _, key := range slices.Sorted(maps.Keys(fields)) {
		var err error
		switch key {
		case "command":
			err = field(key, &s.Command, "a string")
		case "args":
			err = field(key, &s.Args, "an array of strings")
		case "env":
			err = field(key, &s.Env, "an object of strings")
		case "cwd":
			err = field(key, &s.Cwd, "a string")
		case "url":
			err = field(key, &s.URL, "a string")
		case "headers":
			err = field(key, &s.Headers, "an object of strings")
		case "expose":
			err = field(key, &s.Expose, `"always"`)
		case "type":
			err = field(key, &typ, "a string")
		case "disabled":
			err = field(key, &disabled, "true or false")
		case "timeout":
			timeout = fields[key]
		case "forwardMeta":
			err = field(key, &s.ForwardMeta, "an array of _meta keys (strings)")
		default:
			if !ignoredKeys[key] {
				return s, false, fail("unknown field %q", key)
			}
		}
		if err != nil {
			return s, false, err
		}
	}
	for i, k := range s.ForwardMeta {
		switch {
		case k == "":
			return s, false, fail(`"forwardMeta"[%d] is empty`, i)
		case k == "progressToken":
			return s, false, fail(`"forwardMeta"[%d]: "progressToken" is never forwarded as the caller gave it: each call gets a token of stategate's own, and its progress goes back to the caller under the caller's`, i)
		case slices.Contains(s.ForwardMeta[:i], k):
			return s, false, fail(`"forwardMeta"[%d]: %q is listed twice`, i, k)
		}
	}
	if s.Expose != "" && s.Expose != ExposeAlways {
		return s, false, fail(`"expose" must be "always" or absent, not %q`, s.Expose)
	}
	s.Timeout = DefaultTimeout
	if timeout != nil {
		if s.Timeout, err = parseTimeout(timeout); err != nil {
			return s, false, fail("%v", err)
		}
	}
	switch typ {
	case "", "stdio", "http", "streamable-http":
	case "sse":
		return s, false, fail(`"type": "sse": the SSE transport is not supported; use a Streamable HTTP URL`)
	default:
		return s, false, fail(`"type" %q is not one of "stdio", "http", "streamable-http"`, typ)
	}
	if disabled {
		return s, true, nil
	}
	expand := func(what, v string) (string, error) {
		var missing string
		out := varRE.ReplaceAllStringFunc(v, func(m string) string {
			name := m[2 : len(m)-1]
			val, ok := getenv(name)
			if !ok && missing == "" {
				missing = name
			}
			return val
		})
		if missing != "" {
			return "", fail("%s: environment variable %s is not set", what, missing)
		}
		return out, nil
	}
	if s.Command, err = expand(`"command"`, s.Command); err != nil {
		return s, false, err
	}
	for i := range s.Args {
		if s.Args[i], err = expand(fmt.Sprintf(`"args"[%d]`, i), s.Args[i]); err != nil {
			return s, false, err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		if s.Env[k], err = expand(fmt.Sprintf(`"env".%s`, k), s.Env[k]); err != nil {
			return s, false, err
		}
	}
	if s.Cwd, err = expand(`"cwd"`, s.Cwd); err != nil {
		return s, false, err
	}
	if s.URL, err = expand(`"url"`, s.URL); err != nil {
		return s, false, err
	}
	for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
		if s.Headers[k], err = expand(fmt.Sprintf(`"headers".%s`, k), s.Headers[k]); err != nil {
			return s, false, err
		}
	}
	_, hasCommand := fields["command"]
	_, hasURL := fields["url"]
	switch {
	case hasCommand && hasURL:
		return s, false, fail(`has both "command" and "url"; a server is either a command (stdio) or a URL (Streamable HTTP)`)
	case !hasCommand && !hasURL:
		return s, false, fail(`has neither "command" (stdio) nor "url" (Streamable HTTP)`)
	case hasCommand:
		if typ != "" && typ != "stdio" {
			return s, false, fail(`"type" %q needs a "url", not a "command"`, typ)
		}
		if s.Command == "" {
			return s, false, fail(`"command" is empty`)
		}
		if s.Headers != nil {
			return s, false, fail(`"headers" apply to a "url" only`)
		}
		if s.Cwd != "" && !filepath.IsAbs(s.Cwd) {
			s.Cwd = filepath.Join(filepath.Dir(file), s.Cwd)
		}
	default:
		if typ == "stdio" {
			return s, false, fail(`"type" "stdio" needs a "command", not a "url"`)
		}
		for _, k := range []string{"args", "env", "cwd"} {
			if _, ok := fields[k]; ok {
				return s, false, fail("%q applies to a \"command\" only", k)
			}
		}
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return s, false, fail(`"url" %q is not an http or https URL`, s.URL)
		}
	}
	return s, false, nil
}

// strictUnmarshal decodes a field's value, refusing null and values of
// another type (json.Unmarshal takes null for the zero value).
func strictUnmarshal(raw json.RawMessage, into any) error {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return fmt.Errorf("null")
	}
	return json.Unmarshal(raw, into)
}

func parseTimeout(raw json.RawMessage) (time.Duration, error) {
	var secs float64
	if err := json.Unmarshal(raw, &secs); err == nil {
		d := time.Duration(secs * float64(time.Second))
		if secs <= 0 || secs > 1e6 {
			return 0, fmt.Errorf(`"timeout" must be a positive number of seconds (at most 1000000), not %v`, secs)
		}
		return d, nil
	}
	var str string
	if err := json.Unmarshal(raw, &str); err != nil {
		return 0, fmt.Errorf(`"timeout" must be a number of seconds or a duration such as "90s"`)
	}
	d, err := time.ParseDuration(strings.TrimSpace(str))
	if err != nil || d <= 0 {
		return 0, fmt.Errorf(`"timeout" %q is not a positive duration such as "90s"`, str)
	}
	return d, nil
}

// sortedNames returns a config's server names in order.
func (c *Config) sortedNames() []string {
	names := make([]string, 0, len(c.Servers))
	for n := range c.Servers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
