package gate

import (
	"context"

	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
)

// A Principal is who calls: a subject, its roles, and how it was
// authenticated (store.Principal, as the audit trail records it).
type Principal = store.Principal

// principalKey carries a request's principal in its context.
type principalKey struct{}

// WithPrincipal returns a context whose requests are made by p: a
// transport that authenticates its requests (the gate's HTTP handler, or
// a host's) sets it, and the gate reads it for every call.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal of a request, false when its
// transport named none.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// SystemPrincipal is the principal of what the server does itself: a
// timer that fires, an event sent from Go code (workflow.SystemPrincipal).
func SystemPrincipal() Principal { return workflow.SystemPrincipal() }
