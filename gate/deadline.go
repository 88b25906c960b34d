package gate

import (
	"context"
	"fmt"
	"time"
)

// DefaultEventTimeout is how long one event on an instance may take, all
// its steps included, when Options.EventTimeout is zero: far more than a
// machine's own work takes (a step is microseconds, a call into
// JavaScript at most a second), and less than an MCP client waits.
const DefaultEventTimeout = 5 * time.Second

// eventContext bounds the work of one event on an instance: it ends at
// the event deadline, or when ctx does (a request whose client went
// away).
func (g *Gate) eventContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := g.opts.EventTimeout
	if d <= 0 {
		d = DefaultEventTimeout
	}
	return context.WithTimeoutCause(ctx, d, &deadlineError{d})
}

// deadlineError is the cause of an event stopped at its deadline; it
// wraps context.DeadlineExceeded.
type deadlineError struct{ d time.Duration }

func (e *deadlineError) Error() string {
	return fmt.Sprintf("it ran out of time: the event did not settle within the event deadline of %v", e.d)
}

func (e *deadlineError) Unwrap() error { return context.DeadlineExceeded }
