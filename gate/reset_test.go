package gate_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/stategate/stategate/gate"
	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
	"github.com/stategate/stategate/xstate/js"
)

// TestResetStartsAfresh resets a stored instance as `state reset` does (a
// record with no snapshot, an audit entry) and serves it again: it starts
// in the machine's initial state, its next transition is stored at the
// version after the reset's, and its trail holds the transitions before
// the reset, the reset, and the one after.
func TestResetStartsAfresh(t *testing.T) {
	for _, kind := range []string{"memory", "badger"} {
		t.Run(kind, func(t *testing.T) {
			dir := filepath.Dir(writeMachine(t, "door.json", door))
			var st store.Store = store.NewMemory()
			if kind == "badger" {
				st = openBadger(t, t.TempDir())
				defer st.Close()
			}
			serve := func() *mcptest.Client {
				g := gate.New(gate.Options{Store: st, Logger: quietLog(), SharedInstance: "d1"})
				if err := workflow.NewLibrary(workflow.LibraryOptions{Dir: dir, Loader: &xstate.Loader{Modules: &js.Host{}}, Logger: quietLog(), Serve: g.Reloaded}).Reload(context.Background()); err != nil {
					t.Fatal(err)
				}
				srv := httptest.NewServer(g.HTTPHandler(gate.HTTPOptions{}))
				t.Cleanup(srv.Close)
				return connect(t, srv.URL+"/mcp")
			}
			c := serve()
			c.Call("door_open", nil)
			c.Call("door_close", nil)
			if _, sc, isErr := c.Call("door_open", nil); isErr || sc["state"] != "open" {
				t.Fatalf("open: %v %v", isErr, sc)
			}
			c.Close()

			ctx := context.Background()
			k := store.Key{Machine: "door", Handle: "d1"}
			_, v, err := st.Load(ctx, k)
			if err != nil || v != 3 {
				t.Fatalf("stored at %d, %v; want 3", v, err)
			}
			if nv, err := store.Reset(ctx, st, k, v, "open", nil, "reset by a test"); err != nil || nv != 4 {
				t.Fatalf("reset: %d %v", nv, err)
			}
			rec, v, err := st.Load(ctx, k)
			if err != nil || !rec.IsReset() || v != 4 {
				t.Fatalf("after the reset: %q at %d, %v", rec.Snapshot, v, err)
			}

			c = serve() // a new server: nothing cached
			if _, sc, _ := c.Call("door_status", nil); sc["state"] != "closed" {
				t.Fatalf("status after the reset: %v", sc)
			}
			if _, sc, isErr := c.Call("door_open", nil); isErr || sc["state"] != "open" {
				t.Fatalf("open after the reset: %v %v", isErr, sc)
			}
			if _, v, _ := st.Load(ctx, k); v != 5 {
				t.Fatalf("stored at %d after the reset and a call; want 5", v)
			}
			trail, err := st.Audit(ctx, k, 0)
			if err != nil || len(trail) != 5 {
				t.Fatalf("trail: %+v %v", trail, err)
			}
			r := trail[3]
			if r.Tool != store.ResetTool || r.Version != 4 || r.From != "open" || r.Note != "reset by a test" {
				t.Fatalf("reset entry: %+v", r)
			}
			if e := trail[4]; e.Tool != "door_open" || e.Version != 5 || e.From != "closed" || e.To != "open" {
				t.Fatalf("entry after the reset: %+v", e)
			}
		})
	}
}
