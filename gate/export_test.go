package gate

// SetRegistered sets a function run by each serve between the
// registration of its tools with mcp-go and the swap of what is served.
func (g *Gate) SetRegistered(f func()) { g.registered = f }
