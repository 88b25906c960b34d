package store_test

import (
	"testing"

	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/store/storetest"
)

// TestMemoryShared runs the shared stores' contract on two replicas of a
// Memory, its Resync for a cut feed.
func TestMemoryShared(t *testing.T) {
	storetest.RunShared(t, storetest.SharedEngine{
		Open: func(t *testing.T) (a, b store.Shared) {
			m := store.NewMemory()
			return m.Replica("run-a"), m.Replica("run-b")
		},
		CutFeed: func(t *testing.T, a, b store.Shared) { a.(*store.MemoryReplica).Resync() },
	})
}
