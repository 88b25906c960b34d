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
