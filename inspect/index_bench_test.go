package inspect_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stategate/stategate/inspect"
	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/store/badger"
	"github.com/stategate/stategate/workflow"
	"github.com/stategate/stategate/xstate"
)

// BenchmarkIndexPages serves the inspector's index and a workflow's page
// over a Badger store of 20,000 instances (of two workflows): ns/op is
// per page. It uses only the API that came before the store's index, so
// that it runs against the earlier inspector for a side-by-side
// comparison.
func BenchmarkIndexPages(b *testing.B) {
	const instances = 20000
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := badger.Open(b.TempDir(), badger.Options{NoSync: true, GCInterval: -1, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	x := workflow.NewInstances(workflow.InstancesOptions{Store: st, Logger: log})
	var wfs []*workflow.Workflow
	for _, id := range []string{"light", "door"} {
		m, _, err := xstate.ParseJSON(id+".json", []byte(`{"id":"`+id+`","initial":"a","states":{"a":{"on":{"GO":"b"}},"b":{"on":{"GO":"a"}}}}`))
		if err != nil {
			b.Fatal(err)
		}
		wf, err := workflow.New(m, workflow.Options{})
		if err != nil {
			b.Fatal(err)
		}
		wfs = append(wfs, wf)
	}
	if err := x.SetWorkflows(wfs...); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	recs := map[string]store.Record{}
	for _, wf := range wfs {
		if _, err := x.Send(ctx, wf.ID, "first", interp.Event{Type: "GO"}); err != nil {
			b.Fatal(err)
		}
		rec, _, err := st.Load(ctx, store.Key{Machine: wf.ID, Handle: "first"})
		if err != nil {
			b.Fatal(err)
		}
		recs[wf.ID] = rec
	}
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < instances; i += 32 {
				wf := wfs[i%len(wfs)]
				if _, err := st.Save(ctx, store.Key{Machine: wf.ID, Handle: fmt.Sprint("h", i)}, recs[wf.ID], 0); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	h := inspect.New(inspect.Options{Instances: x, Logger: log})
	defer h.Close()
	for _, page := range []string{inspect.Prefix, inspect.Prefix + "/light"} {
		b.Run(page, func(b *testing.B) {
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, page+"?fragment=1", nil))
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", page, w.Code, w.Body)
				}
			}
		})
	}
}
