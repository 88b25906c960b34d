package js

import (
	"fmt"

	"github.com/dop251/goja"

	"github.com/stategate/stategate/internal/config"
	"github.com/stategate/stategate/interp"
)

// The actor logics of fromPromise, fromCallback, fromTransition,
// fromObservable and fromEventObservable. Their code runs in the runtime
// their parent (or an ancestor) holds for the step that starts them or
// sends them events, when there is one, so that values cross without
// conversion; else in a runtime from the module's pool. (A callback's or
// an observable's subscription keeps a runtime of its own until it ends.)

// logicRuntime returns the runtime for the code of a child's logic, and
// whether it is the logic's own, to Release when done (else it is the
// runtime an ancestor's step holds).
func (r *jsResolver) logicRuntime(self *interp.Actor) (*jsRuntime, bool, error) {
	if self != nil {
		if rt, ok := self.HeldThread(r.mod).(*jsRuntime); ok {
			return rt, false, nil
		}
	}
	rt, err := r.mod.get()
	if err != nil {
		return nil, false, err
	}
	return rt, true, nil
}

func (r *jsResolver) promise(f *jsFn) interp.ActorLogic {
	label := fnLabel("promise actor", f, "")
	return &interp.PromiseLogic{Start: func(self *interp.Actor, input any, settle func(any, error)) error {
		rt, own, err := r.logicRuntime(self)
		if err != nil {
			return err
		}
		if own {
			defer rt.Release()
		}
		out, err := rt.callFn(f, label, rt.logicArgs(input, self))
		if err != nil {
			return err
		}
		p, isObj := out.(*goja.Object)
		if !isObj {
			settle(rt.keepOutput(out), nil)
			return nil
		}
		// The call ran the job queue when it returned: a promise that
		// waits for nothing else is settled by now.
		if pr, ok := p.Export().(*goja.Promise); ok {
			switch pr.State() {
			case goja.PromiseStateFulfilled:
				settle(rt.keepOutput(pr.Result()), nil)
				return nil
			case goja.PromiseStateRejected:
				settle(nil, rejection(rt, pr.Result()))
				return nil
			}
		}
		then, _ := goja.AssertFunction(p.Get("then"))
		if then == nil {
			settle(rt.keepOutput(out), nil)
			return nil
		}
		// The reactions run in the job queue when the call below returns.
		onResolve := rt.vm.ToValue(func(call goja.FunctionCall) goja.Value {
			settle(rt.keepOutput(call.Argument(0)), nil)
			return goja.Undefined()
		})
		onReject := rt.vm.ToValue(func(call goja.FunctionCall) goja.Value {
			settle(nil, rejection(rt, call.Argument(0)))
			return goja.Undefined()
		})
		return rt.guard(func() error {
			_, err := then(p, onResolve, onReject)
			return err
		})
	}}
}

// rejection converts a rejection reason to an error whose message is the
// reason's message, and whose value is what event.error shows; code of the
// runtime gets the reason itself.
func rejection(rt *jsRuntime, v goja.Value) error {
	e := &jsError{msg: v.String(), rt: rt, js: v}
	if o, ok := v.(*goja.Object); ok {
		if m := o.Get("message"); m != nil && !goja.IsUndefined(m) {
			e.msg = m.String()
		}
		if o.ClassName() != "Error" {
			e.value = rt.fromJS(v)
		}
	} else {
		e.value = rt.fromJS(v)
	}
	return e
}

// creatorArgs makes the {input, system, self, emit} a callback's or an
// observable's creator gets (a callback's gets sendBack and receive too).
func (rt *jsRuntime) creatorArgs(input any, self *interp.Actor) *goja.Object {
	rt.forActor(self)
	args := rt.vm.NewObject()
	_ = args.Set("input", rt.toJS(input))
	_ = args.Set("system", rt.systemJS(self))
	_ = args.Set("self", rt.selfJS(self))
	_, emit := rt.promiseExtras()
	_ = args.Set("emit", emit)
	return args
}

func (r *jsResolver) callback(f *jsFn) interp.ActorLogic {
	label := fnLabel("callback actor", f, "")
	return &interp.CallbackLogic{Start: func(self *interp.Actor, input any, sendBack func(interp.Event), receive func(func(interp.Event) error)) (func(), error) {
		// The callback's listeners live in this runtime: it stays with
		// the actor until it stops.
		rt, err := r.mod.get()
		if err != nil {
			return nil, err
		}
		args := rt.creatorArgs(input, self)
		_ = args.Set("sendBack", func(call goja.FunctionCall) goja.Value {
			if obj, ok := rt.fromJS(call.Argument(0)).(map[string]any); ok {
				if ev, ok := interp.EventFromObject(obj); ok {
					sendBack(ev)
				}
			}
			return goja.Undefined()
		})
		_ = args.Set("receive", func(call goja.FunctionCall) goja.Value {
			listener := call.Argument(0)
			receive(func(ev interp.Event) error {
				_, err := rt.call(listener, label+" listener", rt.toJS(ev))
				return err
			})
			return goja.Undefined()
		})
		out, err := rt.callFn(f, label, args)
		if err != nil {
			r.mod.put(rt)
			return nil, err
		}
		return func() {
			if _, ok := goja.AssertFunction(out); ok {
				_, _ = rt.call(out, label+" cleanup")
			}
			r.mod.put(rt)
		}, nil
	}}
}

// observable makes fromObservable's logic (events: fromEventObservable's):
// the creator's subscribable is subscribed to with an observer whose next,
// error and complete report to the actor.
func (r *jsResolver) observable(f *jsFn, events bool) interp.ActorLogic {
	label := fnLabel("observable actor", f, "")
	if events {
		label = fnLabel("event observable actor", f, "")
	}
	return &interp.ObservableLogic{Events: events, Subscribe: func(self *interp.Actor, input any, next func(any), fail func(error), complete func()) (func(), error) {
		// The subscription lives in this runtime until the actor stops.
		rt, err := r.mod.get()
		if err != nil {
			return nil, err
		}
		out, err := rt.callFn(f, label, rt.creatorArgs(input, self))
		if err != nil {
			r.mod.put(rt)
			return nil, err
		}
		o, _ := out.(*goja.Object)
		var subscribe goja.Callable
		if o != nil {
			subscribe, _ = goja.AssertFunction(o.Get("subscribe"))
		}
		if subscribe == nil {
			r.mod.put(rt)
			return nil, fmt.Errorf("%s: it must return a subscribable (an object with subscribe)", label)
		}
		observer := rt.vm.NewObject()
		_ = observer.Set("next", func(call goja.FunctionCall) goja.Value {
			next(rt.keep(call.Argument(0)))
			return goja.Undefined()
		})
		_ = observer.Set("error", func(call goja.FunctionCall) goja.Value {
			fail(rejection(rt, call.Argument(0)))
			return goja.Undefined()
		})
		_ = observer.Set("complete", func(goja.FunctionCall) goja.Value {
			complete()
			return goja.Undefined()
		})
		var sub goja.Value
		err = rt.guard(func() error {
			var err error
			sub, err = subscribe(o, observer)
			return err
		})
		if err != nil {
			r.mod.put(rt)
			return nil, jsErr(err)
		}
		return func() {
			if so, ok := sub.(*goja.Object); ok {
				if unsub, ok := goja.AssertFunction(so.Get("unsubscribe")); ok {
					_ = rt.guard(func() error { _, err := unsub(so); return err })
				}
			}
			r.mod.put(rt)
		}, nil
	}}
}

func (r *jsResolver) reducer(f *jsFn, initial any) interp.ActorLogic {
	label := fnLabel("transition actor", f, "")
	return &interp.TransitionLogic{
		Initial: func(self *interp.Actor, input any) (any, error) {
			fn, isFn := initial.(*jsFn)
			if !isFn {
				return config.Plain(initial), nil
			}
			rt, own, err := r.logicRuntime(self)
			if err != nil {
				return nil, err
			}
			if own {
				defer rt.Release()
			}
			rt.forActor(self)
			args := rt.vm.NewObject()
			_ = args.Set("input", rt.toJS(input))
			out, err := rt.callFn(fn, label+" initial state", args)
			if err != nil {
				return nil, err
			}
			return rt.keep(out), nil
		},
		Transition: func(self *interp.Actor, state any, ev interp.Event) (any, error) {
			rt, own, err := r.logicRuntime(self)
			if err != nil {
				return nil, err
			}
			if own {
				defer rt.Release()
			}
			rt.forActor(self)
			out, err := rt.callFn(f, label, rt.toJS(state), rt.eventJS(ev))
			if err != nil {
				return nil, err
			}
			return rt.keep(out), nil
		},
	}
}
