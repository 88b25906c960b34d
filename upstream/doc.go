// Package upstream owns the MCP servers stategate gates: the upstreams
// file that names them (the mcpServers shape of Claude Desktop, Cursor and
// VS Code), the servers themselves (stdio child processes and Streamable
// HTTP connections, through mcp-go's client, restarted or reconnected with
// backoff), the tools each offers (re-listed once a burst of list_changed
// has settled), and the calls forwarded to them (deadlines, cancellation,
// progress relayed to the one caller it is for).
//
// The calls of different clients share a server, and it keeps them apart:
// a call is sent its tool's name and arguments, a progress token of the
// Manager's own (its progress goes back to that call alone, under the
// caller's token) and none of the caller's _meta but the keys the
// server's entry forwards; the server's log messages go to stategate's
// log, to no client. Every message a server sends is bounded (MaxMessage),
// as the gate bounds its clients'.
//
// It knows nothing of machines or of the gate: the gate consumes a
// *Manager through a small interface of its own. It watches no file
// (internal/watch does, and calls ApplyFile).
package upstream
