package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestTrimWhenIdle steps trimWhenIdle tick by tick: memory is given back
// once after work, not while the gate works, and not again until it has
// worked again.
func TestTrimWhenIdle(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reads := make(chan chan uint64) // each read of the activity, answered by the test
	var trims atomic.Int32
	activity := func() uint64 {
		reply := make(chan uint64)
		select {
		case reads <- reply:
		case <-ctx.Done():
			return 0
		}
		return <-reply
	}
	go trimWhenIdle(ctx, activity, time.Millisecond, func() { trims.Add(1) })

	// next waits for the next read: trimWhenIdle reads the activity once at
	// the start and then once a tick, after acting on the tick before.
	next := func() chan uint64 {
		t.Helper()
		select {
		case r := <-reads:
			return r
		case <-time.After(time.Minute):
			t.Fatal("the activity was not read")
			return nil
		}
	}
	next() <- 0 // at the start
	r := next()
	for i, s := range []struct {
		activity uint64
		trim     bool
	}{
		{0, false}, // idle since the start: nothing to give back
		{3, false}, // working
		{7, false}, // still working
		{7, true},  // idle after work: trim
		{7, false}, // still idle: once is enough
		{7, false},
		{8, false}, // work again
		{8, true},  // and idle again: trim
	} {
		r <- s.activity
		r = next() // the tick that read s.activity is over
		if got := trims.Swap(0); got > 1 || (got == 1) != s.trim {
			t.Fatalf("tick %d (activity %d): %d trims, want trim %v", i, s.activity, got, s.trim)
		}
	}
}
