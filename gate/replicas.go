package gate

import (
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
)

// What the gate does for replicas: several servers on one store.Shared
// (store/postgres). The instances keep agreeing by themselves (package
// workflow); the gate answers what that adds, and names its sessions by
// replica:
//
//   - a store that cannot be reached (store.ErrUnavailable) is answered
//     UNAVAILABLE, and an instance another replica's bound call holds
//     (workflow.ErrBusy) BUSY: nothing moved, and the same call may be
//     made again;
//   - the sessions that see an instance another replica moved are told
//     (notifications/tools/list_changed) as for a move of this one's: the
//     instances' Subscribe tells the gate both (changed), and Resync, when
//     the feed was cut, has every session's list computed again;
//   - HTTPOptions.Route prefixes the session ids a replica issues, so that
//     a proxy in front routes a session's requests to the replica that
//     holds it by a prefix of Mcp-Session-Id (docs/replicas.md).

// retryable answers an error that nothing moved and the call may be made
// again (a store that cannot be reached, an instance another replica's
// call holds); nil for any other.
func retryable(tool string, err error) *mcp.CallToolResult {
	switch {
	case errors.Is(err, workflow.ErrBusy):
		return errorResult("BUSY", fmt.Sprintf("BUSY: %s was not done: %v", tool, err), map[string]any{"retry": true})
	case errors.Is(err, store.ErrUnavailable):
		return errorResult("UNAVAILABLE", fmt.Sprintf("UNAVAILABLE: %s was not done: the store's database cannot be reached (%v); nothing moved. Try again shortly", tool, err), map[string]any{"retry": true})
	}
	return nil
}

// failed answers a call that failed with err before it moved anything:
// UNAVAILABLE or BUSY when it may be made again (retryable), else ERROR.
func failed(tool string, err error) *mcp.CallToolResult {
	if res := retryable(tool, err); res != nil {
		return res
	}
	return errorResult("ERROR", "ERROR: "+err.Error(), nil)
}

// MaxRoute bounds the length of HTTPOptions.Route.
const MaxRoute = 32

// CheckRoute checks a replica's route name (HTTPOptions.Route, serve
// --route): 1 to MaxRoute letters, digits, '-' or '_' (what a proxy's
// rule matches as it is, in a header).
func CheckRoute(name string) error {
	if name == "" || len(name) > MaxRoute {
		return fmt.Errorf("the route name %q must be 1 to %d characters", name, MaxRoute)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("the route name %q has %q: only letters, digits, '-' and '_' are allowed", name, r)
		}
	}
	return nil
}

// RouteOf returns the route a session id names (HTTPOptions.Route):
// what comes before its first '.', "" for an id of a replica without one.
func RouteOf(sessionID string) string {
	for i := 0; i < len(sessionID); i++ {
		if sessionID[i] == '.' {
			return sessionID[:i]
		}
	}
	return ""
}
