package store_test

import (
	"context"
	"fmt"

	"github.com/stategate/stategate/store"
)

// An operator's reset is a record like any other: the instance starts
// afresh when next used, its version counts on, and its trail keeps what
// happened before the reset and the reset itself.
func ExampleReset() {
	ctx := context.Background()
	s := store.NewMemory()
	k := store.Key{Machine: "invoice", Handle: "42"}
	v, _ := s.Save(ctx, k, store.Record{Snapshot: []byte(`{"value":"paid"}`), Audit: &store.AuditEntry{Tool: "invoice_pay", To: "paid"}}, 0)

	v, _ = store.Reset(ctx, s, k, v, "paid", nil, "reset by an operator")
	rec, version, _ := s.Load(ctx, k)
	fmt.Println("reset:", rec.IsReset(), "version:", version)

	// The next save goes on from the reset's version.
	v, _ = s.Save(ctx, k, store.Record{Snapshot: []byte(`{"value":"draft"}`), Audit: &store.AuditEntry{Tool: "invoice_add_line"}}, v)
	trail, _ := s.Audit(ctx, k, 0)
	for _, e := range trail {
		fmt.Printf("v%d %s %q\n", e.Version, e.Tool, e.Note)
	}
	// Output:
	// reset: true version: 2
	// v1 invoice_pay ""
	// v2 (reset) "reset by an operator"
	// v3 invoice_add_line ""
}
