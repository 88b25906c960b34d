package upstream

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	env := map[string]string{"TOKEN": "s3cret", "HOME_DIR": "/home/u", "BIN": "node"}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	file := filepath.Join("/etc", "sg", "upstreams.json")
	tests := []struct {
		name  string
		data  string
		want  func(t *testing.T, c *Config)
		error []string // substrings of the error; nil: no error
	}{
		{
			name: "stdio with expansion",
			data: `{"mcpServers": {"fs": {"command": "${BIN}", "args": ["--root", "${HOME_DIR}/x", "$NOT_EXPANDED"],
				"env": {"T": "Bearer ${TOKEN}"}, "cwd": "${HOME_DIR}", "description": "d", "alwaysAllow": ["a"], "autoApprove": [], "type": "stdio"}}}`,
			want: func(t *testing.T, c *Config) {
				s := c.Servers["fs"]
				if s.Name != "fs" || s.Command != "node" || strings.Join(s.Args, " ") != "--root /home/u/x $NOT_EXPANDED" ||
					s.Env["T"] != "Bearer s3cret" || s.Cwd != "/home/u" || s.Timeout != DefaultTimeout || s.Expose != "" {
					t.Fatalf("got %+v", s)
				}
			},
		},
		{
			name: "http with headers, expose and timeout seconds",
			data: `{"mcpServers": {"gh": {"url": "https://api.example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"},
				"expose": "always", "timeout": 1.5, "type": "streamable-http"}}}`,
			want: func(t *testing.T, c *Config) {
				s := c.Servers["gh"]
				if s.URL != "https://api.example.com/mcp" || s.Headers["Authorization"] != "Bearer s3cret" ||
					s.Expose != "always" || s.Timeout != 1500*time.Millisecond || s.Stdio() {
					t.Fatalf("got %+v", s)
				}
			},
		},
		{
			name: "timeout as duration string",
			data: `{"mcpServers": {"a": {"url": "http://localhost:1/mcp", "type": "http", "timeout": "90s"}}}`,
			want: func(t *testing.T, c *Config) {
				if c.Servers["a"].Timeout != 90*time.Second {
					t.Fatalf("got %v", c.Servers["a"].Timeout)
				}
			},
		},
		{
			name: "relative cwd is relative to the file's folder",
			data: `{"mcpServers": {"a": {"command": "x", "cwd": "tools/a"}}}`,
			want: func(t *testing.T, c *Config) {
				if got, want := c.Servers["a"].Cwd, filepath.Join("/etc", "sg", "tools", "a"); got != want {
					t.Fatalf("cwd %q, want %q", got, want)
				}
			},
		},
		{
			name: "disabled server is skipped, its variables not needed",
			data: `{"mcpServers": {"a": {"command": "x"}, "b": {"command": "${MISSING}", "disabled": true}}}`,
			want: func(t *testing.T, c *Config) {
				if _, ok := c.Servers["b"]; ok || len(c.Servers) != 1 {
					t.Fatalf("got %+v", c.Servers)
				}
			},
		},
		{
			name: "forwardMeta",
			data: `{"mcpServers": {"a": {"url": "http://h/mcp", "forwardMeta": ["traceparent", "io.modelcontextprotocol/clientInfo"]}}}`,
			want: func(t *testing.T, c *Config) {
				if got := strings.Join(c.Servers["a"].ForwardMeta, " "); got != "traceparent io.modelcontextprotocol/clientInfo" {
					t.Fatalf("forwardMeta %q", got)
				}
			},
		},
		{name: "forwardMeta not strings", data: `{"mcpServers": {"a": {"command": "x", "forwardMeta": "traceparent"}}}`,
			error: []string{file, `server "a"`, `"forwardMeta" must be an array`}},
		{name: "forwardMeta empty key", data: `{"mcpServers": {"a": {"command": "x", "forwardMeta": ["x", ""]}}}`,
			error: []string{`"forwardMeta"[1] is empty`}},
		{name: "forwardMeta progressToken", data: `{"mcpServers": {"a": {"command": "x", "forwardMeta": ["progressToken"]}}}`,
			error: []string{file, `server "a"`, `"forwardMeta"[0]`, "progressToken", "token of stategate's own"}},
		{name: "forwardMeta twice", data: `{"mcpServers": {"a": {"command": "x", "forwardMeta": ["k", "k"]}}}`,
			error: []string{`"forwardMeta"[1]`, `"k" is listed twice`}},
		{name: "missing variable", data: `{"mcpServers": {"gh": {"url": "http://h/mcp", "headers": {"A": "${GH_TOKEN}"}}}}`,
			error: []string{file, `server "gh"`, "GH_TOKEN", "not set"}},
		{name: "unknown field", data: `{"mcpServers": {"fs": {"comand": "x"}}}`,
			error: []string{file, `server "fs"`, `unknown field "comand"`}},
		{name: "unknown top-level field", data: `{"mcpServers": {}, "servers": {}}`, error: []string{file, `"servers"`}},
		{name: "no mcpServers", data: `{}`, error: []string{file, "mcpServers"}},
		{name: "not JSON", data: `{"mcpServers": `, error: []string{file, "JSON"}},
		{name: "both command and url", data: `{"mcpServers": {"a": {"command": "x", "url": "http://h/"}}}`,
			error: []string{file, `server "a"`, "both"}},
		{name: "neither command nor url", data: `{"mcpServers": {"a": {"args": []}}}`,
			error: []string{file, `server "a"`, "neither"}},
		{name: "sse refused", data: `{"mcpServers": {"a": {"url": "http://h/sse", "type": "sse"}}}`,
			error: []string{file, `server "a"`, "SSE", "not supported"}},
		{name: "unknown type", data: `{"mcpServers": {"a": {"command": "x", "type": "ws"}}}`, error: []string{`"ws"`}},
		{name: "type against command", data: `{"mcpServers": {"a": {"command": "x", "type": "http"}}}`, error: []string{`needs a "url"`}},
		{name: "wrong type of args", data: `{"mcpServers": {"a": {"command": "x", "args": "y"}}}`,
			error: []string{file, `server "a"`, `"args" must be an array of strings`}},
		{name: "wrong type of disabled", data: `{"mcpServers": {"a": {"command": "x", "disabled": "yes"}}}`,
			error: []string{`"disabled" must be true or false`}},
		{name: "null env", data: `{"mcpServers": {"a": {"command": "x", "env": null}}}`, error: []string{`"env" must be`}},
		{name: "bad expose", data: `{"mcpServers": {"a": {"command": "x", "expose": "never"}}}`,
			error: []string{file, `server "a"`, `"expose"`, "never"}},
		{name: "bad name", data: `{"mcpServers": {"a.b": {"command": "x"}}}`, error: []string{file, `server "a.b"`, "name"}},
		{name: "long name", data: `{"mcpServers": {"` + strings.Repeat("a", 65) + `": {"command": "x"}}}`, error: []string{"name"}},
		{name: "bad url", data: `{"mcpServers": {"a": {"url": "ftp://h/"}}}`, error: []string{`"url"`}},
		{name: "headers on a command", data: `{"mcpServers": {"a": {"command": "x", "headers": {}}}}`, error: []string{`"headers"`}},
		{name: "cwd on a url", data: `{"mcpServers": {"a": {"url": "http://h/", "cwd": "/"}}}`, error: []string{`"cwd"`}},
		{name: "zero timeout", data: `{"mcpServers": {"a": {"command": "x", "timeout": 0}}}`, error: []string{`"timeout"`}},
		{name: "bad timeout string", data: `{"mcpServers": {"a": {"command": "x", "timeout": "soon"}}}`, error: []string{`"timeout"`, "soon"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse(file, []byte(tt.data), getenv)
			if tt.error != nil {
				if err == nil {
					t.Fatalf("no error; want one with %q", tt.error)
				}
				for _, s := range tt.error {
					if !strings.Contains(err.Error(), s) {
						t.Fatalf("error %q lacks %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.want(t, c)
		})
	}
}

func TestServerEqual(t *testing.T) {
	a := Server{Name: "a", Command: "x", Args: []string{"1"}, Env: map[string]string{"K": "v"}, Timeout: time.Second}
	b := a
	b.Args = []string{"1"}
	b.Env = map[string]string{"K": "v"}
	if !a.Equal(b) {
		t.Fatal("equal entries differ")
	}
	b.Env = map[string]string{"K": "w"}
	if a.Equal(b) {
		t.Fatal("different env is equal")
	}
	c := a
	c.Timeout = 2 * time.Second
	if a.Equal(c) {
		t.Fatal("different timeout is equal")
	}
	d := a
	d.ForwardMeta = []string{"traceparent"}
	if a.Equal(d) {
		t.Fatal("different forwardMeta is equal")
	}
}
