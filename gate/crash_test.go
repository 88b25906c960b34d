package gate_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/store/badger"
)

var crashFull = flag.Bool("crash.full", false, "run the whole crash-and-damage suite: 40 kills under load, damaged stores, a full disk (root)")

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// server is the binary serving over HTTP.
type server struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	exited chan struct{}
}

// startServer runs the binary over HTTP and waits until it answers; it
// returns an error with what the server said if it exits first.
func startServer(t *testing.T, bin, machines, data, addr string, extra ...string) (*server, error) {
	t.Helper()
	// Flushes and compactions every few hundred calls (--small-tables):
	// the kill may land in one.
	args := append([]string{"serve", "--machines", machines, "--data", data, "--http", addr, "--small-tables"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	s := &server{cmd: cmd, stderr: &bytes.Buffer{}, exited: make(chan struct{})}
	cmd.Stderr = &syncWriter{w: s.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	// The server binds its port before it opens the store (a busy port
	// must not leave a store behind): it serves once it answers HTTP,
	// and a store it refuses makes it exit instead.
	probe := &http.Client{Timeout: 200 * time.Millisecond}
	for {
		if res, err := probe.Get("http://" + addr + "/mcp"); err == nil {
			res.Body.Close()
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("the server exited: %s", s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			s.kill()
			t.Fatal("the server did not start")
		}
		time.Sleep(20 * time.Millisecond) // waiting for a port: no signal to await
	}
}

// kill stops the server with SIGKILL and waits for it.
func (s *server) kill() {
	s.cmd.Process.Kill()
	<-s.exited
}

// stop stops the server with SIGTERM (it closes the store) and waits.
func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	<-s.exited
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// crashFigures are what the suite counts.
type crashFigures struct {
	runs, kills, acked, lost, corrupt, refused, refusedSpace int
}

// crashMachines are the machines the suite serves: order (each ADD adds
// an item) and blob (each PUT stores its text, for a disk to fill).
func crashMachines(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"order.json":     testMachines["order.json"],
		"order.impl.mjs": testMachines["order.impl.mjs"],
		"blob.json":      `{"id":"blob","meta":{"handleKey":"blob_id"},"initial":"empty","context":{"text":""},"states":{"empty":{"on":{"PUT":{"target":"full","actions":"keep"}}},"full":{"on":{"PUT":{"actions":"keep"}}}}}`,
		"blob.impl.mjs":  `import { assign } from 'xstate'; export default { actions: { keep: assign({ text: ({ event }) => event.text }) } };`,
	}
	for f, src := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// callTool calls a tool with a deadline; ok is a success result.
func callTool(c *mcptest.Client, name string, args map[string]any) (text string, ok bool, err error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return "", false, err
	}
	if len(res.Content) > 0 {
		if tc, isText := res.Content[0].(mcp.TextContent); isText {
			text = tc.Text
		}
	}
	return text, !res.IsError, nil
}

// checkOrders opens the store read-only (as `state show` does: a killed
// server's store is read from a scratch copy, and nothing on disk
// changes) and compares each order with the calls acknowledged: it holds
// at least as many items (the call a kill interrupted may have been
// stored unacknowledged: one more), and its audit trail ends at its
// version, with no gap. It returns the orders' items.
func checkOrders(t *testing.T, data string, acked map[string]int, f *crashFigures) map[string]int {
	t.Helper()
	st, err := badger.Open(data, badger.Options{ReadOnly: true, GCInterval: -1, Logger: quietLog()})
	if err != nil {
		t.Fatalf("read-only open after a kill: %v", err)
	}
	defer st.Close()
	items := map[string]int{}
	for h, n := range acked {
		k := store.Key{Machine: "order", Handle: h}
		rec, version, err := st.Load(context.Background(), k)
		if errors.Is(err, store.ErrNotFound) {
			f.lost += n
			continue
		}
		var snap struct {
			Context struct{ Items int } `json:"context"`
		}
		trail, terr := st.Audit(context.Background(), k, 0)
		if err != nil || terr != nil || jsonUnmarshal(rec.Snapshot, &snap) != nil || len(trail) == 0 || trail[len(trail)-1].Version != version {
			t.Errorf("order %s is corrupt: %v %v, %d entries", h, err, terr, len(trail))
			f.corrupt++
			continue
		}
		for i := 1; i < len(trail); i++ {
			if trail[i].Version != trail[i-1].Version+1 {
				t.Errorf("order %s: its audit trail jumps from v%d to v%d", h, trail[i-1].Version, trail[i].Version)
				f.corrupt++
				break
			}
		}
		switch got := snap.Context.Items; {
		case got < n:
			t.Errorf("order %s: %d calls acknowledged, %d items stored", h, n, got)
			f.lost += n - got
		case got > n+1:
			t.Errorf("order %s: %d calls acknowledged, %d items stored (more than one unacknowledged)", h, n, got)
			f.corrupt++
		}
		items[h] = snap.Context.Items
	}
	return items
}

// TestCrashLosesNoAcknowledgedCall kills the server (the binary, over
// HTTP) with SIGKILL at random moments while clients call it, restarts
// it, and checks after each kill that every acknowledged call is in the
// stored state and the audit trail; the store is small-tabled, so that
// kills land in flushes and compactions. With -crash.full it kills 40
// times, then damages copies of the store (cuts, garbled bytes, a
// deleted MANIFEST) and starts the server on each: it refuses to start
// (the store is damaged) or serves every acknowledged call; then, as
// root, it fills a tmpfs under a server until the reserve refuses calls,
// kills it, and restarts it once space is freed. It logs the figures:
// runs, acknowledged calls, lost, corrupt, refused to open.
func TestCrashLosesNoAcknowledgedCall(t *testing.T) {
	bin := buildBinary(t)
	kills, clients := 3, 8
	if *crashFull {
		kills = 40
	}
	seed := uint64(time.Now().UnixNano())
	rnd := rand.New(rand.NewPCG(seed, 15))
	t.Logf("seed %d", seed)
	machines := crashMachines(t)
	data := t.TempDir()
	var f crashFigures
	acked := map[string]int{}
	for i := range clients {
		acked[fmt.Sprint("c", i)] = 0
	}
	for run := range kills {
		addr := freePort(t)
		srv, err := startServer(t, bin, machines, data, addr)
		if err != nil {
			f.refused++
			t.Fatalf("run %d: %v", run, err)
		}
		f.runs++
		url := "http://" + addr + "/mcp"
		cs := make([]*mcptest.Client, clients)
		for i := range cs {
			cs[i] = connect(t, url)
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i, c := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h := fmt.Sprint("c", i)
				for {
					_, ok, err := callTool(c, "order_add", map[string]any{"order_id": h})
					if err != nil {
						return // the server is gone
					}
					if !ok {
						t.Errorf("order_add %s failed", h)
						return
					}
					mu.Lock()
					acked[h]++
					f.acked++
					mu.Unlock()
				}
			}()
		}
		// A random moment: 30 to 600 ms into the load.
		time.Sleep(time.Duration(30+rnd.IntN(570)) * time.Millisecond)
		srv.kill()
		f.kills++
		wg.Wait()
		items := checkOrders(t, data, acked, &f)
		// What was stored unacknowledged counts from now on.
		for h, n := range items {
			acked[h] = n
		}
		if t.Failed() {
			break
		}
	}
	t.Logf("kills: %d runs, %d kills, %d calls acknowledged, %d lost, %d corrupt, %d refused to open", f.runs, f.kills, f.acked, f.lost, f.corrupt, f.refused)
	if f.lost > 0 || f.corrupt > 0 {
		t.Fatalf("%d acknowledged calls lost, %d orders corrupt", f.lost, f.corrupt)
	}
	if !*crashFull {
		return
	}
	t.Run("damage", func(t *testing.T) { crashDamage(t, bin, machines, data, acked) })
	t.Run("fulldisk", func(t *testing.T) { crashFullDisk(t, bin, machines) })
}

// crashDamage damages copies of a killed server's store and starts the
// server on each: it refuses to start, saying the store is damaged, or it
// serves every acknowledged call (checked after a clean stop).
func crashDamage(t *testing.T, bin, machines, data string, acked map[string]int) {
	var f crashFigures
	kinds := []string{"MANIFEST deleted", "MANIFEST cut", "MANIFEST garbled", "table cut", "table garbled", "memtable log cut", "memtable log garbled", "value log garbled"}
	for i := range 12 {
		kinds = append(kinds, fmt.Sprint("random ", i))
	}
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 16))
	for _, kind := range kinds {
		dir := t.TempDir()
		copyFolder(t, data, dir)
		what := damage(t, dir, kind, rnd)
		before := hashFolder(t, dir)
		addr := freePort(t)
		srv, err := startServer(t, bin, machines, dir, addr)
		f.runs++
		if err != nil {
			if !strings.Contains(err.Error(), "damaged") {
				t.Errorf("%s: the server did not start, and not because the store is damaged: %v", what, err)
			}
			if after := hashFolder(t, dir); after != before {
				t.Errorf("%s: the refused store was changed", what)
			}
			f.refused++
			t.Logf("%s: refused: %s", what, firstLineOf(err.Error()))
			continue
		}
		srv.stop()
		lost := f.lost
		checkOrders(t, dir, acked, &f)
		t.Logf("%s: served; %d acknowledged calls lost", what, f.lost-lost)
	}
	t.Logf("damage: %d runs, %d refused to open, %d lost, %d corrupt", f.runs, f.refused, f.lost, f.corrupt)
	if f.lost > 0 || f.corrupt > 0 {
		t.Fatalf("a damaged store served with %d acknowledged calls lost, %d orders corrupt", f.lost, f.corrupt)
	}
}

func firstLineOf(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "damaged") || strings.Contains(l, "space") {
			return strings.TrimSpace(l)
		}
	}
	return strings.TrimSpace(s)
}

// damage applies a kind of damage to a store's folder and says what it
// did.
func damage(t *testing.T, dir, kind string, rnd *rand.Rand) string {
	t.Helper()
	pick := func(ext string) string {
		m, _ := filepath.Glob(filepath.Join(dir, "*"+ext))
		if len(m) == 0 {
			return ""
		}
		return m[rnd.IntN(len(m))]
	}
	target, op := "", ""
	switch kind {
	case "MANIFEST deleted":
		target, op = filepath.Join(dir, "MANIFEST"), "delete"
	case "MANIFEST cut":
		target, op = filepath.Join(dir, "MANIFEST"), "cut"
	case "MANIFEST garbled":
		target, op = filepath.Join(dir, "MANIFEST"), "garble"
	case "table cut":
		target, op = pick(".sst"), "cut"
	case "table garbled":
		target, op = pick(".sst"), "garble"
	case "memtable log cut":
		target, op = pick(".mem"), "cut"
	case "memtable log garbled":
		target, op = pick(".mem"), "garble"
	case "value log garbled":
		target, op = pick(".vlog"), "garble"
	default:
		var all []string
		for _, ext := range []string{".sst", ".mem", ".vlog", "MANIFEST"} {
			m, _ := filepath.Glob(filepath.Join(dir, "*"+ext))
			all = append(all, m...)
		}
		target, op = all[rnd.IntN(len(all))], []string{"cut", "garble"}[rnd.IntN(2)]
	}
	if target == "" {
		return kind + ": no such file"
	}
	data, err := os.ReadFile(target)
	if err != nil {
		t.Fatal(err)
	}
	// Within the written part of a log: its end is zeros.
	n := len(bytes.TrimRight(data, "\x00"))
	if strings.HasSuffix(target, ".mem") {
		n = n * 9 / 10 // not the last writes, which a crash may tear
	}
	at := 0
	if n > 0 {
		at = rnd.IntN(n)
	}
	switch op {
	case "delete":
		os.Remove(target)
	case "cut":
		os.Truncate(target, int64(at))
	case "garble":
		for i := at; i < min(len(data), at+16); i++ {
			data[i] ^= 0x5a
		}
		os.WriteFile(target, data, 0o644)
	}
	return fmt.Sprintf("%s (%s %s at %d of %d)", kind, op, filepath.Base(target), at, len(data))
}

func copyFolder(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// hashFolder sums a folder's files and names.
func hashFolder(t *testing.T, dir string) string {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	var b strings.Builder
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		fmt.Fprintf(&b, "%s:%x;", e.Name(), data)
	}
	return b.String()
}
