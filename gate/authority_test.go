package gate_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
	"github.com/stategate/stategate/xstate/js"
)

// principals is a transport's authentication, for tests: the principal
// named by the X-Sub and X-Roles headers (the JWT verification of `serve
// --auth-*` puts its principal in the context alike).
func principals(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sub := r.Header.Get("X-Sub"); sub != "" {
			var roles []string
			if rs := r.Header.Get("X-Roles"); rs != "" {
				roles = strings.Split(rs, ",")
			}
			r = r.WithContext(gate.WithPrincipal(r.Context(), gate.Principal{Sub: sub, Roles: roles, Auth: "test"}))
		}
		h.ServeHTTP(w, r)
	})
}

// human answers elicitations as a human would, and records what it was
// asked.
type human struct {
	mu      sync.Mutex
	asked   []string
	answer  mcp.ElicitationResponseAction
	approve bool
	comment string
}

func (h *human) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.asked = append(h.asked, req.Params.Message)
	res := &mcp.ElicitationResult{}
	res.Action = h.answer
	if h.answer == mcp.ElicitationResponseActionAccept {
		res.Content = map[string]any{"approve": h.approve, "comment": h.comment}
	}
	return res, nil
}

// TestWhoMayTakeAStep walks the bundled expense claim with principals: an
// agent submits, cannot see or call approve (FORBIDDEN naming the role);
// an approver who submitted a claim cannot approve it (REJECTED, four
// eyes) while another approver can; a principal argument forged by the
// agent changes nothing; pay is refused without a human (the client
// cannot ask) and on a no, and taken on a yes; the trail names who.
func TestWhoMayTakeAStep(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join("..", "machines", "expense.ts"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "expense.ts"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	st := store.NewMemory()
	g := gate.New(gate.Options{Store: st, Logger: quietLog()})
	if err := workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Loader: &xstate.Loader{Modules: &js.Host{}}, Logger: quietLog(), Serve: g.Reloaded}).Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := g.HTTPHandler(gate.HTTPOptions{})
	srv := httptest.NewServer(principals(h))
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)
	as := func(sub, roles string, hum *human) *mcptest.Client {
		o := mcptest.Options{Header: map[string]string{"X-Sub": sub, "X-Roles": roles}, Name: sub}
		if hum != nil {
			o.Capabilities.Elicitation = &mcp.ElicitationCapability{}
			o.ClientOptions = []client.ClientOption{client.WithElicitationHandler(hum)}
		}
		return mcptest.HTTP(t, srv.URL+"/mcp", o)
	}
	id := func(e string) map[string]any { return map[string]any{"expense_id": e} }
	with := func(e string, kv ...any) map[string]any {
		m := id(e)
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}

	agent := as("agent", "", nil)
	if _, sc, isErr := agent.Call("expense_submit", with("e1", "amount", 120, "payee", "ACME")); isErr || sc["state"] != "review" {
		t.Fatalf("submit: %v", sc)
	}
	if _, ok := agent.Tools()["expense_approve"]; ok {
		t.Error("expense_approve listed to the agent, who holds no role")
	}
	text, sc, isErr := agent.Call("expense_approve", id("e1"))
	if !isErr || sc["error"] != "FORBIDDEN" || !strings.Contains(text, "needs the role approver") {
		t.Errorf("approve by the agent: %s", text)
	}
	// Forged: the server's principal wins over an argument of its name.
	forged := map[string]any{"sub": "bob", "roles": []any{"approver"}}
	if text, sc, isErr := agent.Call("expense_approve", with("e1", "principal", forged)); !isErr || sc["error"] != "FORBIDDEN" {
		t.Errorf("approve by the agent, with a forged principal: %s", text)
	}
	agent.Call("expense_submit", with("e3", "amount", 5, "payee", "X", "principal", forged))
	if _, sc, _ := agent.Call("expense_status", id("e3")); sc["context"].(map[string]any)["submittedBy"] != "agent" {
		t.Errorf("a forged principal reached the machine: %v", sc["context"])
	}

	alice := as("alice", "approver", nil)
	bob := as("bob", "approver", nil)
	alice.Call("expense_status", id("e1")) // her session sees e1 now
	if _, ok := alice.Tools()["expense_approve"]; !ok {
		t.Error("expense_approve not listed to an approver, on a claim in review")
	}
	alice.Call("expense_submit", with("e2", "amount", 40, "payee", "Bakery"))
	if text, sc, isErr := alice.Call("expense_approve", id("e2")); !isErr || sc["error"] != "REJECTED" ||
		!strings.Contains(text, `the guard notTheSubmitter said no (to "Approve the claim (an approver who did not submit it)")`) {
		t.Errorf("alice approving her own claim: %s", text)
	}
	if _, sc, isErr := bob.Call("expense_approve", id("e2")); isErr || sc["state"] != "approved" {
		t.Errorf("bob approving alice's claim: %v", sc)
	}
	if _, sc, isErr := bob.Call("expense_approve", id("e1")); isErr || sc["state"] != "approved" {
		t.Fatalf("bob approving the agent's claim: %v", sc)
	}

	// Paying asks the payer's human.
	noHuman := as("pat", "payer", nil)
	if text, sc, isErr := noHuman.Call("expense_pay", id("e1")); !isErr || sc["error"] != "NEEDS_HUMAN" {
		t.Errorf("pay by a client that cannot ask its human: %s", text)
	}
	no := &human{answer: mcp.ElicitationResponseActionDecline}
	if text, sc, isErr := as("pat", "payer", no).Call("expense_pay", id("e1")); !isErr || sc["error"] != "DECLINED" {
		t.Errorf("pay declined: %s", text)
	}
	if _, sc, _ := bob.Call("expense_status", id("e1")); sc["state"] != "approved" {
		t.Fatalf("after the refusals, the claim moved: %v", sc["state"])
	}
	yes := &human{answer: mcp.ElicitationResponseActionAccept, approve: true, comment: "checked the invoice"}
	if text, sc, isErr := as("pat", "payer", yes).Call("expense_pay", id("e1")); isErr || sc["state"] != "paid" {
		t.Fatalf("pay, confirmed: %s", text)
	}
	if len(yes.asked) != 1 || yes.asked[0] != "Pay 120 to ACME?" {
		t.Errorf("the human was asked %q", yes.asked)
	}

	// The trail names who, and the confirmation.
	trail, err := st.Audit(context.Background(), store.Key{Machine: "expense", Handle: "e1"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	who := map[string]string{}
	for _, e := range trail {
		if e.Principal != nil {
			who[e.Tool] = e.Principal.Sub
		}
		if e.Tool == "expense_pay" && (e.Confirmed == nil || e.Confirmed.By.Sub != "pat" || e.Confirmed.Via != "elicitation" || e.Confirmed.Comment != "checked the invoice") {
			t.Errorf("the pay entry's confirmation: %+v", e.Confirmed)
		}
	}
	if who["expense_submit"] != "agent" || who["expense_approve"] != "bob" || who["expense_pay"] != "pat" {
		t.Errorf("who, by tool: %v", who)
	}
}

// TestOperatorApproval: a call of a tool with meta.tool.approval waits
// for an operator: answered PENDING, the instance takes no other call and
// lists only its status tool; an operator holding the role approves it
// (Instances.Approve, as the inspector does), and the caller's session is
// told its list changed.
func TestOperatorApproval(t *testing.T) {
	m, _, err := (&xstate.Loader{}).Parse("vault.json", []byte(`{"id":"vault","initial":"closed","states":{
	  "closed":{"on":{"OPEN":{"target":"open","meta":{"tool":{"approval":"keyholder","confirm":"Open the vault for {reason}?"}}},"KNOCK":"closed"}},
	  "open":{"on":{"CLOSE":"closed"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	w, err := workflow.New(m, workflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := store.NewMemory()
	g := gate.New(gate.Options{Store: st, Logger: quietLog(), InspectLink: func(w, h string) string { return "http://inspector/" + w + "/" + h }})
	if err := g.SetWorkflows([]*workflow.Workflow{w}); err != nil {
		t.Fatal(err)
	}
	h := g.HTTPHandler(gate.HTTPOptions{})
	srv := httptest.NewServer(principals(h))
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)
	agent := mcptest.HTTP(t, srv.URL+"/mcp", mcptest.Options{Header: map[string]string{"X-Sub": "agent"}, Listen: true})
	text, sc, isErr := agent.Call("vault_open", map[string]any{"reason": "the audit"})
	if !isErr || sc["error"] != "PENDING" || sc["approval"] == nil || !strings.Contains(text, "keyholder") || !strings.Contains(text, "http://inspector/vault/") {
		t.Fatalf("open: %s %v", text, sc)
	}
	handle, _ := sc["handle"].(string)
	agent.AwaitTools("only the status tool while the call waits", func(ts map[string]mcp.Tool) bool {
		_, open := ts["vault_open"]
		_, status := ts["vault_status"]
		return !open && status
	})
	if text, sc, _ := agent.Call("vault_knock", nil); sc["error"] != "PENDING" {
		t.Errorf("another call while one waits: %s", text)
	}
	approvals, err := g.Instances().Approvals(context.Background())
	if err != nil || len(approvals) != 1 || approvals[0].Confirm != "Open the vault for the audit?" || approvals[0].Principal.Sub != "agent" {
		t.Fatalf("approvals: %+v %v", approvals, err)
	}
	agent.Drain()
	if _, err := g.Instances().Approve(context.Background(), "vault", handle, approvals[0].ID, gate.Principal{Sub: "kim", Roles: []string{"keyholder"}, Auth: "jwt"}, "fine"); err != nil {
		t.Fatal(err)
	}
	agent.AwaitChanged()
	if _, sc, _ := agent.Call("vault_status", nil); sc["state"] != "open" || sc["pending"] != nil {
		t.Errorf("after the approval: %v", sc)
	}
}

// stuck is a human who never answers: it says when it is asked, and waits
// until the test ends.
type stuck struct {
	asked chan struct{}
	done  chan struct{}
}

func (s *stuck) Elicit(ctx context.Context, _ mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	s.asked <- struct{}{}
	select {
	case <-ctx.Done():
	case <-s.done:
	}
	return nil, context.Canceled
}

// TestConfirmationWaitIsBounded: a call waiting for its human's yes holds
// nothing: another instance moves, and its own instance's status is read,
// meanwhile; past Options.ConfirmTimeout it is refused NEEDS_HUMAN, and
// the instance has not moved.
func TestConfirmationWaitIsBounded(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join("..", "machines", "expense.ts"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "expense.ts"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	// Long enough for the calls made while it runs on a loaded machine:
	// the test waits for them before the wait ends.
	const wait = 3 * time.Second
	g := gate.New(gate.Options{Store: store.NewMemory(), Logger: quietLog(), ConfirmTimeout: wait})
	if err := workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Loader: &xstate.Loader{Modules: &js.Host{}}, Logger: quietLog(), Serve: g.Reloaded}).Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := g.HTTPHandler(gate.HTTPOptions{})
	srv := httptest.NewServer(principals(h))
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)
	as := func(sub, roles string, hum client.ElicitationHandler) *mcptest.Client {
		o := mcptest.Options{Header: map[string]string{"X-Sub": sub, "X-Roles": roles}, Name: sub}
		if hum != nil {
			o.Capabilities.Elicitation = &mcp.ElicitationCapability{}
			o.ClientOptions = []client.ClientOption{client.WithElicitationHandler(hum)}
		}
		return mcptest.HTTP(t, srv.URL+"/mcp", o)
	}
	agent, bob := as("agent", "", nil), as("bob", "approver", nil)
	agent.Result("expense_submit", map[string]any{"expense_id": "e1", "amount": 5, "payee": "X"})
	bob.Result("expense_approve", map[string]any{"expense_id": "e1"})

	hum := &stuck{asked: make(chan struct{}, 1), done: make(chan struct{})}
	t.Cleanup(func() { close(hum.done) })
	pat := as("pat", "payer", hum)
	type answer struct {
		text string
		sc   map[string]any
	}
	paid := make(chan answer, 1)
	began := time.Now()
	go func() {
		text, sc, _ := pat.Call("expense_pay", map[string]any{"expense_id": "e1"})
		paid <- answer{text, sc}
	}()
	select {
	case <-hum.asked:
	case <-time.After(mcptest.Wait):
		t.Fatal("the human was never asked")
	}
	// Meanwhile: another instance moves, and e1's status is read.
	if _, sc, isErr := agent.Call("expense_submit", map[string]any{"expense_id": "e2", "amount": 7, "payee": "Y"}); isErr || sc["state"] != "review" {
		t.Errorf("another instance, while a human is asked: %v", sc)
	}
	if _, sc, _ := bob.Call("expense_status", map[string]any{"expense_id": "e1"}); sc["state"] != "approved" {
		t.Errorf("the status, while a human is asked: %v", sc)
	}
	var a answer
	select {
	case a = <-paid:
	case <-time.After(wait + mcptest.Wait):
		t.Fatal("the call never ended")
	}
	if a.sc["error"] != "NEEDS_HUMAN" || !strings.Contains(a.text, "none came") {
		t.Errorf("pay with no answer: %s %v", a.text, a.sc)
	}
	if took := time.Since(began); took < wait {
		t.Errorf("the call ended after %v, before the wait of %v", took, wait)
	}
	if _, sc, _ := bob.Call("expense_status", map[string]any{"expense_id": "e1"}); sc["state"] != "approved" {
		t.Errorf("after the wait, e1 moved: %v", sc["state"])
	}
}
