package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/stategate/stategate/internal/jsonenc"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
)

// What the machine says, as MCP resources: the client can show them and
// the agent read them. Each URI names a workflow by its id and an
// instance by its handle, each percent-encoded as a segment of RFC 6570's
// simple expansion (every byte but A-Z a-z 0-9 - . _ ~ as %XX):
//
//	stategate://workflow/{workflow}/diagram                    the machine, as Mermaid stateDiagram-v2 (listed, one per workflow; Options.Mermaid)
//	stategate://workflow/{workflow}/instance/{handle}          the instance now: the status tool's structured content (JSON)
//	stategate://workflow/{workflow}/instance/{handle}/trail    its audit trail, the latest TrailEntries entries (JSON)
//	stategate://workflow/{workflow}/instance/{handle}/diagram  the machine with the instance's active states (Mermaid)
//
// The last three are resource templates; resources/list lists them for
// the instances the session acts on (revisions with sessions): of each
// workflow with no handle key, its own instance (HTTP) or the shared one
// (stdio); of each workflow with a handle key, the handle it used last.
//
// Who may read what: a request reads the instances it could act on with
// a tool call, and no other: under a revision with sessions, of a
// workflow with no handle key the session's own instance (or the shared
// one), never another session's; of a workflow with a handle key, any
// handle it names (as its tools take any). Under 2026-07-28, of a
// workflow with no handle key a handle the start tool made (its tag
// checked, with no store lookup), of one with a handle key any handle it
// names. What a reader may not read is "not found", whether it exists or
// not, and is listed to no one else. The tools an instance resource
// lists are those the reader's principal may call (roles); the trail is
// what the status tool's "recent" shows, longer.
//
// Subscriptions (resources/subscribe, revisions with sessions): to any
// URI the session may read; each change of the instance stored
// (a call, a timer, an intent, a reset) sends notifications/resources/updated
// for each of its URIs the session subscribed to, and a reload that
// changes a workflow's version for each of that workflow's. A session's
// subscriptions end with it (at most maxSubscriptions each). Under
// 2026-07-28 (subscriptions/listen) resource subscriptions are not
// offered: mcp-go's listen stream has no way for the gate to reach it
// per URI, so the acknowledgement leaves them out; resourcesListChanged
// is offered. notifications/resources/list_changed tells every client
// when the workflows served change (mcp-go sends it when the diagrams are
// registered or removed), and a session when the handle it uses of a
// workflow changes.

// ResourceScheme begins the URI of every resource the gate serves.
const ResourceScheme = "stategate://workflow/"

// TrailEntries bounds the audit entries a trail resource holds: the
// latest ones.
const TrailEntries = 50

// MermaidMIME is the MIME type of the diagrams (not registered: Mermaid
// has none).
const MermaidMIME = "text/vnd.mermaid"

// maxSubscriptions bounds the resources one session subscribes to.
const maxSubscriptions = 64

// The resource templates, as listed.
const (
	instanceTemplate        = ResourceScheme + "{workflow}/instance/{handle}"
	trailTemplate           = ResourceScheme + "{workflow}/instance/{handle}/trail"
	instanceDiagramTemplate = ResourceScheme + "{workflow}/instance/{handle}/diagram"
)

// errNoResource is a resource a request may not read, or that is not:
// its answer is MCP's "resource not found" (fixAnswer).
//
//lint:ignore ST1005 the JSON-RPC error's message begins with it, as mcp-go's own "Resource not found" and MCP's examples do.
var errNoResource = errors.New("Resource not found")

// errTooManySubs begins the refusal of a subscription past
// maxSubscriptions.
const errTooManySubs = "Too many subscriptions"

type resKind uint8

const (
	resDiagram         resKind = iota // the workflow's diagram
	resInstance                       // an instance now
	resTrail                          // an instance's audit trail
	resInstanceDiagram                // the diagram with an instance's states
)

// resURI is what a URI of the gate's names.
type resURI struct {
	kind             resKind
	workflow, handle string
}

// key is the instance (or, for a workflow's diagram, the workflow: no
// handle) the resource is of.
func (r resURI) key() store.Key { return store.Key{Machine: r.workflow, Handle: r.handle} }

func (r resURI) String() string {
	base := ResourceScheme + escapeSegment(r.workflow)
	switch r.kind {
	case resDiagram:
		return base + "/diagram"
	case resTrail:
		return base + "/instance/" + escapeSegment(r.handle) + "/trail"
	case resInstanceDiagram:
		return base + "/instance/" + escapeSegment(r.handle) + "/diagram"
	}
	return base + "/instance/" + escapeSegment(r.handle)
}

// escapeSegment percent-encodes all but RFC 3986's unreserved bytes, as
// RFC 6570's simple expansion does (and mcp-go's template matching takes).
func escapeSegment(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// parseResURI reads a URI of the gate's; ok is false for any other.
func parseResURI(uri string) (r resURI, ok bool) {
	rest, found := strings.CutPrefix(uri, ResourceScheme)
	if !found {
		return r, false
	}
	parts := strings.Split(rest, "/")
	seg := make([]string, len(parts))
	for i, p := range parts {
		v, err := url.PathUnescape(p)
		if err != nil || v == "" {
			return r, false
		}
		seg[i] = v
	}
	switch {
	case len(seg) == 2 && parts[1] == "diagram":
		return resURI{kind: resDiagram, workflow: seg[0]}, true
	case len(seg) == 3 && parts[1] == "instance":
		return resURI{kind: resInstance, workflow: seg[0], handle: seg[2]}, true
	case len(seg) == 4 && parts[1] == "instance" && parts[3] == "trail":
		return resURI{kind: resTrail, workflow: seg[0], handle: seg[2]}, true
	case len(seg) == 4 && parts[1] == "instance" && parts[3] == "diagram":
		return resURI{kind: resInstanceDiagram, workflow: seg[0], handle: seg[2]}, true
	}
	return r, false
}

// plugResources adds the gate's resources to an mcp-go server (plug):
// the capability (subscribe, listChanged), the templates, and the hooks
// that list a session's instances, check and record subscriptions, and
// keep resource subscriptions out of 2026-07-28's listen streams.
func (g *Gate) plugResources(srv *server.MCPServer, hooks *server.Hooks) {
	server.WithResourceCapabilities(true, true)(srv)
	templates := []server.ServerResourceTemplate{
		{Template: mcp.NewResourceTemplate(instanceTemplate, "stategate instance",
			mcp.WithTemplateTitle("A workflow instance now"),
			mcp.WithTemplateDescription("Where an instance of a workflow is: its state, status, context, the state's description and tags, the tools it allows now, its timers, and its latest audit entries (what the status tool says)."),
			mcp.WithTemplateMIMEType("application/json")), Handler: g.readResource},
		{Template: mcp.NewResourceTemplate(trailTemplate, "stategate trail",
			mcp.WithTemplateTitle("A workflow instance's audit trail"),
			mcp.WithTemplateDescription(fmt.Sprintf("The latest %d entries of an instance's audit trail, oldest first: each step, who took it, with which tool and event.", TrailEntries)),
			mcp.WithTemplateMIMEType("application/json")), Handler: g.readResource},
	}
	if g.opts.Mermaid != nil {
		templates = append(templates, server.ServerResourceTemplate{Template: mcp.NewResourceTemplate(instanceDiagramTemplate, "stategate instance diagram",
			mcp.WithTemplateTitle("A workflow instance's diagram"),
			mcp.WithTemplateDescription("The workflow's machine as a Mermaid stateDiagram-v2, the instance's active states highlighted."),
			mcp.WithTemplateMIMEType(MermaidMIME)), Handler: g.readResource})
	}
	srv.AddResourceTemplates(templates...)
	hooks.AddAfterListResources(func(ctx context.Context, _ any, _ *mcp.ListResourcesRequest, result *mcp.ListResourcesResult) {
		if result != nil && result.NextCursor == "" {
			result.Resources = append(result.Resources, g.instanceResources(ctx)...)
		}
	})
	hooks.AddOnRequestInitialization(g.checkSubscribe)
	hooks.AddAfterSubscribe(func(ctx context.Context, _ any, req *mcp.SubscribeRequest, _ *mcp.EmptyResult) {
		if r, ok := parseResURI(req.Params.URI); ok {
			if s := g.sessionOf(ctx); s != nil {
				g.subscribe(s, req.Params.URI, r)
			}
		}
	})
	hooks.AddAfterUnsubscribe(func(ctx context.Context, _ any, req *mcp.UnsubscribeRequest, _ *mcp.EmptyResult) {
		if s := g.sessionOf(ctx); s != nil {
			g.unsubscribe(s, req.Params.URI)
		}
	})
	hooks.AddBeforeSubscriptionsListen(func(ctx context.Context, _ any, req *mcp.SubscriptionsListenRequest) {
		if n := len(req.Params.Notifications.ResourceSubscriptions); n > 0 {
			g.log.Debug("resource subscriptions are not offered under protocol revision 2026-07-28: left out of the acknowledgement", "uris", n)
			req.Params.Notifications.ResourceSubscriptions = nil
		}
	})
}

// diagramResource is a workflow's diagram as listed.
func diagramResource(m *workflow.Workflow) mcp.Resource {
	return mcp.NewResource(resURI{kind: resDiagram, workflow: m.ID}.String(), m.ID+"/diagram",
		mcp.WithResourceTitle(fmt.Sprintf("The %s workflow's diagram", m.ID)),
		mcp.WithResourceDescription(fmt.Sprintf("The %s workflow's machine as a Mermaid stateDiagram-v2: its states, and the transitions with the events and tools that take them.", m.ID)),
		mcp.WithMIMEType(MermaidMIME))
}

// registerResources registers the diagrams of the workflows served with
// the bound server, and removes those of workflows no longer served
// (under setMu; mcp-go tells every client that the list changed). The
// subscribers of a workflow whose version changed are told its resources
// changed.
func (g *Gate) registerResources(before, after *served) {
	srv := g.srv.Load()
	if srv == nil {
		return
	}
	if g.opts.Mermaid != nil {
		var gone []string
		for id := range before.machines {
			if after.machines[id] == nil {
				gone = append(gone, resURI{kind: resDiagram, workflow: id}.String())
			}
		}
		if len(gone) > 0 {
			srv.DeleteResources(gone...)
		}
		var add []server.ServerResource
		registered := srv.ListResources()
		for _, m := range after.sorted {
			if uri := (resURI{kind: resDiagram, workflow: m.ID}).String(); registered[uri] == nil {
				add = append(add, server.ServerResource{Resource: diagramResource(m), Handler: g.readResource})
			}
		}
		if len(add) > 0 {
			srv.AddResources(add...)
		}
	}
	for id, m := range after.machines {
		if old := before.machines[id]; old != nil && old.Version != m.Version {
			g.tellWorkflowSubscribers(context.Background(), id)
		}
	}
}

// instanceResources are the resources of the instances a session acts
// on (none under 2026-07-28, whose lists are the same for every caller).
func (g *Gate) instanceResources(ctx context.Context) []mcp.Resource {
	if modern(ctx) {
		return nil
	}
	s := g.sessionOf(ctx)
	var out []mcp.Resource
	for _, m := range g.workflowList() {
		h := g.instanceOf(s, m)
		if h == "" {
			continue // a handle-key workflow the session has not used
		}
		name := m.ID + "/" + h
		out = append(out,
			mcp.NewResource(resURI{kind: resInstance, workflow: m.ID, handle: h}.String(), name,
				mcp.WithResourceTitle(fmt.Sprintf("The %s workflow's instance %s", m.ID, h)),
				mcp.WithResourceDescription(fmt.Sprintf("Where the %s workflow's instance %s is now, and the tools it allows.", m.ID, h)),
				mcp.WithMIMEType("application/json")),
			mcp.NewResource(resURI{kind: resTrail, workflow: m.ID, handle: h}.String(), name+"/trail",
				mcp.WithResourceTitle(fmt.Sprintf("The audit trail of the %s workflow's instance %s", m.ID, h)),
				mcp.WithResourceDescription(fmt.Sprintf("The latest %d steps of the %s workflow's instance %s.", TrailEntries, m.ID, h)),
				mcp.WithMIMEType("application/json")))
		if g.opts.Mermaid != nil {
			out = append(out, mcp.NewResource(resURI{kind: resInstanceDiagram, workflow: m.ID, handle: h}.String(), name+"/diagram",
				mcp.WithResourceTitle(fmt.Sprintf("The %s workflow's instance %s, drawn", m.ID, h)),
				mcp.WithResourceDescription(fmt.Sprintf("The %s workflow's diagram with the active states of its instance %s.", m.ID, h)),
				mcp.WithMIMEType(MermaidMIME)))
		}
	}
	return out
}

// readResource reads one of the gate's resources, for the request's
// session and principal.
func (g *Gate) readResource(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	g.activity.Add(1)
	uri := req.Params.URI
	r, m, err := g.readable(ctx, uri)
	if err != nil {
		return nil, err
	}
	text, mime := "", "application/json"
	switch r.kind {
	case resDiagram:
		text, mime = g.opts.Mermaid(m.Machine, toolsByEvent(m), nil), MermaidMIME
	case resInstanceDiagram:
		in, err := g.inst.Load(ctx, m, r.handle)
		if err != nil {
			return nil, err
		}
		text, mime = g.opts.Mermaid(m.Machine, toolsByEvent(m), in.Snapshot.Active), MermaidMIME
	case resTrail:
		if text, err = g.trail(ctx, m, r.handle); err != nil {
			return nil, err
		}
	case resInstance:
		c := &call{ctx: ctx, w: m, handle: r.handle, sess: g.sessionOf(ctx), modern: modern(ctx), principal: g.principalOf(ctx)}
		res := g.status(c)
		if res.IsError {
			return nil, errors.New(mcp.GetTextFromContent(res.Content[0]))
		}
		data, err := jsonenc.Append(nil, res.StructuredContent)
		if err != nil {
			return nil, err
		}
		text = string(data)
	}
	return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: mime, Text: text}}, nil
}

// trail is an instance's audit trail as its resource holds it: the
// latest TrailEntries entries, oldest first, and whether there are more.
func (g *Gate) trail(ctx context.Context, m *workflow.Workflow, handle string) (string, error) {
	entries, err := g.inst.Store().Audit(ctx, store.Key{Machine: m.ID, Handle: handle}, TrailEntries+1)
	if err != nil {
		return "", err
	}
	earlier := len(entries) > TrailEntries
	if earlier {
		entries = entries[1:]
	}
	if entries == nil {
		entries = []store.AuditEntry{}
	}
	data, err := json.Marshal(map[string]any{"machine": m.ID, "handle": handle, "entries": entries, "earlier": earlier, "limit": TrailEntries})
	return string(data), err
}

// toolsByEvent maps a workflow's events to their tools, for its diagram.
func toolsByEvent(m *workflow.Workflow) map[string]string {
	tools := make(map[string]string, len(m.Tools))
	for _, t := range m.Tools {
		tools[t.Event] = t.Name
	}
	return tools
}

// readable returns what a URI names when the request may read it, else
// errNoResource (saying which workflows are served, or that the instance
// is not one this request may read: the same whether it exists or not).
func (g *Gate) readable(ctx context.Context, uri string) (resURI, *workflow.Workflow, error) {
	r, ok := parseResURI(uri)
	if !ok {
		return r, nil, fmt.Errorf("%w: %s is not a URI of this server's resources (%s{workflow}/diagram, %s{workflow}/instance/{handle}[/trail|/diagram])", errNoResource, uri, ResourceScheme, ResourceScheme)
	}
	m := g.served.Load().machines[r.workflow]
	if m == nil {
		return r, nil, fmt.Errorf("%w: %s: no workflow %q is served (%s)", errNoResource, uri, r.workflow, joinTools(slices.Sorted(maps.Keys(g.served.Load().machines))))
	}
	if (r.kind == resDiagram || r.kind == resInstanceDiagram) && g.opts.Mermaid == nil {
		return r, nil, fmt.Errorf("%w: %s: this server draws no diagrams", errNoResource, uri)
	}
	if r.kind == resDiagram {
		return r, m, nil
	}
	if !g.mayRead(ctx, m, r.handle) {
		what := "the session's own instance or the shared one"
		switch {
		case m.HandleKey != "":
			what = "a valid handle"
		case modern(ctx):
			what = fmt.Sprintf("a handle %s made", m.StartTool)
		}
		return r, nil, fmt.Errorf("%w: %s is not an instance this client may read (of the %s workflow it may read %s)", errNoResource, uri, m.ID, what)
	}
	return r, m, nil
}

// mayRead reports whether a request may read an instance: one it could
// act on with a tool call.
func (g *Gate) mayRead(ctx context.Context, m *workflow.Workflow, handle string) bool {
	if workflow.CheckHandle(handle) != nil {
		return false
	}
	if m.HandleKey != "" {
		return true
	}
	if modern(ctx) {
		ok, err := g.mintedHandle(ctx, m, handle)
		return err == nil && ok
	}
	return handle == g.instanceOf(g.sessionOf(ctx), m)
}

// checkSubscribe refuses a resources/subscribe (an OnRequestInitialization
// hook, which sees every request first) to a URI the session may not
// read, to a session at its bound, and to a URI that names nothing this
// server serves: a subscription that could never be told anything is an
// error, not a silent success.
func (g *Gate) checkSubscribe(ctx context.Context, _ any, message any) error {
	raw, ok := message.(json.RawMessage)
	if !ok || !bytes.Contains(raw, []byte(mcp.MethodResourcesSubscribe)) {
		return nil
	}
	env, bad := readEnvelope(raw)
	if bad != nil || env.method != string(mcp.MethodResourcesSubscribe) || mcp.IsModernProtocol(env.protocolVersion()) {
		return nil // mcp-go answers it
	}
	var p struct {
		URI string `json:"uri"`
	}
	_ = json.Unmarshal(env.Params, &p)
	if p.URI == "" {
		return nil // mcp-go's error: uri is required
	}
	if _, ours := parseResURI(p.URI); !ours && !strings.HasPrefix(p.URI, ResourceScheme) {
		if srv := g.srv.Load(); srv != nil && srv.ListResources()[p.URI] != nil {
			return nil // the host's
		}
		return fmt.Errorf("%w: %s is not a resource this server serves", errNoResource, p.URI)
	}
	if _, _, err := g.readable(ctx, p.URI); err != nil {
		return err
	}
	if s := g.sessionOf(ctx); s != nil {
		s.mu.Lock()
		_, has := s.subs[p.URI]
		n := len(s.subs)
		s.mu.Unlock()
		if n >= maxSubscriptions && !has {
			return fmt.Errorf("%s: a session may subscribe to %d resources at most (unsubscribe from one first)", errTooManySubs, maxSubscriptions)
		}
	}
	return nil
}

// subscribe records a session's subscription to a resource.
func (g *Gate) subscribe(s *session, uri string, r resURI) {
	g.sessMu.Lock()
	defer g.sessMu.Unlock()
	if _, live := g.sessions[s.id]; !live {
		return
	}
	s.mu.Lock()
	if s.subs == nil {
		s.subs = map[string]resURI{}
	}
	s.subs[uri] = r
	s.mu.Unlock()
	k := r.key()
	if g.resWatchers == nil {
		g.resWatchers = map[store.Key]map[*session]bool{}
	}
	if g.resWatchers[k] == nil {
		g.resWatchers[k] = map[*session]bool{}
	}
	g.resWatchers[k][s] = true
}

// unsubscribe forgets a session's subscription to a resource (none: a
// no-op).
func (g *Gate) unsubscribe(s *session, uri string) {
	g.sessMu.Lock()
	defer g.sessMu.Unlock()
	s.mu.Lock()
	r, had := s.subs[uri]
	delete(s.subs, uri)
	still := false
	for _, o := range s.subs {
		still = still || o.key() == r.key()
	}
	s.mu.Unlock()
	if had && !still {
		g.unwatchResource(s, r.key())
	}
}

// dropSubscriptions forgets a session's subscriptions (sessMu and s.mu
// held).
func (g *Gate) dropSubscriptions(s *session) {
	for _, r := range s.subs {
		g.unwatchResource(s, r.key())
	}
	s.subs = nil
}

// unwatchResource forgets that a session watches an instance (sessMu
// held).
func (g *Gate) unwatchResource(s *session, k store.Key) {
	if ws := g.resWatchers[k]; ws != nil {
		delete(ws, s)
		if len(ws) == 0 {
			delete(g.resWatchers, k)
		}
	}
}

// resourceChanged tells the sessions subscribed to an instance's
// resources that they changed (Instances.Subscribe, through changed).
func (g *Gate) resourceChanged(ctx context.Context, c workflow.Change) {
	k := store.Key{Machine: c.Workflow, Handle: c.Handle}
	g.sessMu.Lock()
	var sessions []*session
	if c.Resync {
		// Anything may have changed (another replica's changes were
		// missed): every subscriber is told.
		seen := map[*session]bool{}
		for _, ws := range g.resWatchers {
			maps.Copy(seen, ws)
		}
		sessions = slices.Collect(maps.Keys(seen))
	} else {
		sessions = slices.Collect(maps.Keys(g.resWatchers[k]))
	}
	g.sessMu.Unlock()
	for _, s := range sessions {
		for _, uri := range s.subscribed(func(r resURI) bool { return c.Resync || r.key() == k }) {
			g.tellUpdated(ctx, s, uri)
		}
	}
}

// tellWorkflowSubscribers tells the sessions subscribed to any resource
// of a workflow that it changed (a reload changed its version).
func (g *Gate) tellWorkflowSubscribers(ctx context.Context, workflow string) {
	g.sessMu.Lock()
	seen := map[*session]bool{}
	for k, ws := range g.resWatchers {
		if k.Machine == workflow {
			maps.Copy(seen, ws)
		}
	}
	g.sessMu.Unlock()
	for s := range seen {
		for _, uri := range s.subscribed(func(r resURI) bool { return r.workflow == workflow }) {
			g.tellUpdated(ctx, s, uri)
		}
	}
}

// subscribed returns the URIs a session subscribed to that match, sorted.
func (s *session) subscribed(match func(resURI) bool) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for uri, r := range s.subs {
		if match(r) {
			out = append(out, uri)
		}
	}
	slices.Sort(out)
	return out
}

// tellUpdated tells a session that a resource it subscribed to changed
// (notifications/resources/updated).
func (g *Gate) tellUpdated(ctx context.Context, s *session, uri string) {
	params, _ := json.Marshal(map[string]string{"uri": uri})
	g.tellSession(ctx, s, string(mcp.MethodNotificationResourceUpdated), params)
}

// tellResourcesChanged tells a session that its resource list changed
// (notifications/resources/list_changed): the handle it uses of a
// workflow did.
func (g *Gate) tellResourcesChanged(ctx context.Context, s *session) {
	if s.modern.Load() {
		return
	}
	g.tellSession(ctx, s, string(mcp.MethodNotificationResourcesListChanged), nil)
}

// tellSession sends a session a notification: written into the answer
// of the session's request that made it, when there is one (see
// tellListChanged for why); for a session of the gate's own HTTP endpoint
// with no stream open, into the answer of its next request; else through
// mcp-go.
func (g *Gate) tellSession(ctx context.Context, s *session, method string, params json.RawMessage) {
	ev := notificationEvent(method, params)
	if a := answerOf(ctx); a != nil && a.session == s.id && a.notify(ev) {
		return
	}
	if s.answered.Load() && !s.streaming.Load() {
		s.queue(ev)
		return
	}
	g.sendNotification(s, method, params)
}

// sendNotification sends a notification to a session through mcp-go.
func (g *Gate) sendNotification(s *session, method string, params json.RawMessage) {
	srv := g.srv.Load()
	if srv == nil {
		return
	}
	var p map[string]any
	if params != nil {
		_ = json.Unmarshal(params, &p)
	}
	if err := srv.SendNotificationToSpecificClient(s.id, method, p); err != nil {
		g.log.Debug("cannot notify session", "session", s.name, "method", method, "err", err)
	}
}

// notificationEvent is a notification as an event of an event stream.
func notificationEvent(method string, params json.RawMessage) string {
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	data, _ := json.Marshal(msg)
	return "event: message\ndata: " + string(data) + "\n\n"
}

// queue keeps a notification for the session's next request's answer
// (once: the same one twice tells nothing more).
func (s *session) queue(ev string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.queued, ev) {
		s.queued = append(s.queued, ev)
	}
}

// takeQueued returns and forgets the notifications kept for the session's
// next request.
func (s *session) takeQueued() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queued
	s.queued = nil
	return q
}

// flushQueued sends a session the notifications kept for it through
// mcp-go: a stream that takes them opened.
func (g *Gate) flushQueued(s *session) {
	for _, ev := range s.takeQueued() {
		var m struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		data := strings.TrimSuffix(strings.TrimPrefix(ev, "event: message\ndata: "), "\n\n")
		if json.Unmarshal([]byte(data), &m) == nil {
			g.sendNotification(s, m.Method, m.Params)
		}
	}
}
