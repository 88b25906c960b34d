package store_test

import (
	"context"
	"testing"

	"github.com/stategate/stategate/store"
)

// BenchmarkMemorySave times a save to the memory store of the project's
// own kind (an invoice-like snapshot, a timer and an audit entry), the
// limits checked as every engine checks them. It uses nothing but the
// Store API, so that the same file runs against an earlier store.
func BenchmarkMemorySave(b *testing.B) {
	rec := store.Record{
		Snapshot:       []byte(`{"status":"active","value":"review","context":{"customer":"ACME","lines":[{"sku":"A-1","qty":2,"price":1250},{"sku":"B-7","qty":1,"price":990}],"total":3490,"currency":"EUR"},"historyValue":{},"children":{}}`),
		MachineVersion: "84ba43f72e65c37e",
		Timers:         []store.Timer{{ID: "remind", Event: map[string]any{"type": "xstate.after.86400000.invoice.review"}}},
		Audit:          &store.AuditEntry{Machine: "invoice", Tool: "invoice_submit", Event: map[string]any{"type": "SUBMIT", "note": "ok"}, From: "draft", To: "review"},
	}
	s := store.NewMemory()
	ctx := context.Background()
	k := store.Key{Machine: "invoice", Handle: "42"}
	var v uint64
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if v, err = s.Save(ctx, k, rec, v); err != nil {
			b.Fatal(err)
		}
	}
}
