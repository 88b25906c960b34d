package interp

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"strconv"
)

// maxResolveDepth bounds alias chains of named guards and actions.
const maxResolveDepth = 32

// ErrNotImplemented is wrapped by the error of a named guard that has no
// implementation.
var ErrNotImplemented = errors.New("not implemented")

type notImplemented struct{ msg string }

func (e *notImplemented) Error() string { return e.msg }
func (e *notImplemented) Unwrap() error { return ErrNotImplemented }

// resolveActions is XState's resolveAndExecuteActionsWithContext: built-in
// actions change the snapshot in order; custom actions run at once while
// the actor runs, and are deferred while it starts.
func (st *stepper) resolveActions(s *Snapshot, ev Event, actions []Action) (*Snapshot, error) {
	for _, a := range actions {
		var params any
		if na, ok := a.(*NamedAction); ok {
			impl := st.m.Impl.Actions[na.Type]
			if impl == nil {
				continue // XState skips an action with no implementation
			}
			if na.Params != nil {
				var err error
				if params, err = st.eval(na.Params, Args{Context: s.Context, Event: ev, Self: st.actor, Snapshot: s, Thread: st.thread}, nil); err != nil {
					return nil, err
				}
			}
			a = impl
			if _, alias := a.(*NamedAction); alias {
				st.depth++
				if st.depth > maxResolveDepth {
					return nil, fmt.Errorf("action '%s' refers to itself", na.Type)
				}
				next, err := st.resolveActions(s, ev, []Action{a})
				st.depth--
				if err != nil {
					return nil, err
				}
				s = next
				continue
			}
		}
		var err error
		if s, err = st.resolveAction(s, ev, a, params); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (st *stepper) args(s *Snapshot, ev Event) Args {
	return Args{Context: s.Context, Event: ev, Self: st.actor, Snapshot: s, Thread: st.thread}
}

func (st *stepper) resolveAction(s *Snapshot, ev Event, a Action, params any) (*Snapshot, error) {
	switch a := a.(type) {
	case *FuncAction:
		args := st.args(s, ev)
		if st.running {
			st.impure = true
			return s, a.Fn(args, params)
		}
		if st.thread != nil {
			// The action runs after the step, maybe in another thread.
			var err, perr error
			args.Context, err = st.thread.Seal(args.Context)
			params, perr = st.thread.Seal(params)
			if err = cmp.Or(err, perr); err != nil {
				return nil, err
			}
		}
		st.effects = append(st.effects, Effect{Kind: EffectExec, exec: func() error { return a.Fn(args, params) }})
	case *AssignAction:
		if s.Context == nil {
			//lint:ignore ST1005 XState's own wording, which traces and users see
			return nil, errors.New("Cannot assign to undefined `context`. Ensure that `context` is defined in the machine config.")
		}
		st.impure = true
		old, _ := s.Context.(map[string]any)
		var ctx map[string]any
		args := st.args(s, ev)
		args.Spawner = st
		st.spawned = st.spawned[:0]
		if a.Into != nil {
			ctx = make(map[string]any, len(old)+1)
			maps.Copy(ctx, old)
			if err := a.Into(args, params, ctx); err != nil {
				return nil, err
			}
		} else {
			update, err := a.Fn(args, params)
			if err != nil {
				return nil, err
			}
			ctx = make(map[string]any, len(old)+len(update))
			maps.Copy(ctx, old)
			maps.Copy(ctx, update)
		}
		s = s.clone()
		s.Context = ctx
		for _, c := range st.spawned {
			st.adopt(s, c.ID, c)
		}
		clear(st.spawned)
		st.spawned = st.spawned[:0]
	case *RaiseAction:
		args := st.args(s, ev)
		v, err := st.eval(a.Event, args, params)
		if err != nil {
			return nil, err
		}
		e, err := toEvent(v, "raise")
		if err != nil {
			return nil, err
		}
		delay, err := st.delay(a.DelayName, a.Delay, args, params)
		if err != nil {
			return nil, err
		}
		ms, isNum := toNumber(delay)
		if !isNum {
			st.queue = append(st.queue, e)
			return s, nil
		}
		id, err := st.id(a.ID, args, params)
		if err != nil {
			return nil, err
		}
		st.effects = append(st.effects, Effect{Kind: EffectSchedule, ID: id, Event: e, Delay: ms})
	case *CancelAction:
		id, err := st.id(a.ID, st.args(s, ev), params)
		if err != nil {
			return nil, err
		}
		st.effects = append(st.effects, Effect{Kind: EffectCancel, ID: id})
	case *EmitAction:
		v, err := st.eval(a.Event, st.args(s, ev), params)
		if err != nil {
			return nil, err
		}
		if le, ok := v.(LazyEvent); ok {
			st.effects = append(st.effects, Effect{Kind: EffectEmit, Event: Event{Type: le.Type}, data: le.Data})
			break
		}
		e, err := toEvent(v, "emit")
		if err != nil {
			return nil, err
		}
		st.effects = append(st.effects, Effect{Kind: EffectEmit, Event: e})
	case *LogAction:
		v, err := st.eval(a.Value, st.args(s, ev), params)
		if err != nil {
			return nil, err
		}
		st.effects = append(st.effects, Effect{Kind: EffectLog, Value: v, Label: a.Label})
	default:
		return st.resolveChildAction(s, ev, a, params)
	}
	return s, nil
}

// delay evaluates the delay of a raise or sendTo: a named delay of the
// implementations (none when it has no implementation, as XState), or an
// expression.
func (st *stepper) delay(name string, e *Expr, args Args, params any) (any, error) {
	if name != "" {
		if d := st.m.Impl.Delays[name]; d != nil {
			return st.eval(d, args, params)
		}
		return nil, nil
	}
	return st.eval(e, args, params)
}

// id evaluates a scheduled event's id, or makes a fresh one.
func (st *stepper) id(e *Expr, args Args, params any) (string, error) {
	if e == nil {
		st.impure = true
		if st.actor != nil {
			st.actor.seq++
			return "xstate.raise." + strconv.Itoa(st.actor.seq), nil
		}
		return "xstate.raise", nil
	}
	v, err := st.eval(e, args, params)
	if err != nil {
		return "", err
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	return fmt.Sprint(v), nil
}

// toEvent converts an evaluated event expression to an Event.
func toEvent(v any, what string) (Event, error) {
	switch e := v.(type) {
	case Event:
		return e, nil
	case map[string]any:
		if ev, ok := EventFromObject(e); ok {
			return ev, nil
		}
	case string:
		//lint:ignore ST1005 XState's own wording, which traces and users see
		return Event{}, fmt.Errorf("Only event objects may be used with %s; use %s({ type: %q }) instead", what, what, e)
	}
	return Event{}, fmt.Errorf("%s: the event must be an object with a string type, not %T", what, v)
}

// toNumber converts a JSON-like number to float64.
func toNumber(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case float32:
		return float64(n), true
	}
	return 0, false
}

// eval evaluates an expression, noting when it runs user code.
func (st *stepper) eval(e *Expr, a Args, params any) (any, error) {
	if e == nil {
		return nil, nil
	}
	if e.Fn != nil {
		st.impure = true
		return e.Fn(a, params)
	}
	return e.Value, nil
}

// evalGuard is XState's evaluateGuard.
func (st *stepper) evalGuard(g Guard, s *Snapshot, ctx any, ev Event) (bool, error) {
	args := Args{Context: ctx, Event: ev, Self: st.actor, Snapshot: s, Thread: st.thread}
	switch g := g.(type) {
	case *NamedGuard:
		impl := st.m.Impl.Guards[g.Type]
		if impl == nil {
			return false, &notImplemented{fmt.Sprintf("Guard '%s' is not implemented.'.", g.Type)}
		}
		if f, ok := impl.(*FuncGuard); ok {
			var params any
			if g.Params != nil {
				var err error
				if params, err = st.eval(g.Params, args, nil); err != nil {
					return false, err
				}
			}
			st.impure = true
			return f.Fn(args, params)
		}
		st.depth++
		defer func() { st.depth-- }()
		if st.depth > maxResolveDepth {
			return false, fmt.Errorf("guard '%s' refers to itself", g.Type)
		}
		return st.evalGuard(impl, s, ctx, ev)
	case *FuncGuard:
		st.impure = true
		return g.Fn(args, nil)
	case *AndGuard:
		for _, c := range g.Guards {
			ok, err := st.evalGuard(c, s, ctx, ev)
			if err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	case *OrGuard:
		for _, c := range g.Guards {
			ok, err := st.evalGuard(c, s, ctx, ev)
			if err != nil || ok {
				return ok, err
			}
		}
		return false, nil
	case *NotGuard:
		ok, err := st.evalGuard(g.Guard, s, ctx, ev)
		return !ok && err == nil, err
	case *StateInGuard:
		if ref, ok := g.State.(string); ok && len(ref) > 0 && ref[0] == '#' {
			n, err := s.Machine.lookupID(ref)
			if err != nil {
				return false, err
			}
			return s.cfg.set.has(n.Order), nil
		}
		return s.Matches(g.State), nil
	}
	return false, fmt.Errorf("unknown guard %T", g)
}
