package inspect

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
)

// maxComment bounds an operator's comment on an approval (in runes).
const maxComment = 1000

// approvalView is a call waiting for an operator's approval, as the pages
// show it: what was called, with which arguments, by whom, and whether
// the request's principal may settle it (then the forms' token).
type approvalView struct {
	Workflow, Handle string
	ID               string
	Tool             string
	Confirm          string // what is approved, in words
	Args             string // the call's arguments, as indented JSON ("" for none)
	By               string // who called, and how they were authenticated
	Roles            []string
	Time             time.Time
	Link             string // the instance's page
	// Token is the forms' token (approveToken) when the request's
	// principal may settle the call; Needs says why it may not.
	Token string
	Needs string
}

// approvalOf renders a waiting call for the request of ctx.
func (h *Handler) approvalOf(ctx context.Context, wf, handle string, p store.Pending) approvalView {
	v := approvalView{Workflow: wf, Handle: handle, ID: p.ID, Tool: p.Tool, Confirm: p.Confirm, By: who(p.Principal),
		Roles: p.Roles, Time: p.Time, Link: Link(Prefix, wf, handle)}
	args := maps.Clone(p.Event)
	delete(args, "type")
	delete(args, "principal")
	if len(args) > 0 {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false) // (the template escapes)
		enc.SetIndent("", "  ")
		if enc.Encode(args) == nil {
			v.Args = strings.TrimSuffix(b.String(), "\n")
		}
	}
	by, known := h.operator(ctx)
	if err := workflow.MayApprove(&p, by); err != nil {
		v.Needs = strings.TrimPrefix(err.Error(), workflow.ErrNotApprover.Error()+": ")
		switch {
		case (!known || by.Auth == "none") && h.opts.Caller != nil:
			// Beside stdio, the shared token's holder is not the caller.
			v.Needs += ". The inspector authenticates no one: an approval needs an operator's token (serve --inspect with --token-file, and open this page once with ?token=TOKEN; see docs/inspector.md)"
		case !known || by.Auth == "none":
			v.Needs += ". This server authenticates no one: an approval needs an operator's token (serve with --auth-issuer, see docs/principals.md)"
		}
		return v
	}
	v.Token = h.approveToken(wf, handle, p.ID)
	return v
}

// operator is the principal a request's approval is made by: the
// request's (Options.Principal), or an unauthenticated one, "inspector",
// when the inspector is told none. known reports which.
func (h *Handler) operator(ctx context.Context) (p store.Principal, known bool) {
	if p, ok := h.principal(ctx); ok {
		return p, true
	}
	return store.Principal{Sub: "inspector", Auth: "none"}, false
}

// approvals are the calls waiting for an operator, oldest first, as the
// index shows them.
func (h *Handler) approvals(ctx context.Context) []approvalView {
	all, err := h.opts.Instances.Approvals(ctx)
	if err != nil {
		h.log.Warn("inspector: reading the calls waiting for approval", "err", err)
		return nil
	}
	out := make([]approvalView, 0, len(all))
	for _, a := range all {
		out = append(out, h.approvalOf(ctx, a.Workflow, a.Handle, a.Pending))
	}
	return out
}

// approve settles a waiting call from the forms of its instance's page:
// decision "approve" sends the call's event, "decline" drops it, both as
// the request's principal, with its comment, recorded in the audit trail.
// The request must come from a page of the inspector (an Origin, which
// the guard in front compares with the server's own, or Fetch Metadata
// that says so) and carry the forms' token, which names this call: a form
// left open on a call settled meanwhile settles no later one.
func (h *Handler) approve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Origin") == "" && r.Header.Get("Sec-Fetch-Site") != "same-origin" {
		http.Error(w, "Forbidden: an approval must come from the inspector's page", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "Bad Request", http.StatusBadRequest)
		return
	}
	f := r.PostForm
	id, handle, call := f.Get("workflow"), f.Get("handle"), f.Get("call")
	if !hmac.Equal([]byte(f.Get("csrf")), []byte(h.approveToken(id, handle, call))) {
		http.Error(w, "Forbidden: the approval form's token is missing or wrong (reload the instance's page: the server may have restarted)", http.StatusForbidden)
		return
	}
	comment := strings.TrimSpace(f.Get("comment"))
	if !utf8.ValidString(comment) || utf8.RuneCountInString(comment) > maxComment {
		http.Error(w, fmt.Sprintf("Bad Request: the comment must be text of at most %d characters", maxComment), http.StatusBadRequest)
		return
	}
	by, _ := h.operator(r.Context())
	x := h.opts.Instances
	var err error
	switch decision := f.Get("decision"); decision {
	case "approve":
		_, err = x.Approve(r.Context(), id, handle, call, by, comment)
	case "decline":
		_, err = x.Decline(r.Context(), id, handle, call, by, comment)
	default:
		http.Error(w, fmt.Sprintf("Bad Request: decision %q is neither approve nor decline", decision), http.StatusBadRequest)
		return
	}
	if err != nil {
		status := http.StatusConflict
		switch {
		case errors.Is(err, workflow.ErrNotApprover):
			status = http.StatusForbidden
		case errors.Is(err, workflow.ErrUnknownWorkflow), errors.Is(err, store.ErrNotFound):
			status = http.StatusNotFound
		case errors.Is(err, workflow.ErrNoPending):
			err = fmt.Errorf("%w: it was settled meanwhile (reload the instance's page)", err)
		}
		http.Error(w, "The call was not settled: "+h.publicError(err), status)
		return
	}
	h.log.Info("a waiting call settled by an operator from the inspector", "machine", id, "handle", handle, "call", call,
		"decision", f.Get("decision"), "sub", by.Sub, "auth", by.Auth)
	http.Redirect(w, r, Link(Prefix, id, handle), http.StatusSeeOther)
}

// approveToken is the token of the forms that settle a waiting call: an
// HMAC of the instance and the call under the Handler's key, which only
// a page of the inspector shows. It holds for this process, and that
// call only.
func (h *Handler) approveToken(workflow, handle, call string) string {
	m := hmac.New(sha256.New, h.resetKey)
	m.Write([]byte("stategate inspector approval\x00" + workflow + "\x00" + handle + "\x00" + call))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
