package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

type initCmd struct {
	Dir string `arg:"" optional:"" default:"machines" help:"The machines folder to make (it may exist, but not hold a file of the same name)."`
}

// starterMachine is the machine init writes: small, working, commented.
const starterMachine = `// A support ticket, as a workflow an agent drives through MCP tools.
//
// Every event named in an "on" becomes a tool: ticket_assign,
// ticket_resolve, ticket_reopen... A tool is listed only while the ticket
// is in a state that takes its event, so an agent cannot resolve a ticket
// nobody was assigned. Edit this file while the server runs: it is
// reloaded, and clients are told their tool list changed.
import { setup, assign } from 'xstate';

export default setup({
  types: {
    context: {} as { assignee: string | null; resolution: string | null },
    events: {} as
      | { type: 'ASSIGN'; assignee: string }
      | { type: 'RESOLVE'; resolution: string }
      | { type: 'REOPEN' },
  },
}).createMachine({
  id: 'ticket',
  // Each handle (the ticket_id argument) is one ticket; without a handle
  // key, each session has one of its own.
  meta: { handleKey: 'ticket_id' },
  initial: 'open',
  context: { assignee: null, resolution: null },
  states: {
    open: {
      // What a state says of itself reaches the agent in every result.
      description: 'New, and nobody works on it yet.',
      on: {
        ASSIGN: {
          target: 'assigned',
          actions: assign({ assignee: ({ event }) => event.assignee }),
          // The tool's description, and its arguments (a JSON Schema:
          // calls that do not match are refused, naming the argument).
          description: 'Give the ticket to someone.',
          meta: {
            tool: {
              inputSchema: {
                type: 'object',
                properties: { assignee: { type: 'string', minLength: 1 } },
                required: ['assignee'],
              },
            },
          },
        },
      },
    },
    assigned: {
      description: 'Someone works on it.',
      on: {
        RESOLVE: {
          target: 'resolved',
          actions: assign({ resolution: ({ event }) => event.resolution }),
          description: 'Close the ticket, saying how it was solved.',
          meta: {
            tool: {
              inputSchema: {
                type: 'object',
                properties: { resolution: { type: 'string', minLength: 1 } },
                required: ['resolution'],
              },
            },
          },
        },
      },
    },
    resolved: {
      description: 'Solved.',
      on: { REOPEN: { target: 'open', description: 'It is not solved after all.' } },
    },
  },
});
`

func (c *initCmd) Run(stdout io.Writer) error {
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	file := filepath.Join(dir, "ticket.ts")
	if _, err := os.Stat(file); err == nil {
		return fmt.Errorf("%s exists already: init writes nothing over a file", file)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.WriteFile(file, []byte(starterMachine), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Wrote %s: a commented machine (a support ticket).\n\n", file)
	fmt.Fprint(stdout, nextSteps(dir, true))
	return nil
}

// nextSteps says how to use a machines folder: try it, then the config an
// MCP client needs, with absolute paths. ticket is set for the folder init
// wrote, whose ticket machine a first call is shown on.
func nextSteps(dir string, ticket bool) string {
	bin, built := binary()
	cmdline := shellQuote(bin) + " serve --machines " + shellQuote(dir)
	type server struct {
		Command string   `json:"command"`
		Args    []string `json:"args"`
	}
	config, _ := json.MarshalIndent(map[string]any{"mcpServers": map[string]server{"stategate": {
		Command: bin, Args: []string{"serve", "--machines", dir, "--data", filepath.Join(filepath.Dir(dir), ".stategate")},
	}}}, "", "  ")
	var b strings.Builder
	if !built {
		fmt.Fprintf(&b, "This is `go run`'s temporary binary; build one first, for the client to start:\n  go build -o stategate ./cmd/stategate\n(then use its path below).\n\n")
	}
	fmt.Fprintf(&b, "Try it with the MCP Inspector's CLI (node 22; the server's command line, then -- and the Inspector's own flags):\n  npx @modelcontextprotocol/inspector --cli %s -- --method tools/list\n", cmdline)
	if ticket {
		fmt.Fprintf(&b, "  npx @modelcontextprotocol/inspector --cli %s -- --method tools/call --tool-name ticket_assign --tool-arg ticket_id=T-1 --tool-arg assignee=ana\n", cmdline)
		fmt.Fprintf(&b, "Each --cli command is a session of its own, and the CLI calls only the tools its session lists: a new session lists what a new ticket allows (ticket_assign, ticket_status). A client keeps its session, which then lists T-1's next steps once it has seen T-1 (ticket_status with ticket_id T-1 shows them).\n")
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "Have an MCP client start it: in Claude Desktop's claude_desktop_config.json, Cursor's mcp.json or VS Code's mcp.json (\"servers\" there), add:\n%s\n\n", config)
	fmt.Fprintf(&b, "To watch its workflows live while the client runs it, add \"--inspect\", \"127.0.0.1:3001\" to the args and open http://127.0.0.1:3001/inspect: the instances, their states, the tools the agent has now, updated as it calls them.\n\n")
	fmt.Fprintf(&b, "Or serve Streamable HTTP, and watch it live in a browser:\n  %s --http 127.0.0.1:3001\n  (MCP at http://127.0.0.1:3001/mcp, the inspector at http://127.0.0.1:3001/inspect)\n", cmdline)
	return b.String()
}

// binary returns the path of the running binary, and whether it is one a
// client can start again (not `go run`'s temporary one).
func binary() (string, bool) {
	exe, err := os.Executable()
	if err != nil {
		return "stategate", false
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	return exe, !strings.Contains(exe, string(filepath.Separator)+"go-build")
}

// shellQuote quotes a path for a shell when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`!*?[]{}()<>|&;#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
