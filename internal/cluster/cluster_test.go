package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/internal/mcpproxy"
	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/internal/pgtest"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/store/postgres"
)

// pg is the test binary's PostgreSQL cluster (stopped and started again
// by the test).
var pg pgtest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	pg.Close()
	os.Exit(code)
}

// wait bounds every wait for something expected: far more than it takes
// on a loaded machine; it matters only when the thing never comes.
const wait = mcptest.Wait

// build builds stategate once, into dir.
func build(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "stategate")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/stategate/stategate/cmd/stategate")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// harness is the replicas, their database and the proxy in front.
type harness struct {
	t        *testing.T
	bin, db  string
	machines string
	logs     string
	mu       sync.Mutex
	replicas map[string]*replica
	proxy    *mcpproxy.Proxy
	front    string // the proxy's /mcp URL
	check    *postgres.Store
}

// replica is a serve process.
type replica struct {
	name, url, run string
	cmd            *exec.Cmd
	done           chan struct{}
	log            string
}

var (
	urlLine = regexp.MustCompile(`msg="serving MCP over Streamable HTTP" url=(http://\S+/mcp)`)
	runLine = regexp.MustCompile(`msg="store: PostgreSQL" .* run=(\S+)`)
)

// start starts a replica named name (its --route), returning once it
// serves.
func (h *harness) start(name string) *replica {
	t := h.t
	t.Helper()
	r := &replica{name: name, done: make(chan struct{}), log: filepath.Join(h.logs, name+"-"+fmt.Sprint(time.Now().UnixNano())+".log")}
	r.cmd = exec.Command(h.bin, "serve", "--http", "127.0.0.1:0", "--store", h.db, "--machines", h.machines,
		"--upstreams", "none", "--procs", "1", "--route", name, "--start-rate", "0", "--max-instances", "0")
	r.cmd.Env = append(os.Environ(), "STATEGATE_STORE=") // the flag, not the environment
	stderr, err := r.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		defer close(r.done)
		defer logf.Close()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if m := runLine.FindStringSubmatch(line); m != nil {
				r.run = m[1]
			}
			if m := urlLine.FindStringSubmatch(line); m != nil && r.url == "" {
				r.url = m[1]
				close(ready)
			}
		}
		r.cmd.Wait()
	}()
	select {
	case <-ready:
	case <-r.done:
		t.Fatalf("replica %s exited as it started:\n%s", name, h.tail(r))
	case <-time.After(wait):
		t.Fatalf("replica %s did not serve within %v:\n%s", name, wait, h.tail(r))
	}
	h.mu.Lock()
	h.replicas[name] = r
	h.mu.Unlock()
	return r
}

// tail is the end of a replica's log.
func (h *harness) tail(r *replica) string {
	b, _ := os.ReadFile(r.log)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// kill kills a replica (SIGKILL), and stop stops it (SIGTERM: it drains
// and closes its store); both wait for it to exit.
func (h *harness) kill(r *replica) { h.signal(r, syscall.SIGKILL) }
func (h *harness) stop(r *replica) { h.signal(r, syscall.SIGTERM) }

func (h *harness) signal(r *replica, sig syscall.Signal) {
	h.t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		select {
		case <-r.done:
			return
		default:
			h.t.Fatal(err)
		}
	}
	select {
	case <-r.done:
	case <-time.After(wait):
		h.t.Fatalf("replica %s did not exit on %v", r.name, sig)
	}
}

// modern connects a client of revision 2026-07-28 to a URL.
func modern(t *testing.T, url string) *mcptest.Client {
	t.Helper()
	return mcptest.HTTP(t, url, mcptest.Options{Version: mcp.ProtocolVersion20260728, Name: "cluster"})
}

// result is one tool call's outcome.
type result struct {
	sc    map[string]any
	err   error // the transport's, or the result's text when isError
	code  string
	took  time.Duration
	acked bool
}

// call calls a tool, never failing the test: what came back, or why not.
func call(c *mcptest.Client, name string, args map[string]any) result {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	start := time.Now()
	res, err := c.CallTool(ctx, req)
	r := result{took: time.Since(start), err: err}
	if err != nil {
		return r
	}
	r.sc = mcptest.Structured(res)
	if res.IsError {
		r.code, _ = r.sc["error"].(string)
		r.err = fmt.Errorf("%s", mcptest.Text(res))
		return r
	}
	r.acked = true
	return r
}

// count is a counter's n in a result.
func count(r result) int {
	ctx, _ := r.sc["context"].(map[string]any)
	n, _ := ctx["n"].(float64)
	return int(n)
}

// startCounter makes a counter through c, returning its handle.
func startCounter(t *testing.T, c *mcptest.Client) string {
	t.Helper()
	r := call(c, "counter_start", nil)
	h, _ := r.sc["handle"].(string)
	if !r.acked || h == "" {
		t.Fatalf("counter_start: %v %v", r.sc, r.err)
	}
	return h
}

// acks are the counts acknowledged to the clients of a load, by handle.
type acks struct {
	mu   sync.Mutex
	by   map[string][]int
	n    atomic.Int64
	fail map[string]int // by code ("" for a transport error)
	// slowest is the longest a failed call took.
	slowest time.Duration
}

func newAcks() *acks { return &acks{by: map[string][]int{}, fail: map[string]int{}} }

func (a *acks) add(handle string, r result) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.acked {
		a.by[handle] = append(a.by[handle], count(r))
		a.n.Add(1)
		return
	}
	a.fail[r.code]++
	a.slowest = max(a.slowest, r.took)
}

// load has each client increment its counter until stop is closed.
func load(clients []*mcptest.Client, handles []string, a *acks, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				a.add(handles[i], call(c, "counter_inc", map[string]any{"workflow_id": handles[i]}))
			}
		}()
	}
	return &wg
}

// awaitAcks waits until a load acknowledged n calls in all.
func awaitAcks(t *testing.T, a *acks, n int64) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for a.n.Load() < n {
		if time.Now().After(deadline) {
			a.mu.Lock()
			defer a.mu.Unlock()
			t.Fatalf("%d calls acknowledged of %d awaited; failures by code: %v", a.n.Load(), n, a.fail)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lostNone checks that every count acknowledged is in its counter's audit
// trail (count k is version k+1, a counter_inc) and that none was
// acknowledged twice; it returns the counters' stored counts.
func (h *harness) lostNone(a *acks) map[string]int {
	t := h.t
	t.Helper()
	ctx := context.Background()
	out := map[string]int{}
	a.mu.Lock()
	defer a.mu.Unlock()
	for handle, got := range a.by {
		k := store.Key{Machine: "counter", Handle: handle}
		trail, err := h.check.Audit(ctx, k, 0)
		if err != nil {
			t.Fatal(err)
		}
		byVersion := map[uint64]store.AuditEntry{}
		for _, e := range trail {
			byVersion[e.Version] = e
		}
		sorted := slices.Clone(got)
		slices.Sort(sorted)
		if len(slices.Compact(sorted)) != len(got) {
			t.Errorf("counter %s: a count was acknowledged twice: %v", handle, got)
		}
		for _, n := range got {
			if e, ok := byVersion[uint64(n)+1]; !ok || e.Tool != "counter_inc" {
				t.Errorf("counter %s: the acknowledged count %d is not in the trail (version %d: %+v)", handle, n, n+1, e)
			}
		}
		rec, v, err := h.check.Load(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		var snap struct {
			Context struct{ N int } `json:"context"`
		}
		if err := json.Unmarshal(rec.Snapshot, &snap); err != nil {
			t.Fatal(err)
		}
		if snap.Context.N != int(v)-1 || snap.Context.N < len(got) {
			t.Errorf("counter %s: n %d at version %d, %d acknowledged", handle, snap.Context.N, v, len(got))
		}
		out[handle] = snap.Context.N
	}
	return out
}

// TestCluster runs three replicas on one PostgreSQL behind a proxy, and
// shows what replicas promise (docs/replicas.md), step by step.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("the cluster test starts PostgreSQL and four servers")
	}
	c := pg.Cluster(t)
	dir := t.TempDir()
	h := &harness{t: t, bin: build(t, dir), db: c.NewDatabase(t), machines: filepath.Join("testdata", "machines"),
		logs: filepath.Join(dir, "logs"), replicas: map[string]*replica{}}
	if err := os.Mkdir(h.logs, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, r := range h.replicas {
			select {
			case <-r.done:
			default:
				r.cmd.Process.Kill()
				<-r.done
			}
		}
		if t.Failed() {
			entries, _ := os.ReadDir(h.logs)
			for _, e := range entries {
				b, _ := os.ReadFile(filepath.Join(h.logs, e.Name()))
				if len(b) > 4000 {
					b = b[len(b)-4000:]
				}
				t.Logf("log %s:\n%s", e.Name(), b)
			}
		}
	})
	a, b, cc := h.start("a"), h.start("b"), h.start("c")
	var err error
	if h.proxy, err = mcpproxy.New(mcpproxy.Backend{Name: "a", URL: base(a.url)}, mcpproxy.Backend{Name: "b", URL: base(b.url)}, mcpproxy.Backend{Name: "c", URL: base(cc.url)}); err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(h.proxy)
	t.Cleanup(front.Close)
	h.front = front.URL + "/mcp"
	if h.check, err = postgres.Open(context.Background(), h.db, postgres.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.check.Close() })

	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow()
		}
	}
	var first string // the counter of the first step
	step("a handle made on one replica is driven through the others", func(t *testing.T) {
		onA, onB, onC := modern(t, a.url), modern(t, b.url), modern(t, cc.url)
		first = startCounter(t, onA)
		id := map[string]any{"workflow_id": first}
		if r := call(onB, "counter_inc", id); !r.acked || count(r) != 1 {
			t.Fatalf("inc on b: %v %v", r.sc, r.err)
		}
		if r := call(onC, "counter_inc", id); !r.acked || count(r) != 2 {
			t.Fatalf("inc on c: %v %v", r.sc, r.err)
		}
		if r := call(onA, "counter_status", id); !r.acked || count(r) != 2 {
			t.Fatalf("status on a: %v %v", r.sc, r.err)
		}
		through := modern(t, h.front)
		for i := 3; i <= 8; i++ {
			if r := call(through, "counter_inc", id); !r.acked || count(r) != i {
				t.Fatalf("inc %d through the proxy: %v %v", i, r.sc, r.err)
			}
		}
		// The operator's commands read it while the replicas serve.
		out, err := exec.Command(h.bin, "state", "show", "--store", h.db, "counter", first).CombinedOutput()
		if err != nil || !strings.Contains(string(out), `"version": 9`) {
			t.Fatalf("state show: %v\n%s", err, out)
		}
		// A database with no store is said to have none, and none is made.
		out, err = exec.Command(h.bin, "state", "list", "--store", c.NewDatabase(t)).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "no stategate store in this database") {
			t.Fatalf("state list of an empty database: %v\n%s", err, out)
		}
		out, err = exec.Command(h.bin, "graph", filepath.Join(h.machines, "counter.json"), "--format", "dot", "--store", h.db, "--handle", first).CombinedOutput()
		if err != nil || !strings.Contains(string(out), `class="state atomic active"`) || !strings.Contains(string(out), `>8</td>`) {
			t.Fatalf("graph --store: %v\n%s", err, out)
		}
	})

	step("three clients on one instance through three replicas lose no update", func(t *testing.T) {
		const each = 60
		ack := newAcks()
		var wg sync.WaitGroup
		for _, r := range []*replica{a, b, cc} {
			cl := modern(t, r.url)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					ack.add(first, call(cl, "counter_inc", map[string]any{"workflow_id": first}))
				}
			}()
		}
		wg.Wait()
		if ack.n.Load() != 3*each {
			t.Fatalf("%d of %d calls acknowledged; failures by code: %v", ack.n.Load(), 3*each, ack.fail)
		}
		if n := h.lostNone(ack)[first]; n != 8+3*each {
			t.Fatalf("count %d, want %d", n, 8+3*each)
		}
	})

	step("a replica killed mid-load loses no acknowledged transition", func(t *testing.T) {
		var clients []*mcptest.Client
		var handles []string
		for range 6 {
			cl := modern(t, h.front)
			clients = append(clients, cl)
			handles = append(handles, startCounter(t, cl))
		}
		ack := newAcks()
		stop := make(chan struct{})
		wg := load(clients, handles, ack, stop)
		awaitAcks(t, ack, 150)
		h.kill(b)
		before := ack.n.Load()
		awaitAcks(t, ack, before+150) // the others serve on
		close(stop)
		wg.Wait()
		t.Logf("acknowledged %d, failed %v (the calls under way on b)", ack.n.Load(), ack.fail)
		h.lostNone(ack)
		b = h.start("b")
		if err := h.proxy.SetBackend(1, base(b.url)); err != nil {
			t.Fatal(err)
		}
	})

	step("a PostgreSQL restart mid-load fails calls fast, then they recover, losing nothing acknowledged", func(t *testing.T) {
		var clients []*mcptest.Client
		var handles []string
		for range 3 {
			cl := modern(t, h.front)
			clients = append(clients, cl)
			handles = append(handles, startCounter(t, cl))
		}
		ack := newAcks()
		stop := make(chan struct{})
		wg := load(clients, handles, ack, stop)
		awaitAcks(t, ack, 60)
		if err := c.Kill(); err != nil { // as a crash: it recovers from its log
			t.Fatal(err)
		}
		downAt := time.Now()
		// Calls are answered while it is down: UNAVAILABLE, nothing moved.
		deadline := time.Now().Add(wait)
		for {
			ack.mu.Lock()
			n := ack.fail["UNAVAILABLE"]
			ack.mu.Unlock()
			if n >= 10 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no UNAVAILABLE answers while the database is down: %v", ack.fail)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Logf("down %v", time.Since(downAt).Round(time.Millisecond))
		before := ack.n.Load()
		awaitAcks(t, ack, before+60)
		close(stop)
		wg.Wait()
		t.Logf("acknowledged %d, failed %v, the slowest failure in %v", ack.n.Load(), ack.fail, ack.slowest.Round(time.Millisecond))
		h.lostNone(ack)
	})

	step("timers armed on a replica that is killed fire once on the others", func(t *testing.T) {
		onA := modern(t, a.url)
		var tickers []string
		for range 20 {
			r := call(onA, "ticker_start", nil)
			hd, _ := r.sc["handle"].(string)
			if !r.acked || hd == "" {
				t.Fatalf("ticker_start: %v %v", r.sc, r.err)
			}
			tickers = append(tickers, hd)
		}
		h.kill(a)
		ctx := context.Background()
		deadline := time.Now().Add(2 * wait)
		for _, hd := range tickers {
			k := store.Key{Machine: "ticker", Handle: hd}
			for {
				rec, _, err := h.check.Load(ctx, k)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(rec.Snapshot), `"value":"fired"`) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("ticker %s did not fire: %s", hd, rec.Snapshot)
				}
				time.Sleep(20 * time.Millisecond)
			}
			trail, err := h.check.Audit(ctx, k, 0)
			if err != nil {
				t.Fatal(err)
			}
			fired := 0
			for _, e := range trail {
				if e.Tool == "(timer)" {
					fired++
				}
			}
			if fired != 1 || len(trail) != 2 {
				t.Fatalf("ticker %s: %d timer entries in a trail of %d, want 1 of 2", hd, fired, len(trail))
			}
		}
		var firedBy []string
		if err := h.savedBy(ctx, tickers, &firedBy); err != nil {
			t.Fatal(err)
		}
		if a.run == "" || slices.Contains(firedBy, a.run) {
			t.Fatalf("fired by %v, and a (run %q) was killed before any was due", firedBy, a.run)
		}
		t.Logf("fired by the runs %v", slices.Compact(slices.Sorted(slices.Values(firedBy))))
		a = h.start("a")
		if err := h.proxy.SetBackend(0, base(a.url)); err != nil {
			t.Fatal(err)
		}
	})

	step("a session on one replica is told when another moves what it sees", func(t *testing.T) {
		sess := mcptest.HTTP(t, h.front, mcptest.Options{Listen: true, Name: "session"})
		route := gate.RouteOf(sess.GetSessionId())
		other := map[string]*replica{"a": b, "b": cc, "c": a}[route]
		if other == nil {
			t.Fatalf("the session id %q names no replica", sess.GetSessionId())
		}
		mover := modern(t, other.url)
		r := call(mover, "order_start", nil)
		order, _ := r.sc["handle"].(string)
		if !r.acked || order == "" {
			t.Fatalf("order_start on %s: %v %v", other.name, r.sc, r.err)
		}
		if _, sc, isErr := sess.Call("order_add", map[string]any{"order_id": order}); isErr {
			t.Fatalf("order_add in the session on %s: %v", route, sc)
		}
		sess.Settle()
		if r := call(mover, "order_close", map[string]any{"order_id": order}); !r.acked {
			t.Fatalf("order_close on %s: %v %v", other.name, r.sc, r.err)
		}
		sess.AwaitChanged()
		sess.AwaitTools("order_reopen listed once the other replica closed the order", func(tools map[string]mcp.Tool) bool {
			_, reopen := tools["order_reopen"]
			_, add := tools["order_add"]
			return reopen && !add
		})
	})

	step("a fresh replica after all were stopped serves every instance in its state", func(t *testing.T) {
		for _, r := range []*replica{a, b, cc} {
			h.stop(r)
		}
		d := h.start("d")
		onD := modern(t, d.url)
		ctx := context.Background()
		keys, err := h.check.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		served := 0
		for _, k := range keys {
			if k.IsMeta() {
				continue
			}
			rec, v, err := h.check.Load(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			var stored struct {
				Value   any `json:"value"`
				Context any `json:"context"`
			}
			if err := json.Unmarshal(rec.Snapshot, &stored); err != nil {
				t.Fatal(err)
			}
			key := "workflow_id"
			if k.Machine == "order" {
				key = "order_id"
			}
			r := call(onD, k.Machine+"_status", map[string]any{key: k.Handle})
			if !r.acked || fmt.Sprint(r.sc["state"]) != fmt.Sprint(stored.Value) || fmt.Sprint(r.sc["context"]) != fmt.Sprint(stored.Context) {
				t.Errorf("%s %s (version %d): d answers %v %v; stored %v %v", k.Machine, k.Handle, v, r.sc["state"], r.sc["context"], stored.Value, stored.Context)
			}
			served++
		}
		if served < 30 {
			t.Fatalf("%d instances checked", served)
		}
		t.Logf("%d instances, each as stored", served)
	})
}

// savedBy reads the runs that saved instances last.
func (h *harness) savedBy(ctx context.Context, tickers []string, out *[]string) error {
	conn, err := pgxConnect(ctx, h.db)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, hd := range tickers {
		var run string
		if err := conn.QueryRow(ctx, `SELECT saved_by FROM stategate.instances WHERE machine = $1 AND handle = $2`, []byte("ticker"), []byte(hd)).Scan(&run); err != nil {
			return err
		}
		*out = append(*out, run)
	}
	return nil
}

// base is a replica's base URL (its /mcp URL without the path).
func base(mcpURL string) string { return strings.TrimSuffix(mcpURL, "/mcp") }

func pgxConnect(ctx context.Context, url string) (*pgx.Conn, error) { return pgx.Connect(ctx, url) }
