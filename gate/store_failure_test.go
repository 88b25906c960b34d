package gate_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stategate/stategate/internal/mcptest"
	"github.com/stategate/stategate/store"
)

// flakyStore is a store whose next save can be made to fail, or be
// preceded by another writer's.
type flakyStore struct {
	store.Store
	mu     sync.Mutex
	fail   error                      // the next save fails with it
	before func(store.Key, uint64)    // runs before the next save
	last   map[store.Key]store.Record // the records saved, by instance
}

func (f *flakyStore) Save(ctx context.Context, k store.Key, rec store.Record, version uint64) (uint64, error) {
	f.mu.Lock()
	fail, before := f.fail, f.before
	f.fail, f.before = nil, nil
	f.mu.Unlock()
	if before != nil {
		before(k, version)
	}
	if fail != nil {
		return 0, fail
	}
	v, err := f.Store.Save(ctx, k, rec, version)
	if err == nil {
		f.mu.Lock()
		f.last[k] = rec
		f.mu.Unlock()
	}
	return v, err
}

const door = `{"id":"door","initial":"closed","states":{
  "closed":{"on":{"OPEN":"open"}},
  "open":{"on":{"CLOSE":"closed"}}}}`

func serveFlaky(t *testing.T) (*mcptest.Client, *flakyStore) {
	t.Helper()
	dir := filepath.Dir(writeMachine(t, "door.json", door))
	st := &flakyStore{Store: store.NewMemory(), last: map[store.Key]store.Record{}}
	return connect(t, serveStore(t, dir, st)), st
}

// TestFailedSaveKeepsTheState makes a call's save fail: the call is an
// error, the instance keeps its state, and the next call works.
func TestFailedSaveKeepsTheState(t *testing.T) {
	c, st := serveFlaky(t)
	st.fail = errors.New("disk gone")
	text, _, isErr := c.Call("door_open", nil)
	if !isErr || !strings.Contains(text, "cannot be stored") || !strings.Contains(text, "disk gone") {
		t.Fatalf("open with a failing store: %v %q", isErr, text)
	}
	if _, sc, _ := c.Call("door_status", nil); sc["state"] != "closed" {
		t.Fatalf("after the failed save: %v", sc)
	}
	if _, ok := c.Tools()["door_open"]; !ok {
		t.Fatalf("door_open not listed after the failed save: %v", mcptest.Names(c.Tools()))
	}
	if _, sc, isErr := c.Call("door_open", nil); isErr || sc["state"] != "open" {
		t.Fatalf("open again: %v %v", isErr, sc)
	}
}

// TestStoreFailuresSayWhatToDo: each way the store refuses a save is an
// answer that says what happened and what the agent may do; only an
// unknown outcome does not promise that the instance kept its state.
func TestStoreFailuresSayWhatToDo(t *testing.T) {
	c, st := serveFlaky(t)
	for _, tc := range []struct {
		err        error
		code, want string
	}{
		{fmt.Errorf("%w: sync: input/output error", store.ErrOutcomeUnknown), "OUTCOME_UNKNOWN", "whether it was done is unknown"},
		{store.ErrDiskFailed, "ERROR", "takes no more changes until the server is restarted"},
		{fmt.Errorf("%w: 130 MiB free of 128 MiB kept", store.ErrNoSpace), "NO_SPACE", "Try again once space is freed"},
		{fmt.Errorf("%w: the record takes 5000000 bytes", store.ErrTooLarge), "TOO_LARGE", "too large to store"},
	} {
		st.mu.Lock()
		st.fail = tc.err
		st.mu.Unlock()
		text, sc, isErr := c.Call("door_open", nil)
		if !isErr || sc["error"] != tc.code || !strings.Contains(text, tc.want) {
			t.Errorf("%v: %v %q", tc.err, sc, text)
		}
		if tc.code != "OUTCOME_UNKNOWN" && !strings.Contains(text, "keeps its state closed") {
			t.Errorf("%v: the answer does not say the instance kept its state: %q", tc.err, text)
		}
	}
}

// TestConflictingWriteIsNotOverwritten has another writer store the
// instance between a call's load and its save: the call is decided again
// on what the other writer stored, rather than overwriting it.
func TestConflictingWriteIsNotOverwritten(t *testing.T) {
	c, st := serveFlaky(t)
	c.Call("door_open", nil)
	c.Call("door_close", nil)
	var closed store.Record
	for _, rec := range st.last {
		closed = rec // the instance's record as the door was closed
	}
	c.Call("door_open", nil) // version 3
	st.before = func(k store.Key, v uint64) {
		// The other writer closes the door.
		if _, err := st.Store.Save(context.Background(), k, closed, v); err != nil {
			t.Errorf("the other writer's save: %v", err)
		}
	}
	text, sc, isErr := c.Call("door_close", nil)
	if !isErr || !strings.HasPrefix(text, "FORBIDDEN") || sc["state"] != "closed" {
		t.Fatalf("close of a door another writer closed: %v %q %v", isErr, text, sc)
	}
	for k := range st.last {
		if _, v, err := st.Store.Load(context.Background(), k); err != nil || v != 4 {
			t.Fatalf("stored version %d, %v; want 4 (the other writer's)", v, err)
		}
	}
	if _, sc, isErr := c.Call("door_open", nil); isErr || sc["state"] != "open" {
		t.Fatalf("open after the conflict: %v %v", isErr, sc)
	}
}
