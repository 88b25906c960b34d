package postgres

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stategate/stategate/store"
)

// BenchmarkSaves measures durable saves of the project's own kind (an
// invoice-like snapshot and its audit entry) by 1 and by 64 concurrent
// savers, each on an instance of its own, as store/badger's
// BenchmarkSaves does (the same file but for the store it opens), on the
// tests' throwaway cluster (fsync on, a unix socket). ns/op is per save.
func BenchmarkSaves(b *testing.B) {
	rec := store.Record{
		Snapshot:       []byte(`{"status":"active","value":"review","context":{"customer":"ACME","lines":[{"sku":"A-1","qty":2,"price":1250},{"sku":"B-7","qty":1,"price":990}],"total":3490,"currency":"EUR"},"historyValue":{},"children":{}}`),
		MachineVersion: "84ba43f72e65c37e",
		Audit:          &store.AuditEntry{Machine: "invoice", Tool: "invoice_submit", Event: map[string]any{"type": "SUBMIT", "note": "ok"}, From: "draft", To: "review"},
	}
	for _, savers := range []int{1, 64} {
		b.Run(fmt.Sprint("savers=", savers), func(b *testing.B) {
			st := openTest(b, newSchema(b), Options{})
			defer st.Close()
			ctx := b.Context()
			var next sync.Mutex
			work := b.N
			b.ResetTimer()
			var wg sync.WaitGroup
			for i := range savers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					k := store.Key{Machine: "invoice", Handle: fmt.Sprint("h", i)}
					var v uint64
					for {
						next.Lock()
						if work == 0 {
							next.Unlock()
							return
						}
						work--
						next.Unlock()
						var err error
						if v, err = st.Save(ctx, k, rec, v); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			saves, commits := st.Stats()
			b.ReportMetric(float64(saves)/float64(max(commits, 1)), "saves/commit")
		})
	}
}
