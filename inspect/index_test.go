package inspect

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
)

// countingStore counts the records read and the listings of all keys.
type countingStore struct {
	store.Store
	loads, lists atomic.Int64
}

func (c *countingStore) Load(ctx context.Context, k store.Key) (store.Record, uint64, error) {
	c.loads.Add(1)
	return c.Store.Load(ctx, k)
}

func (c *countingStore) List(ctx context.Context) ([]store.Key, error) {
	c.lists.Add(1)
	return c.Store.List(ctx)
}

// TestIndexReadsWhatItShows: the index and a workflow's page read the
// records of the instances they show (the newest maxInstances), not
// every record stored, and count them all from the store's index.
func TestIndexReadsWhatItShows(t *testing.T) {
	st := &countingStore{Store: store.NewMemory()}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	x := workflow.NewInstances(workflow.InstancesOptions{Store: st, Logger: log})
	m, _, err := xstate.ParseJSON("light.json", []byte(`{"id":"light","initial":"green","states":{"green":{"on":{"TIMER":"red"}},"red":{"on":{"TIMER":"green"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	wf, err := workflow.New(m, workflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.SetWorkflows(wf); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := x.Send(ctx, "light", "first", interp.Event{Type: "TIMER"}); err != nil {
		t.Fatal(err)
	}
	rec, _, err := st.Load(ctx, store.Key{Machine: "light", Handle: "first"})
	if err != nil {
		t.Fatal(err)
	}
	const stored = 3 * maxInstances
	for i := 1; i < stored; i++ {
		if _, err := st.Save(ctx, store.Key{Machine: "light", Handle: fmt.Sprint("h", i)}, rec, 0); err != nil {
			t.Fatal(err)
		}
	}
	// The stored instances are read once, at start (serve's timers and
	// waiting calls), not by a page.
	if _, err := x.Approvals(ctx); err != nil {
		t.Fatal(err)
	}
	st.lists.Store(0)
	h := New(Options{Instances: x, Logger: log})
	defer h.Close()
	for _, page := range []string{Prefix, Prefix + "/light"} {
		st.loads.Store(0)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, page+"?fragment=1", nil))
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", page, w.Code, w.Body)
		}
		// A row's record, and its instance (restored from the store).
		if n := st.loads.Load(); n > 2*maxInstances {
			t.Errorf("%s read %d records for %d rows of %d instances", page, n, maxInstances, stored)
		}
		if n := st.lists.Load(); n != 0 {
			t.Errorf("%s listed every key %d times", page, n)
		}
		if !strings.Contains(w.Body.String(), fmt.Sprint(stored)) || !strings.Contains(w.Body.String(), "h1499") {
			t.Errorf("%s does not show the count, or the newest instance first", page)
		}
	}
}
