package badger

import (
	"context"
	"strconv"
	"testing"

	"github.com/stategate/stategate/store"
)

// BenchmarkAuditUnderLoad times what the status tool reads (an instance's
// last 5 audit entries) from a store that holds 6,000 saves of 64
// instances.
func BenchmarkAuditUnderLoad(b *testing.B) {
	st, err := Open(b.TempDir(), Options{GCInterval: -1, NoSync: true, Logger: quietLog()})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	versions := make([]uint64, 64)
	for i := range 6000 {
		k := store.Key{Machine: "invoice", Handle: strconv.Itoa(i % 64)}
		rec := store.Record{Snapshot: []byte(`{"status":"active","value":"draft","context":{}}`), Audit: &store.AuditEntry{Tool: "t", Event: map[string]any{"type": "SUBMIT"}, From: "draft", To: "review"}}
		if versions[i%64], err = st.Save(ctx, k, rec, versions[i%64]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if trail, err := st.Audit(ctx, store.Key{Machine: "invoice", Handle: "7"}, 5); err != nil || len(trail) != 5 {
			b.Fatal(len(trail), err)
		}
	}
}
