// Package inspect is stategate's inspector: web pages, served beside
// /mcp by `stategate serve --http` (or on a port of their own beside a
// stdio server, `serve --inspect`), that show the workflows (each machine
// file's status, version and errors), their instances (state, status,
// last change, pending timers, intents in doubt), one instance's tools
// available now (as its agent is listed them; see toolsNow), context,
// diagram with its active states and audit trail, and a workflow's
// diagram and tools, all updated live (server-sent events) as calls,
// timers and reloads move them. It reads the workflows and instances
// (package workflow) and draws with package graph; it knows nothing of
// the gate or its transports.
//
// The pages are read-only unless Options.Reset is set: then an
// instance that is done or failed has a button that resets it, as
// `stategate state reset` does, through the gate. Its form carries a
// token (an HMAC of the instance under a key the Handler made), and a
// reset without it is refused: another site's page cannot forge one.
// With Options.ResetRole, a reset also needs that role among the roles of
// the request's principal (Options.Principal: who the transport in front
// says made the request); the pages say who that is.
//
// Everything the pages need (templates, script, style sheet) is embedded;
// the script is small and needs no framework. The handler checks no Host,
// Origin or token: serve it behind the checks of /mcp
// (gate.HTTPHandler.Guard), which refuse another origin's requests, even
// one on another port of the same host. Its live streams are shared out
// (Options.MaxStreams and those after it) so that a client cannot hold
// them all.
package inspect

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/stategate/stategate/graph"
	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
)

// Prefix is where the inspector's pages are: Prefix (the workflows and
// their instances), Prefix/WORKFLOW (a workflow's diagram and instances),
// Prefix/WORKFLOW/HANDLE (an instance: its diagram and audit trail; see
// gate.InspectLink), and Prefix/_/... (the event stream, the script and
// style sheet, the reset).
const Prefix = "/inspect"

// Options configure the inspector.
type Options struct {
	// Instances are the workflows and instances shown (a gate's).
	Instances *workflow.Instances
	// Library, when set, is the machines folder served: the files'
	// errors are shown, and reloads update the pages.
	Library *workflow.Library
	// Reset enables the operator's reset button of instances that are
	// done or failed (serve --inspect-reset). Without it no control of
	// the pages changes anything.
	Reset bool
	// Principal, when set, returns the principal of a request from its
	// context (gate.PrincipalFrom, behind gate.HTTPHandler.Guard): the
	// pages say who it is, and ResetRole is looked for among its roles.
	Principal func(context.Context) (store.Principal, bool)
	// ResetRole, when set, is the role a request's principal needs to
	// reset an instance (serve --inspect-role); without it (or without
	// a principal) a reset is refused, 403. Empty: whoever opens the
	// pages may reset.
	ResetRole string
	// Caller, when set, is the principal who makes every call (stdio's
	// local user, beside which serve --inspect serves the pages): an
	// instance's page says which tools its roles hide from it.
	Caller *store.Principal
	// Logger receives the inspector's logs; slog.Default() when nil.
	Logger *slog.Logger
	// MaxStreams bounds the pages following live updates at once (their
	// event streams; DefaultMaxStreams when zero). When all are taken, a
	// new page takes the place of the oldest page of the peer (remote
	// address) that holds the most: no page is refused a stream.
	MaxStreams int
	// MaxStreamsPerPeer bounds the streams of one peer: a remote address,
	// an IPv6 one by its /64 (DefaultMaxStreamsPerPeer when zero). A
	// peer's next stream takes the place of its oldest, whose page comes
	// back 10 s later.
	MaxStreamsPerPeer int
	// MaxStreamAge ends a stream that old (DefaultMaxStreamAge when
	// zero): its page comes back a second later and refetches what it
	// shows, so that a slot held by a client that never reads is free
	// again within that time.
	MaxStreamAge time.Duration
	// StreamWriteTimeout ends a stream whose next write (an event, a
	// keep-alive) takes longer (DefaultStreamWriteTimeout when zero): a
	// client that stopped reading is dropped once its socket is full.
	StreamWriteTimeout time.Duration
}

// Defaults of Options.
const (
	DefaultMaxStreams         = 64
	DefaultMaxStreamsPerPeer  = 8
	DefaultMaxStreamAge       = 10 * time.Minute
	DefaultStreamWriteTimeout = 10 * time.Second
)

// Limits of what a page shows.
const (
	maxInstances = 500 // instances listed (the newest)
	maxAudit     = 200 // audit entries of an instance (the latest)
	maxSVGCache  = 256 // diagrams kept drawn
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Handler serves the inspector's pages. Close it when the HTTP server
// shuts down: its event streams end.
type Handler struct {
	opts  Options
	log   *slog.Logger
	mux   *http.ServeMux
	tmpl  *template.Template
	hub   *hub
	unsub []func()

	svgMu  sync.Mutex
	svgs   map[string][]byte
	draw   diagrams // (its slow under svgMu)
	static http.Handler
	// resetKey signs the reset forms' tokens (made at start).
	resetKey []byte
}

// New makes the inspector of a gate. It subscribes to the gate's changes
// at once.
func New(o Options) *Handler {
	if o.MaxStreams <= 0 {
		o.MaxStreams = DefaultMaxStreams
	}
	if o.MaxStreamsPerPeer <= 0 {
		o.MaxStreamsPerPeer = DefaultMaxStreamsPerPeer
	}
	if o.MaxStreamAge <= 0 {
		o.MaxStreamAge = DefaultMaxStreamAge
	}
	if o.StreamWriteTimeout <= 0 {
		o.StreamWriteTimeout = DefaultStreamWriteTimeout
	}
	h := &Handler{opts: o, log: o.Logger, svgs: map[string][]byte{}, resetKey: make([]byte, 32)}
	rand.Read(h.resetKey)
	if h.log == nil {
		h.log = slog.Default()
	}
	h.draw.layout, h.draw.timeout = graph.SVG, defaultLayoutTimeout
	h.tmpl = template.Must(template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html"))
	h.hub = newHub(o.MaxStreams, o.MaxStreamsPerPeer)
	h.unsub = append(h.unsub, o.Instances.Subscribe(func(_ context.Context, c workflow.Change) {
		if c.Resync { // another replica's changes may have been missed: every page reads again
			h.hub.publish(reload)
			return
		}
		h.hub.publish(message{Kind: "instance", Workflow: c.Workflow, Handle: c.Handle})
	}))
	if o.Library != nil {
		h.unsub = append(h.unsub, o.Library.Subscribe(func() { h.hub.publish(message{Kind: "reload"}) }))
	}
	sub, _ := fs.Sub(staticFS, "static")
	h.static = http.StripPrefix(Prefix+"/_/static/", http.FileServerFS(sub))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix, http.StatusFound)
	})
	mux.HandleFunc("GET "+Prefix, h.index)
	mux.HandleFunc("GET "+Prefix+"/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix, http.StatusFound)
	})
	mux.HandleFunc("GET "+Prefix+"/{workflow}", h.workflow)
	mux.HandleFunc("GET "+Prefix+"/{workflow}/{handle}", h.instance)
	mux.HandleFunc("GET "+Prefix+"/_/events", h.events)
	mux.HandleFunc("GET "+Prefix+"/_/static/", h.serveStatic)
	mux.HandleFunc("POST "+Prefix+"/_/reset", h.reset)
	mux.HandleFunc("POST "+Prefix+"/_/approve", h.approve)
	h.mux = mux
	return h
}

// Close ends the event streams and the subscriptions.
func (h *Handler) Close() {
	for _, f := range h.unsub {
		f()
	}
	h.hub.close()
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	// The pages load nothing from elsewhere, run no inline script, and
	// are never framed (the reset button must not be clicked through
	// another site's page).
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin") // (no-referrer would make a form's Origin "null")
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) serveStatic(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	h.static.ServeHTTP(w, r)
}

// page is what every page's template gets.
type page struct {
	Title    string
	Crumbs   []crumb
	Workflow string // the workflow the page is about, "" for none
	Handle   string // the instance the page is about, "" for none
	Now      time.Time
	// ResetEnabled is set when the inspector resets finished instances.
	ResetEnabled bool
	// Who is the request's principal, as the page says it ("" when the
	// inspector is told none).
	Who  string
	Data any
}

type crumb struct{ Name, Link string }

// render writes a page, or only its main part when the page asks for it
// to update itself (?fragment=1).
func (h *Handler) render(w http.ResponseWriter, r *http.Request, name string, p page) {
	p.Now = time.Now()
	p.ResetEnabled = h.opts.Reset
	if pr, ok := h.principal(r.Context()); ok {
		p.Who = who(pr)
	}
	var buf bytes.Buffer
	tmpl := "page"
	if r.URL.Query().Get("fragment") == "1" {
		tmpl = name
	}
	t, err := h.tmpl.Clone()
	if err == nil {
		// "main" is the page's own part.
		_, err = t.New("main").Parse(`{{template "` + name + `" .}}`)
	}
	if err == nil {
		err = t.ExecuteTemplate(&buf, tmpl, p)
	}
	if err != nil {
		h.log.Error("inspector: rendering a page", "page", name, "err", err)
		http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

// fileRow is a machine file as the workflows table shows it.
type fileRow struct {
	Workflow  string // "" when the file serves none
	File      string
	Version   string
	Status    string // served, stale (its last good version is served), failed
	Error     string
	Tools     int
	Instances int
	Title     string
}

// instanceRow is an instance as the instances tables show it.
type instanceRow struct {
	Workflow, Handle string
	Served           bool
	State            string
	Status           string
	Reset            bool // reset by an operator: starts afresh when next used
	Updated          time.Time
	Timers           []timerView
	InDoubt          int
	Err              string
}

func (r instanceRow) NextTimer() *timerView {
	if len(r.Timers) == 0 {
		return nil
	}
	t := slices.MinFunc(r.Timers, func(a, b timerView) int { return a.Due.Compare(b.Due) })
	return &t
}

type indexData struct {
	Files       []fileRow
	Instances   []instanceRow
	Total       int // instances stored
	Shown       int
	ResetButton bool
	// Approvals are the calls waiting for an operator, oldest first.
	Approvals []approvalView
}

func (h *Handler) index(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rows, total, err := h.instances(ctx, "")
	if err != nil {
		http.Error(w, "cannot read the store: "+err.Error(), http.StatusInternalServerError)
		return
	}
	d := indexData{Files: h.files(ctx), Instances: rows, Total: total, Shown: len(rows), Approvals: h.approvals(ctx)}
	h.render(w, r, "index", page{Title: "Workflows", Data: d})
}

// files lists the machine files: the workflows served, with their counts
// of instances (the store's), and the files that fail to load.
func (h *Handler) files(ctx context.Context) []fileRow {
	count := func(workflow string) int {
		n, _ := h.opts.Instances.Store().Count(ctx, workflow)
		return n
	}
	var errs map[string]error
	if h.opts.Library != nil {
		errs = h.opts.Library.Errors()
	}
	var out []fileRow
	seen := map[string]bool{}
	for _, wf := range h.opts.Instances.Workflows() {
		f := fileRow{Workflow: wf.ID, File: h.relFile(wf.File), Version: shortVersion(wf.Version), Status: "served", Tools: len(wf.ToolNames()), Instances: count(wf.ID), Title: description(wf.Machine)}
		if err := errs[wf.File]; err != nil {
			f.Status, f.Error = "stale", h.publicError(err)
		}
		seen[wf.File] = true
		out = append(out, f)
	}
	for file, err := range errs {
		if !seen[file] {
			out = append(out, fileRow{File: h.relFile(file), Status: "failed", Error: h.publicError(err)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out
}

// relFile is a file's path relative to the machines folder.
func (h *Handler) relFile(f string) string {
	if h.opts.Library == nil {
		return filepath.Base(f)
	}
	if rel, err := filepath.Rel(h.opts.Library.Dir(), f); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.ToSlash(rel)
	}
	if abs, err := filepath.Abs(h.opts.Library.Dir()); err == nil {
		if rel, err := filepath.Rel(abs, f); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.ToSlash(rel)
		}
	}
	return filepath.Base(f)
}

// instances lists the stored instances (of one workflow, or of all), the
// newest first, at most maxInstances; total counts them all. It reads
// what it shows, from the store's index (store.Store.Recent and Count),
// whatever the number of instances stored.
func (h *Handler) instances(ctx context.Context, workflow string) (rows []instanceRow, total int, err error) {
	st := h.opts.Instances.Store()
	keys, err := st.Recent(ctx, workflow, maxInstances)
	if err != nil {
		return nil, 0, err
	}
	if total, err = st.Count(ctx, workflow); err != nil {
		return nil, 0, err
	}
	for _, k := range keys {
		rec, _, err := st.Load(ctx, k)
		if err != nil {
			continue // (deleted since)
		}
		rows = append(rows, h.row(ctx, k, rec))
	}
	return rows, total, nil
}

func (h *Handler) row(ctx context.Context, k store.Key, rec store.Record) instanceRow {
	x := h.opts.Instances
	row := instanceRow{Workflow: k.Machine, Handle: k.Handle, Updated: rec.Updated, Timers: timerViews(nil, rec.Timers), Reset: rec.IsReset()}
	s, err := x.Snapshot(ctx, k.Machine, k.Handle)
	switch {
	case errors.Is(err, workflow.ErrUnknownWorkflow):
		row.Status = "not served"
	case err != nil:
		row.Status, row.Err = "unreadable", err.Error()
	default:
		row.Served = true
		var m *interp.Machine
		if wf := x.Workflow(k.Machine); wf != nil {
			m = wf.Machine
		}
		row.State, row.Status, row.Timers = stateString(s.Value), s.Status, timerViews(m, s.Timers)
		if doubt, err := x.InDoubt(ctx, k.Machine, k.Handle); err == nil {
			row.InDoubt = len(doubt)
		}
	}
	return row
}

type workflowData struct {
	Workflow  *workflow.Workflow
	File      fileRow
	SVG       template.HTML
	SVGError  string
	Tools     []toolView
	Instances []instanceRow
	Total     int
}

func (h *Handler) findWorkflow(id string) *workflow.Workflow {
	for _, wf := range h.opts.Instances.Workflows() {
		if wf.ID == id {
			return wf
		}
	}
	return nil
}

func (h *Handler) workflow(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("workflow")
	wf := h.findWorkflow(id)
	if wf == nil {
		h.notFound(w, r, fmt.Sprintf("No workflow %q is served now.", id), "Its machine file may have been removed or renamed, or fail to load: the list of workflows shows each file's status.")
		return
	}
	rows, total, err := h.instances(ctx, wf.ID)
	if err != nil {
		http.Error(w, "cannot read the store: "+err.Error(), http.StatusInternalServerError)
		return
	}
	d := workflowData{Workflow: wf, Tools: h.workflowTools(wf), Instances: rows, Total: total}
	for _, f := range h.files(ctx) {
		if f.Workflow == wf.ID {
			d.File = f
		}
	}
	d.SVG, d.SVGError = h.diagram(ctx, wf, nil, wf.ID)
	h.render(w, r, "workflow", page{Title: "Workflow " + wf.ID, Workflow: wf.ID, Crumbs: []crumb{{"Workflows", Prefix}, {wf.ID, ""}}, Data: d})
}

// auditRow is an audit entry as the trail shows it.
type auditRow struct {
	store.AuditEntry
	Payload  string // the event's payload (or the intent's arguments), as JSON
	Event    string // the event's type
	From, To string
	InDoubt  bool
	Who      string // who made it, and how they were authenticated
	Confirm  string // who confirmed it, how, and why
}

type instanceData struct {
	Workflow *workflow.Workflow
	Row      instanceRow
	State    *workflow.State
	// Tools are what the instance offers its agents now.
	Tools       *toolsNow
	Context     string
	Output      string
	SVG         template.HTML
	SVGError    string
	Audit       []auditRow
	AuditError  string
	InDoubt     []auditRow
	ResetButton bool
	ResetToken  string // the reset form's (resetToken)
	// ResetNeeds is the role the request's principal lacks to reset the
	// instance, which would have the button ("" when it has it).
	ResetNeeds string
	// Approval is the call that waits for an operator's approval, if any.
	Approval  *approvalView
	Version   uint64
	NotStored bool
}

func (h *Handler) instance(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, handle := r.PathValue("workflow"), r.PathValue("handle")
	x := h.opts.Instances
	k := store.Key{Machine: id, Handle: handle}
	rec, _, err := x.Store().Load(ctx, k)
	notStored := errors.Is(err, store.ErrNotFound)
	if err != nil && !notStored {
		http.Error(w, "cannot read the store: "+err.Error(), http.StatusInternalServerError)
		return
	}
	wf := h.findWorkflow(id)
	crumbs := []crumb{{"Workflows", Prefix}, {id, Prefix + "/" + url.PathEscape(id)}, {handle, ""}}
	if wf == nil {
		if notStored {
			h.notFound(w, r, fmt.Sprintf("No workflow %q is served now, and it has no instance %q.", id, handle), "")
			return
		}
	}
	d := instanceData{Workflow: wf, NotStored: notStored}
	if notStored {
		d.Row = instanceRow{Workflow: id, Handle: handle, Served: wf != nil, Status: "not started"}
	} else {
		d.Row = h.row(ctx, k, rec)
	}
	if wf != nil {
		var st *workflow.State
		err := workflow.CheckHandle(handle)
		var in *workflow.Instance
		if err == nil {
			in, err = x.Load(ctx, wf, handle)
		}
		if err == nil {
			st = in.State()
			tools := h.toolsAt(in)
			d.Tools = &tools
			d.State, d.Version = st, st.Version
			d.Context = prettyJSON(st.Context)
			if st.Output != nil {
				d.Output = prettyJSON(st.Output)
			}
			// The context has a section of its own: the diagram is the
			// machine's, with the active states.
			d.SVG, d.SVGError = h.diagram(ctx, wf, st.Value, wf.ID+" "+handle)
			d.ResetButton = h.opts.Reset && !notStored && (st.Status == "done" || st.Status == "error")
			if d.ResetButton && !h.mayReset(ctx) {
				d.ResetButton, d.ResetNeeds = false, h.opts.ResetRole
			}
			if d.ResetButton {
				d.ResetToken = h.resetToken(id, handle)
			}
			if st.Pending != nil {
				a := h.approvalOf(ctx, id, handle, *st.Pending)
				d.Approval = &a
			}
		} else {
			d.SVGError = err.Error()
		}
	}
	if !notStored {
		doubt := map[uint64]bool{}
		if wf != nil {
			if ds, err := x.InDoubt(ctx, id, handle); err == nil {
				for _, e := range ds {
					doubt[e.Version] = true
					d.InDoubt = append(d.InDoubt, auditOf(e, true))
				}
			}
		}
		trail, err := x.Store().Audit(ctx, k, maxAudit)
		if err != nil {
			d.AuditError = err.Error()
		}
		for i := len(trail) - 1; i >= 0; i-- {
			d.Audit = append(d.Audit, auditOf(trail[i], doubt[trail[i].Version]))
		}
	}
	h.render(w, r, "instance", page{Title: id + " " + handle, Workflow: id, Handle: handle, Crumbs: crumbs, Data: d})
}

func auditOf(e store.AuditEntry, inDoubt bool) auditRow {
	a := auditRow{AuditEntry: e, InDoubt: inDoubt, From: stateString(e.From), To: stateString(e.To)}
	if p := e.Principal; p != nil {
		a.Who = p.Sub
		if p.Auth != "" && p.Auth != "system" {
			a.Who += " (" + p.Auth + ")"
		}
	}
	if c := e.Confirmed; c != nil {
		a.Confirm = "confirmed by " + c.By.Sub + " (" + c.Via + ")"
		if c.Comment != "" {
			a.Confirm += ": " + c.Comment
		}
	}
	if e.Event != nil {
		a.Event, _ = e.Event["type"].(string)
		payload := map[string]any{}
		for k, v := range e.Event {
			if k != "type" && k != "principal" { // who is a column of its own
				payload[k] = v
			}
		}
		if len(payload) > 0 {
			a.Payload = compactJSON(payload)
		}
	}
	if e.Intent != nil {
		a.Event = e.Intent.Event
		if len(e.Intent.Arguments) > 0 {
			a.Payload = compactJSON(e.Intent.Arguments)
		}
	}
	return a
}

func (h *Handler) notFound(w http.ResponseWriter, r *http.Request, what, why string) {
	w.WriteHeader(http.StatusNotFound)
	h.render(w, r, "notfound", page{Title: "Not found", Crumbs: []crumb{{"Workflows", Prefix}, {"not found", ""}}, Data: map[string]string{"What": what, "Why": why}})
}

// defaultLayoutTimeout bounds the wait for a diagram's layout. Graphviz
// cannot be stopped: a layout past it goes on in the background (graph's
// limits bound how long), and its machine is not laid out again.
const defaultLayoutTimeout = 10 * time.Second

// diagrams is what the inspector keeps of its drawings besides the
// drawings (Handler.svgs): the layouts under way, which the page views of
// one diagram share, and the machines not to lay out again.
type diagrams struct {
	flights singleflight.Group
	// slow holds the machines (id and version) whose layout ran past the
	// timeout, with the message their pages show.
	slow map[string]string
	// layout is graph.SVG (tests put their own).
	layout  func(context.Context, *interp.Machine, graph.Options) ([]byte, error)
	timeout time.Duration
}

// diagram draws a workflow's machine, with an instance's active states
// when value is set (not its context, which the page shows beside). Views of a diagram being drawn wait for
// that layout (at most defaultLayoutTimeout, or until their request
// ends); a machine over graph's limits, or whose layout ran out of time,
// gets a message instead.
func (h *Handler) diagram(ctx context.Context, wf *workflow.Workflow, value any, title string) (template.HTML, string) {
	tools := make(map[string]string, len(wf.Tools))
	for _, t := range wf.Tools {
		tools[t.Event] = t.Name
	}
	valJSON, _ := json.Marshal(value)
	sum := sha256.Sum256([]byte(wf.ID + "\x00" + wf.Version + "\x00" + title + "\x00" + string(valJSON)))
	key := hex.EncodeToString(sum[:])
	machine := wf.ID + "\x00" + wf.Version
	h.svgMu.Lock()
	svg, ok := h.svgs[key]
	slow := h.draw.slow[machine]
	h.svgMu.Unlock()
	if slow != "" {
		return "", slow
	}
	if !ok {
		o := graph.Options{Tools: tools, Title: title}
		if value != nil {
			o.Active = activeIn(value)
		}
		ch := h.draw.flights.DoChan(key, func() (any, error) {
			return h.layout(ctx, wf, machine, key, o)
		})
		var r singleflight.Result
		select {
		case r = <-ch:
		case <-ctx.Done():
			return "", "The diagram is not drawn: the page was left first."
		}
		if r.Err != nil {
			var msg string
			switch {
			case errors.Is(r.Err, graph.ErrTooLarge):
				msg = "The diagram is not drawn: " + r.Err.Error() + "."
			case errors.As(r.Err, new(*layoutTimeout)):
				msg = r.Err.Error()
			default:
				msg = "The diagram cannot be drawn: " + r.Err.Error()
			}
			return "", msg
		}
		svg = r.Val.([]byte)
	}
	// The SVG is graph's, which escapes the machine's names and labels;
	// the page's Content-Security-Policy runs no script an SVG could hold.
	return template.HTML(svg), ""
}

// layoutTimeout is the error of a layout that ran out of time: the
// message its pages show.
type layoutTimeout struct{ msg string }

func (e *layoutTimeout) Error() string { return e.msg }

// layout lays out a diagram (once for every view waiting, whose requests
// it outlives) under the timeout, and keeps it; a layout that runs out
// of time marks its machine not to lay out again.
func (h *Handler) layout(ctx context.Context, wf *workflow.Workflow, machine, key string, o graph.Options) ([]byte, error) {
	h.svgMu.Lock()
	svg, ok := h.svgs[key] // drawn since the view looked
	h.svgMu.Unlock()
	if ok {
		return svg, nil
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.draw.timeout)
	defer cancel()
	svg, err := h.draw.layout(lctx, wf.Machine, o)
	if errors.Is(err, context.DeadlineExceeded) {
		msg := fmt.Sprintf("The diagram is not drawn: Graphviz took more than %v to lay it out, and it is not laid out again until its machine file changes (graph.MaxStates and graph.MaxTransitions bound what is tried).", h.draw.timeout)
		h.log.Warn("inspector: a diagram took too long to lay out; its machine is not laid out again until it changes", "workflow", wf.ID, "timeout", h.draw.timeout)
		h.svgMu.Lock()
		if h.draw.slow == nil || len(h.draw.slow) >= maxSVGCache {
			h.draw.slow = map[string]string{}
		}
		h.draw.slow[machine] = msg
		h.svgMu.Unlock()
		return nil, &layoutTimeout{msg}
	}
	if err != nil {
		return nil, err
	}
	svg = readable(stripProlog(svg))
	h.svgMu.Lock()
	if len(h.svgs) >= maxSVGCache {
		clear(h.svgs)
	}
	h.svgs[key] = svg
	h.svgMu.Unlock()
	return svg, nil
}

// stripProlog drops an XML declaration and doctype before the <svg>
// element, which have no place inside an HTML page.
func stripProlog(svg []byte) []byte {
	if i := bytes.Index(svg, []byte("<svg")); i > 0 {
		return svg[i:]
	}
	return svg
}

// minScale is the smallest a diagram is drawn at, of its natural size
// (Graphviz sizes it in points, 4/3 of a CSS pixel each): its state names
// (12 pt) are then 13.6 px, the transitions' labels (10 pt) 11.3 px. The
// page scales a diagram down to the width it has, but no further: a wider
// one (a parallel machine's regions side by side) scrolls.
const minScale = 0.85

// svgWidth is the root element's width, in points, as Graphviz writes it.
var svgWidth = regexp.MustCompile(`^<svg width="([0-9.]+)pt"`)

// readable gives a diagram's root element its smallest width (minScale
// of its natural one), which the style sheet's max-width: 100% yields to.
func readable(svg []byte) []byte {
	m := svgWidth.FindSubmatchIndex(svg)
	if m == nil {
		return svg
	}
	pt, err := strconv.ParseFloat(string(svg[m[2]:m[3]]), 64)
	if err != nil {
		return svg
	}
	style := fmt.Sprintf(` style="min-width: %.0fpx"`, pt*4/3*minScale)
	return slices.Concat(svg[:m[1]], []byte(style), svg[m[1]:])
}

// activeIn reports the state nodes a state value has active: the root,
// and each node whose path the value holds.
func activeIn(value any) func(*interp.StateNode) bool {
	return func(n *interp.StateNode) bool {
		v := value
		for _, k := range n.Path() {
			switch x := v.(type) {
			case string:
				if x != k {
					return false
				}
				v = nil
			case map[string]any:
				c, ok := x[k]
				if !ok {
					return false
				}
				v = c
			default:
				return false
			}
		}
		return true
	}
}

// stateString shows a state value as paths of its active leaves:
// "review", or "payment.pending, shipping.packed".
func stateString(v any) string {
	var leaves []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		join := func(k string) string {
			if prefix == "" {
				return k
			}
			return prefix + "." + k
		}
		switch x := v.(type) {
		case string:
			leaves = append(leaves, join(x))
		case map[string]any:
			if len(x) == 0 && prefix != "" {
				leaves = append(leaves, prefix)
			}
			for _, k := range slices.Sorted(mapsKeys(x)) {
				walk(join(k), x[k])
			}
		case nil:
			if prefix != "" {
				leaves = append(leaves, prefix)
			}
		default:
			leaves = append(leaves, join(fmt.Sprint(x)))
		}
	}
	walk("", v)
	return strings.Join(leaves, ", ")
}

func mapsKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func prettyJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func shortVersion(v string) string {
	if len(v) > 12 {
		return v[:12]
	}
	return v
}

// description is a machine's description (its root's), "" when none.
func description(m *interp.Machine) string {
	if m == nil || m.Root == nil {
		return ""
	}
	return m.Root.Description
}

// reset resets an instance that is done or failed (Options.Reset), from
// the form of its page: the request must come from a page of the
// inspector (an Origin, which the guard in front compares with the
// server's own, or Fetch Metadata that says so) and carry the form's
// token.
func (h *Handler) reset(w http.ResponseWriter, r *http.Request) {
	if !h.opts.Reset {
		http.Error(w, "Forbidden: the inspector is read-only (serve --inspect-reset enables resets)", http.StatusForbidden)
		return
	}
	if !h.mayReset(r.Context()) {
		you := "no principal is known"
		if p, ok := h.principal(r.Context()); ok {
			you = "you are " + who(p)
		}
		http.Error(w, fmt.Sprintf("Forbidden: a reset needs the role %s (%s)", h.opts.ResetRole, you), http.StatusForbidden)
		return
	}
	if r.Header.Get("Origin") == "" && r.Header.Get("Sec-Fetch-Site") != "same-origin" {
		http.Error(w, "Forbidden: a reset must come from the inspector's page", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "Bad Request", http.StatusBadRequest)
		return
	}
	id, handle := r.PostForm.Get("workflow"), r.PostForm.Get("handle")
	if !hmac.Equal([]byte(r.PostForm.Get("csrf")), []byte(h.resetToken(id, handle))) {
		http.Error(w, "Forbidden: the reset form's token is missing or wrong (reload the instance's page: the server may have restarted)", http.StatusForbidden)
		return
	}
	err := h.opts.Instances.Reset(r.Context(), id, handle, "reset by an operator (the inspector's reset button)")
	if err != nil {
		status := http.StatusConflict
		if errors.Is(err, workflow.ErrUnknownWorkflow) || errors.Is(err, store.ErrNotFound) {
			status = http.StatusNotFound
		}
		http.Error(w, "The instance was not reset: "+err.Error(), status)
		return
	}
	p, _ := h.principal(r.Context())
	h.log.Info("instance reset by an operator from the inspector", "machine", id, "handle", handle, "sub", p.Sub, "auth", p.Auth)
	http.Redirect(w, r, Link(Prefix, id, handle), http.StatusSeeOther)
}

// principal is the principal of a request (Options.Principal).
func (h *Handler) principal(ctx context.Context) (store.Principal, bool) {
	if h.opts.Principal == nil {
		return store.Principal{}, false
	}
	return h.opts.Principal(ctx)
}

// mayReset reports whether a request's principal may reset: it has
// Options.ResetRole, or none is asked for.
func (h *Handler) mayReset(ctx context.Context) bool {
	if h.opts.ResetRole == "" {
		return true
	}
	p, ok := h.principal(ctx)
	return ok && slices.Contains(p.Roles, h.opts.ResetRole)
}

// who says who a principal is: its subject, how it was authenticated, its
// roles.
func who(p store.Principal) string {
	s := p.Sub
	if p.Auth == "none" {
		return s + " (not authenticated)"
	}
	if p.Auth != "" {
		s += " (" + p.Auth
		if len(p.Roles) > 0 {
			s += "; roles " + strings.Join(p.Roles, ", ")
		}
		s += ")"
	}
	return s
}

// resetToken is the token of the form that resets an instance: an HMAC of
// the instance under the Handler's key, which only a page of the
// inspector shows. It holds for this process, and that instance only.
func (h *Handler) resetToken(workflow, handle string) string {
	m := hmac.New(sha256.New, h.resetKey)
	m.Write([]byte("stategate inspector reset\x00" + workflow + "\x00" + handle))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// publicError renders a machine file's error as the status tool shows it
// to clients (workflow.PublicError).
func (h *Handler) publicError(err error) string {
	dir := ""
	if h.opts.Library != nil {
		dir = h.opts.Library.Dir()
	}
	return workflow.PublicError(dir, err)
}

// Link is the address of an instance's page under an inspector's base
// address ("http://127.0.0.1:3001/inspect", or Prefix): base/WORKFLOW/HANDLE,
// each part path-escaped.
func Link(base, workflow, handle string) string {
	return strings.TrimSuffix(base, "/") + "/" + url.PathEscape(workflow) + "/" + url.PathEscape(handle)
}
