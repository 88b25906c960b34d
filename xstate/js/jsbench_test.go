package js

import (
	"path/filepath"
	"testing"

	"github.com/dop251/goja"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/xstate"
)

// BenchmarkJSStep times the bridge on a small module: a step with a guard
// and an assign (each one JavaScript call), can() with a guard, and an
// actor's life with no step.
func BenchmarkJSStep(b *testing.B) {
	m, _, err := (&xstate.Loader{Modules: &Host{}}).LoadModule(filepath.Join("testdata", "js", "bench-step.mjs"))
	if err != nil {
		b.Fatal(err)
	}
	a := interp.NewActor(m, interp.ActorOptions{})
	a.Start()
	b.Run("assign", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a.Send(interp.Event{Type: "INC"})
		}
	})
	b.Run("can", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a.Snapshot().Can(interp.Event{Type: "NOOP"})
		}
	})
	b.Run("start", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			x := interp.NewActor(m, interp.ActorOptions{})
			x.Start()
			x.Stop()
		}
	})
}

// BenchmarkGojaFloor runs the JavaScript of one DEPOSIT step of the
// conformance case actions/enqueue-actions in a bare goja runtime, with no
// engine: the enqueueActions function, its two check() guards, and the
// function of the assign it enqueues, called with plain objects and native
// stand-ins for enqueue and check. It is the floor of that step's cost in
// goja, for comparing `stategate bench` on the case (one step: the JS
// plus the engine) with it.
func BenchmarkGojaFloor(b *testing.B) {
	const src = `
const guards = {
  isLarge: ({ event }) => event.amount >= 100,
  hasParam: (_, params) => params.min <= 5,
};
function enq({ context, event, enqueue, check }) {
  enqueue.assign({ total: context.total + event.amount });
  enqueue.assign({ entries: ({ context }) => context.entries + 1 });
  if (check('isLarge')) {
    enqueue('countLarge');
    enqueue.emit({ type: 'largeDeposit', amount: event.amount });
  }
  if (check({ type: 'hasParam', params: { min: 1 } }) && context.total + event.amount > 500) {
    enqueue.raise({ type: 'CLOSE' });
  }
}`
	vm := goja.New()
	if _, err := vm.RunString(src); err != nil {
		b.Fatal(err)
	}
	enq, _ := goja.AssertFunction(vm.Get("enq"))
	guards := vm.Get("guards").ToObject(vm)
	isLarge, _ := goja.AssertFunction(guards.Get("isLarge"))
	hasParam, _ := goja.AssertFunction(guards.Get("hasParam"))
	var queued []goja.Value
	push := func(c goja.FunctionCall) goja.Value { queued = append(queued, c.Argument(0)); return goja.Undefined() }
	enqueue := vm.ToValue(push).ToObject(vm)
	for _, k := range []string{"assign", "emit", "raise"} {
		_ = enqueue.Set(k, push)
	}
	var ctx, ev *goja.Object
	args := func() *goja.Object {
		a := vm.NewObject()
		_ = a.Set("context", ctx)
		_ = a.Set("event", ev)
		return a
	}
	check := vm.ToValue(func(c goja.FunctionCall) goja.Value {
		g := c.Argument(0)
		var r goja.Value
		var err error
		if goja.IsString(g) {
			r, err = isLarge(goja.Undefined(), args())
		} else {
			r, err = hasParam(goja.Undefined(), args(), g.ToObject(vm).Get("params"))
		}
		if err != nil {
			panic(err)
		}
		return r
	})
	b.ReportAllocs()
	for b.Loop() {
		ctx, ev = vm.NewObject(), vm.NewObject()
		_ = ctx.Set("total", 10)
		_ = ctx.Set("large", 0)
		_ = ctx.Set("entries", 1)
		_ = ev.Set("type", "DEPOSIT")
		_ = ev.Set("amount", 10)
		a := args()
		_ = a.Set("enqueue", enqueue)
		_ = a.Set("check", check)
		queued = queued[:0]
		if _, err := enq(goja.Undefined(), a); err != nil {
			b.Fatal(err)
		}
		for _, q := range queued {
			o := q.ToObject(vm)
			for _, k := range o.Keys() {
				if f, ok := goja.AssertFunction(o.Get(k)); ok {
					if _, err := f(goja.Undefined(), args()); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	}
}
