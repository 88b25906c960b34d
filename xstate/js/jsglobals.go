package js

import (
	"crypto/rand"
	"fmt"
	"time"

	"github.com/dop251/goja"
)

// installGlobals defines the few host globals machines' code commonly
// uses that goja, a bare ECMAScript engine, lacks: crypto.randomUUID (ids
// in a context), structuredClone (a deep copy, of JSON values: a Date
// becomes its ISO string, as in a context), queueMicrotask and
// performance.now. Timers (setTimeout) are left out on purpose: a machine
// waits with its own delays, which the server stores.
//
// Time and chance in machines' code are the host's, not the engine's
// clock: Date.now() and new Date() read the wall clock (time.Now: goja's
// default time source), Math.random() is goja's default source (the
// process's math/rand generator, seeded at random), crypto.randomUUID()
// reads crypto/rand, and performance.now() counts milliseconds (to the
// microsecond) since the Host was first used, the same clock for every
// runtime of its modules (so it never goes back between calls). None is
// deterministic: XState's, on Node, are not either, and stategate stores
// what a step computed, so a step is never replayed to recompute it (an
// event that meets a conflicting save runs again, and may see other
// values). A machine whose behaviour must be reproducible takes the time
// from its event or its input, and waits with its own delays, whose clock
// is the engine's (a simulated one under trace and bench).
func (rt *jsRuntime) installGlobals() error {
	vm := rt.vm
	crypto := vm.NewObject()
	if err := crypto.Set("randomUUID", func(goja.FunctionCall) goja.Value {
		var b [16]byte
		_, _ = rand.Read(b[:])
		b[6] = b[6]&0x0f | 0x40 // version 4
		b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
		return vm.ToValue(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]))
	}); err != nil {
		return err
	}
	if err := vm.Set("crypto", crypto); err != nil {
		return err
	}
	if err := vm.Set("structuredClone", func(call goja.FunctionCall) goja.Value {
		v := call.Argument(0)
		if goja.IsUndefined(v) {
			return v
		}
		return rt.toJS(rt.fromJSOrThrow(v))
	}); err != nil {
		return err
	}
	start := time.Now()
	if rt.mod.clock != nil {
		start = rt.mod.clock.start
	}
	perf := vm.NewObject()
	if err := perf.Set("now", func(goja.FunctionCall) goja.Value {
		return vm.ToValue(float64(time.Since(start).Microseconds()) / 1000)
	}); err != nil {
		return err
	}
	if err := vm.Set("performance", perf); err != nil {
		return err
	}
	_, err := vm.RunString(`globalThis.queueMicrotask = (fn) => { Promise.resolve().then(() => fn()); };`)
	return err
}

// hostClock is when a Host was first used: performance.now counts from it.
type hostClock struct{ start time.Time }
