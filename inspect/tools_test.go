package inspect_test

import (
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/inspect"
	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/store"
)

// lease is a parallel machine with `after` timers in its regions and a
// tool only operators are listed.
const lease = `{"id":"lease","meta":{"handleKey":"lease"},"type":"parallel","states":{
 "window":{"initial":"open","states":{
  "open":{"after":{"1800000":"closed"},"on":{"CLOSE":{"target":"closed","description":"Close the window now.","meta":{"tool":{"roles":["operator"]}}}}},
  "closed":{"on":{"OPEN":"open"}}}},
 "reminder":{"initial":"idle","states":{
  "idle":{"after":{"5400000":{"target":"idle","reenter":true}},"on":{"SNOOZE":{"target":"idle","description":"Put the reminder off."}}}}}}}`

var (
	toolRow   = regexp.MustCompile(`<tr data-tool="([^"]+)"( class="hidden-tool")?>`)
	timerItem = regexp.MustCompile(`<span class="event" title="([^"]*)">([^<]*)</span>`)
	svgStart  = regexp.MustCompile(`<svg width="([0-9.]+)pt"( style="min-width: ([0-9]+)px")?`)
)

// toolsNow reads the tools an instance's page says are offered now: their
// names, and those it marks hidden from the agent.
func toolsNow(t *testing.T, page string) (names, hidden []string) {
	t.Helper()
	_, sec, ok := strings.Cut(page, `<section class="tools-section" id="tools-now">`)
	sec, _, _ = strings.Cut(sec, "</section>")
	if !ok {
		t.Fatalf("the instance's page has no section of the tools available now:\n%s", page)
	}
	for _, m := range toolRow.FindAllStringSubmatch(sec, -1) {
		names = append(names, m[1])
		if m[2] != "" {
			hidden = append(hidden, m[1])
		}
	}
	return names, hidden
}

// listed are the tools of a workflow an agent is listed now, sorted.
func listed(a *agent, prefix string) []string {
	var out []string
	for name := range a.Tools() {
		if strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// TestInstancePageListsTheToolsOfNow: an instance's page lists the tools
// its agent is listed, as its state changes: the same names as the
// agent's tools/list, the others named as not offered.
func TestInstancePageListsTheToolsOfNow(t *testing.T) {
	s := start(t, gate.HTTPOptions{}, false, nil)
	a := connect(t, s.URL)
	sc, _ := a.call("invoice_status", nil)
	link, _ := sc["inspect"].(string)
	for _, step := range []struct {
		call string
		args map[string]any
	}{
		{"", nil}, // not stored yet: the initial state's
		{"invoice_add_line", map[string]any{"description": "Design", "amount": 100}},
		{"invoice_submit", nil},
		{"invoice_approve", nil},
	} {
		if step.call != "" {
			a.call(step.call, step.args)
		}
		page := body(t, get(t, link, nil))
		names, hidden := toolsNow(t, page)
		if want := listed(a, "invoice_"); !slices.Equal(names, want) || len(hidden) > 0 {
			t.Errorf("after %q the page offers %v (hidden %v); the agent is listed %v", step.call, names, hidden, want)
		}
		if step.call == "" && !strings.Contains(page, "Add an invoice line.") {
			t.Errorf("in the initial state the page does not show the compact description the agent is listed")
		}
		_, others, _ := strings.Cut(page, `Not offered in this state: `)
		others, _, _ = strings.Cut(others, "</p>")
		if others == "" || strings.Contains(others, "<code>"+names[0]+"</code>") || !strings.Contains(others, "<code>invoice_discharge</code>") {
			t.Errorf("after %q the page does not name the tools not offered, or names an offered one", step.call)
		}
	}
}

// TestInstancePageOfAParallelMachine: the page of a parallel machine's
// instance says which tool a role hides from the agent, labels its
// timers by their delay, state and target, shows its context once, and
// draws its diagram no smaller than readable.
func TestInstancePageOfAParallelMachine(t *testing.T) {
	caller := store.Principal{Sub: "alice", Auth: "stdio"}
	s := startWith(t, gate.HTTPOptions{}, inspect.Options{Caller: &caller}, map[string]string{"lease.json": lease})
	a := connect(t, s.URL)
	a.call("lease_snooze", map[string]any{"lease": "l-1"})
	res := get(t, s.URL+"/inspect/lease/l-1", nil)
	page := body(t, res)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the instance's page: %s\n%s", res.Status, page)
	}
	names, hidden := toolsNow(t, page)
	if !slices.Equal(names, []string{"lease_close", "lease_snooze", "lease_status"}) || !slices.Equal(hidden, []string{"lease_close"}) {
		t.Errorf("the page offers %v, hidden %v; want lease_close (hidden), lease_snooze, lease_status", names, hidden)
	}
	if want := listed(a, "lease_"); !slices.Equal(want, []string{"lease_snooze", "lease_status"}) {
		t.Errorf("the agent is listed %v", want)
	}
	if !strings.Contains(page, `callers holding the role <code>operator</code> <span class="badge hidden"`) || !strings.Contains(page, "(the agent is alice (stdio))") {
		t.Errorf("the page does not say which role hides lease_close from whom:\n%s", page)
	}
	if !strings.Contains(page, `Not offered in this state: <code>lease_open</code>`) {
		t.Errorf("the page does not name lease_open as not offered")
	}

	var timers []string
	for _, m := range timerItem.FindAllStringSubmatch(page, -1) {
		timers = append(timers, m[2]+" ("+m[1]+")")
	}
	slices.Sort(timers)
	want := []string{
		"after 1h30m: reminder.idle → reminder.idle (xstate.after.5400000.lease.reminder.idle)",
		"after 30m: window.open → window.closed (xstate.after.1800000.lease.window.open)",
	}
	if !slices.Equal(timers, want) {
		t.Errorf("the timers read\n%s\nwant\n%s", strings.Join(timers, "\n"), strings.Join(want, "\n"))
	}

	if n := strings.Count(page, `id="context"`); n != 1 {
		t.Errorf("the context is shown %d times, want once", n)
	}
	m := svgStart.FindStringSubmatch(page)
	if m == nil || m[3] == "" {
		t.Fatalf("the diagram's root has no smallest width: %q", m)
	}
	pt, _ := strconv.ParseFloat(m[1], 64)
	px, _ := strconv.Atoi(m[3])
	if got := float64(px) / (pt * 4 / 3); got < 0.84 || got > 0.86 {
		t.Errorf("the diagram's smallest width is %d px of its %s pt: %.2f of its natural size, want 0.85", px, m[1], got)
	}

	// The workflow's page lists every tool, with who is listed it.
	wp := body(t, get(t, s.URL+"/inspect/lease", nil))
	for _, want := range []string{
		`<tr data-tool="lease_close"><td><code>lease_close</code></td><td><code>CLOSE</code></td><td>window.open</td><td class="roles">callers holding the role <code>operator</code>`,
		`<tr data-tool="lease_snooze"><td><code>lease_snooze</code></td><td><code>SNOOZE</code></td><td>reminder.idle</td><td class="roles"><span class="muted">every caller</span>`,
	} {
		if !strings.Contains(wp, want) {
			t.Errorf("the workflow's page lacks\n%s\nin\n%s", want, wp)
		}
	}
}

// TestInstancePageWhileACallWaits: while a call waits for an operator's
// approval, the page offers nothing but the status tool, and says why;
// beside stdio (a Caller) it says how an operator is authenticated there.
func TestInstancePageWhileACallWaits(t *testing.T) {
	caller := store.Principal{Sub: "alice", Auth: "stdio", Roles: []string{"keyholder"}}
	s := startWith(t, gate.HTTPOptions{}, inspect.Options{Caller: &caller}, map[string]string{"vault.json": vault})
	a := &agent{mcptest.HTTP(t, s.URL+"/mcp", mcptest.Options{Name: "inspect-test"})}
	_, sc, _ := a.Call("vault_open", map[string]any{"reason": "audit"})
	link, _ := sc["inspect"].(string)
	if sc["error"] != "PENDING" || link == "" {
		t.Fatalf("open: %v", sc)
	}
	page := body(t, get(t, link, nil))
	names, _ := toolsNow(t, page)
	if !slices.Equal(names, []string{"vault_status"}) || !strings.Contains(page, `A call of <code>vault_open</code> waits for an operator's approval`) {
		t.Errorf("while a call waits the page offers %v:\n%s", names, page)
	}
	if !strings.Contains(page, "an approval needs an operator&#39;s token (serve --inspect with --token-file, and open this page once with ?token=TOKEN") {
		t.Errorf("the page does not say how to approve beside stdio:\n%s", page)
	}
}

// TestInstancePageOfAnInstanceNotStarted: the page of an instance of a
// machine with meta.input that was not started offers what its agent is
// listed (the start and status tools), and the same once it is started.
func TestInstancePageOfAnInstanceNotStarted(t *testing.T) {
	const order = `import { setup } from 'xstate';
export const machine = setup({}).createMachine({
  id: 'order',
  meta: { input: { type: 'object', properties: { items: { type: 'integer' } }, required: ['items'] } },
  context: ({ input }) => ({ items: input.items }),
  initial: 'open',
  states: { open: { on: { PAY: 'paid' } }, paid: { type: 'final' } },
});`
	s := start(t, gate.HTTPOptions{}, false, map[string]string{"order.ts": order})
	a := connect(t, s.URL)
	sc, _ := a.call("order_status", nil)
	link, _ := sc["inspect"].(string)
	for _, call := range []string{"", "order_start"} {
		if call != "" {
			a.call(call, map[string]any{"items": 2})
		}
		names, _ := toolsNow(t, body(t, get(t, link, nil)))
		if want := listed(a, "order_"); !slices.Equal(names, want) {
			t.Errorf("after %q the page offers %v; the agent is listed %v", call, names, want)
		}
	}
}
