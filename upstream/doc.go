// Package upstream owns the MCP servers stategate gates: the upstreams
// file that names them (the mcpServers shape of Claude Desktop, Cursor and
// VS Code), the servers themselves (stdio child processes and Streamable
// HTTP connections, through mcp-go's client, restarted or reconnected with
// backoff), the tools each offers, and the calls forwarded to them
// (deadlines, cancellation, progress and logging notifications relayed to
// the caller).
//
// It knows nothing of machines or of the gate: the gate consumes a
// *Manager through a small interface of its own.
package upstream
