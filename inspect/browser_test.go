package inspect_test

import (
	"context"
	"flag"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/stategate/stategate/gate"
)

// docsScreenshot, when set, writes the screenshot of an instance's page
// that the README shows (docs/inspector.png).
var docsScreenshot = flag.Bool("inspector.docs", false, "write docs/inspector.png from the browser test")

// chromium finds a Chromium or Chrome binary: $CHROME, else the usual
// names on PATH.
func chromium() string {
	if p := os.Getenv("CHROME"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// artifacts is where the test's screenshots go: $STATEGATE_ARTIFACTS, else
// a temporary folder.
func artifacts(t *testing.T) string {
	if dir := os.Getenv("STATEGATE_ARTIFACTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.TempDir()
}

// browser is a headless Chromium driven by a test.
type browser struct {
	t   *testing.T
	ctx context.Context
	out string // where screenshots go
}

// updateWait bounds how long a page takes to show a change: it shows one
// within a second on an idle machine (the page refetches at most four
// times a second); the bound is for a loaded one.
const updateWait = 15 * time.Second

// openBrowser starts a headless Chromium that accepts every dialog (the
// reset asks for a confirmation), or skips the test when there is none or
// with -short.
func openBrowser(t *testing.T) *browser {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the browser test starts Chromium")
	}
	exe := chromium()
	if exe == "" {
		t.Skip("no Chromium or Chrome found (install Debian's chromium, or set CHROME to a binary)")
	}
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(exe), chromedp.Headless, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.WindowSize(1360, 900), chromedp.UserDataDir(t.TempDir())}
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancelT)
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	return &browser{t: t, ctx: ctx, out: artifacts(t)}
}

func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// click clicks the element a selector finds, as found in one evaluation:
// the page replaces its main part as it updates itself, so a node looked
// up before may be gone by the time it is clicked.
func (b *browser) click(what, selector string) {
	b.t.Helper()
	b.await(what, `(() => { const e = document.querySelector(`+strconv.Quote(selector)+`); if (!e) return "none"; e.click(); return "clicked" })()`, "clicked", updateWait)
}

func (b *browser) eval(js string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// await polls the page until js gives want, within deadline.
func (b *browser) await(what, js, want string, deadline time.Duration) {
	b.t.Helper()
	end := time.Now().Add(deadline)
	var got string
	for {
		// The page may be between two documents (a form's redirect):
		// an error is a value to poll past.
		v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`(() => { try { return String(`+js+`) } catch (e) { return "error: " + e } })()`))
		if got = v; err != nil {
			got = "error: " + err.Error()
		}
		if got == want {
			return
		}
		if time.Now().After(end) {
			shot(b.t, b.ctx, b.out, "failed-"+strings.ReplaceAll(what, " ", "-"))
			b.t.Fatalf("%s: the page shows %q after %v, want %q", what, got, deadline, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// awaitLive waits for the page's event stream to be open, so that no
// change made after it is missed.
func (b *browser) awaitLive() {
	b.t.Helper()
	b.await("the page is live", `document.getElementById("live").textContent`, "live", 5*time.Second)
}

// TestInspectorInABrowser opens the inspector of a running server in a
// headless Chromium, walks the invoice through MCP calls, and reads from
// the page's DOM that the current state, the diagram's highlighted state
// and the audit trail follow within a second, that a broken machine file
// shows its error, and that an operator's reset works.
func TestInspectorInABrowser(t *testing.T) {
	b := openBrowser(t)
	ctx, out, do, eval, await, awaitLive := b.ctx, b.out, b.do, b.eval, b.await, b.awaitLive
	s := start(t, gate.HTTPOptions{}, true, nil)

	// The empty inspector says why it is empty.
	do("open the inspector", chromedp.Navigate(s.URL+"/"))
	awaitLive()
	if got := eval(`document.getElementById("no-instances") ? document.getElementById("no-instances").textContent : ""`); !strings.Contains(got, "they appear when an agent calls a tool") {
		t.Errorf("the empty instances list says %q", got)
	}
	if got := eval(`document.querySelector("#files tbody tr.file").dataset.file + " " + document.querySelector("#files tbody tr.file .badge").textContent`); got != "invoice.json served" {
		t.Errorf("the workflows table shows %q, want invoice.json served", got)
	}
	shot(t, ctx, out, "1-workflows-empty")

	// An agent starts an invoice; the index lists it within a second.
	a := connect(t, s.URL)
	a.call("invoice_add_line", map[string]any{"description": "Design work", "amount": 1200})
	await("the index lists the instance", `String(document.querySelectorAll("table.instances tbody tr").length)`, "1", updateWait)

	// The status tool links to the instance's page.
	sc, _ := a.call("invoice_status", nil)
	link, _ := sc["inspect"].(string)
	if !strings.HasPrefix(link, s.URL+"/inspect/invoice/session-") {
		t.Fatalf("the status tool's inspect link is %q", link)
	}
	do("open the instance's page", chromedp.Navigate(link))
	awaitLive()
	state := `document.getElementById("current-state").textContent`
	// The diagram's highlighted state: the active atomic state's label.
	highlighted := `Array.from(document.querySelectorAll("#diagram g.state.active.atomic, #diagram g.state.active.final")).map(g => g.querySelector("text") ? g.querySelector("text").textContent.trim() : g.id).join(",")`
	trail := `Array.from(document.querySelectorAll("#audit tbody tr")).map(tr => tr.querySelector("td.tool").textContent.trim() + ":" + tr.querySelector("td.move").textContent.replace(/\s+/g, " ").trim()).join(" | ")`
	await("state", state, "draft", updateWait)
	await("highlighted", highlighted, "draft", updateWait)
	await("trail", trail, "invoice_add_line:stayed in draft", updateWait)

	// Each call moves the page within a second.
	a.call("invoice_add_line", map[string]any{"description": "Hosting, March", "amount": 300})
	await("trail after a second line", `String(document.querySelectorAll("#audit tbody tr").length)`, "2", updateWait)
	a.call("invoice_submit", nil)
	await("state after submit", state, "review", updateWait)
	await("highlighted after submit", highlighted, "review", updateWait)
	await("trail after submit", `document.querySelector("#audit tbody tr").querySelector("td.move").textContent.replace(/\s+/g, " ").trim()`, "draft → review", updateWait)
	a.call("invoice_approve", nil)
	await("state after approve", state, "approved", updateWait)
	await("highlighted after approve", highlighted, "approved", updateWait)
	a.call("invoice_record_payment", map[string]any{"amount": 500})
	await("trail after a payment", `document.querySelector("#audit tbody tr td.tool").textContent.trim() + " " + document.querySelector("#audit tbody tr code.payload").textContent`, `invoice_record_payment {"amount":500}`, updateWait)
	if got := eval(`document.querySelector("#audit tbody tr code.session").textContent`); !strings.HasPrefix(got, "session-") {
		t.Errorf("the trail names the session %q, want its opaque name session-…", got)
	}
	time.Sleep(time.Second) // the new row's flash fades
	shot(t, ctx, out, "2-instance-approved")
	if *docsScreenshot {
		data, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "docs", "inspector.png"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Paid in full and discharged: the workflow is done, and the
	// operator's reset (enabled here) starts it afresh.
	a.call("invoice_record_payment", map[string]any{"amount": 1000})
	a.call("invoice_discharge", nil)
	await("state when done", state, "discharged", updateWait)
	await("the done badge", `document.querySelector("dl.facts .badge").textContent`, "done", updateWait)
	await("the reset button", `document.querySelector("form.reset button") ? "yes" : "no"`, "yes", updateWait)
	shot(t, ctx, out, "3-instance-done")
	b.click("reset", "form.reset button")
	await("the trail records the reset", `document.querySelector("#audit tbody tr td.tool").textContent.trim() + " / " + document.querySelector("#audit tbody tr td.notes").textContent.trim()`,
		"(operator reset) / reset by an operator (the inspector's reset button)", updateWait)
	await("state after the reset", state, "draft", updateWait)

	// A per-workflow diagram, and a broken machine file: the workflow's
	// page and the index show the error, with its file and line.
	do("open the workflow's page", chromedp.Navigate(s.URL+"/inspect/invoice"))
	awaitLive()
	if got := eval(`String(document.querySelectorAll("#diagram g.state").length > 3)`); got != "true" {
		t.Errorf("the workflow's diagram has no states")
	}
	shot(t, ctx, out, "4-workflow")
	do("open the index", chromedp.Navigate(s.URL+"/inspect"))
	awaitLive()
	if err := os.WriteFile(filepath.Join(s.Machines, "broken.json"), []byte("{\n  \"id\": \"broken\",\n  \"initial\": \"a\",\n  \"states\": { \"a\": { } \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	await("the broken file's error", `Array.from(document.querySelectorAll("tr.error-row .message")).map(e => e.textContent).join(" ").includes("broken.json") ? "shown" : document.body.innerText.slice(0, 200)`, "shown", updateWait)
	errText := eval(`document.querySelector("tr.error-row .message").textContent`)
	if !strings.Contains(errText, "broken.json:") {
		t.Errorf("the error does not name the file and line: %q", errText)
	}
	if got := eval(`document.querySelector("tr.file.failed .badge").textContent`); got != "failed: not served" {
		t.Errorf("the broken file's status is %q", got)
	}
	shot(t, ctx, out, "5-broken-file")
	t.Logf("screenshots in %s", out)
}

// TestForgedResetInABrowser: an operator opened the inspector with its
// token (the cookie) and an instance's page; a page served on another
// port of the same host (same-site: the cookie goes with its requests)
// posts the reset form, even with the form's token, and is refused; the
// page's own button still resets.
func TestForgedResetInABrowser(t *testing.T) {
	b := openBrowser(t)
	s := finished(t, gate.HTTPOptions{Token: "s3cret"})
	b.do("open the instance with the token", chromedp.Navigate(s.URL+"/inspect/oneshot/j-1?token=s3cret"))
	b.awaitLive()
	b.await("the reset button", `document.querySelector("form.reset button") ? "yes" : "no"`, "yes", updateWait)
	token := b.eval(`document.querySelector("form.reset input[name=csrf]").value`)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><form method="post" action="%s/inspect/_/reset"><input name="workflow" value="oneshot"><input name="handle" value="j-1"><input name="csrf" value="%s"></form><script>document.forms[0].submit()</script>`,
			html.EscapeString(s.URL), html.EscapeString(token))
	}))
	defer other.Close()
	if port(t, other.URL) == port(t, s.URL) || !strings.HasPrefix(other.URL, "http://127.0.0.1:") {
		t.Fatalf("the other page is at %s", other.URL)
	}
	b.do("open the other port's page", chromedp.Navigate(other.URL))
	b.await("the forged reset is refused", `location.href + " " + document.body.innerText.slice(0, 9)`, s.URL+"/inspect/_/reset Forbidden", 10*time.Second)
	if !done(t, s) {
		t.Fatal("the forged reset reset the instance")
	}
	b.do("back to the instance", chromedp.Navigate(s.URL+"/inspect/oneshot/j-1"))
	b.awaitLive()
	b.click("reset", "form.reset button")
	b.await("the state after the reset", `document.getElementById("current-state").textContent`, "waiting", 10*time.Second)
	if done(t, s) {
		t.Fatal("the page's own reset did not reset the instance")
	}
}

// shot saves a full-page screenshot as NAME.png in dir.
func shot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	data, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("inspector-%s.png", name)), data, 0o644); err != nil {
		t.Error(err)
	}
}

// TestParallelMachineInABrowser opens the page of an instance of the
// bundled parallel machine (db-migration): its diagram is drawn at a
// readable size (the state names at 13 px at least, the page no wider
// than the window: the diagram scrolls), and the tools available now
// and the timers follow the agent's calls.
func TestParallelMachineInABrowser(t *testing.T) {
	b := openBrowser(t)
	src, err := os.ReadFile(filepath.Join("..", "machines", "db-migration.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, gate.HTTPOptions{}, false, map[string]string{"db-migration.mjs": string(src)})
	a := connect(t, s.URL)
	sc, _ := a.call("migration_status", nil)
	link, _ := sc["inspect"].(string)
	b.do("open the instance's page", chromedp.Navigate(link))
	b.awaitLive()
	tools := `Array.from(document.querySelectorAll("#tools-now tr[data-tool]")).map(tr => tr.dataset.tool).join(",")`
	b.await("the tools of the closed window", tools, "migration_open_window,migration_status", 10*time.Second)
	// The state names are 12 pt in the SVG's own units.
	px := `(() => { const s = document.querySelector("#diagram svg"); return String(Math.round(12 * s.getBoundingClientRect().width / s.viewBox.baseVal.width)) })()`
	if got, _ := strconv.Atoi(b.eval(px)); got < 13 {
		t.Errorf("the diagram's state names are drawn at %d px, want 13 at least", got)
	}
	if got := b.eval(`String(document.documentElement.scrollWidth <= window.innerWidth)`); got != "true" {
		t.Errorf("the page is wider than the window: the diagram should scroll in its box")
	}

	a.call("migration_open_window", nil)
	b.await("the tools of the open window", tools, "migration_close_window,migration_start,migration_status", 10*time.Second)
	b.await("the window's timer", `document.querySelector("ul.timers .event").textContent`, "after window: window.open → window.closed", 10*time.Second)
	shot(t, b.ctx, b.out, "6-parallel-instance")
}
