package interp

import (
	"fmt"
	"maps"
)

// ActorLogic is the logic of a child actor: a machine (MachineLogic), a
// promise (PromiseLogic), a callback (CallbackLogic) or a reducer
// (TransitionLogic), as XState's actor logic creators make them.
type ActorLogic interface{ logicKind() string }

// MachineLogic runs a machine as a child actor.
type MachineLogic struct{ Machine *Machine }

// PromiseLogic is XState's fromPromise: Start begins the work and calls
// settle once, with the output or an error, possibly after it returned.
// An error from Start itself fails the actor at once.
type PromiseLogic struct {
	Start func(self *Actor, input any, settle func(output any, err error)) error
}

// CallbackLogic is XState's fromCallback: Start gets the input, a sendBack
// function (events to the parent) and a receive function (to register what
// handles events sent to the actor); it returns what to run when the actor
// stops.
type CallbackLogic struct {
	Start func(self *Actor, input any, sendBack func(Event), receive func(func(Event) error)) (cleanup func(), err error)
}

// TransitionLogic is XState's fromTransition: a reducer over a context.
// Initial gets the actor it makes the state of.
type TransitionLogic struct {
	Initial    func(self *Actor, input any) (any, error)
	Transition func(self *Actor, state any, ev Event) (any, error)
}

// ObservableLogic is XState's fromObservable, or fromEventObservable when
// Events is set. Subscribe starts it: each value next reports becomes the
// actor's context (fromObservable) or an event sent to its parent
// (fromEventObservable); fail and complete end it in status error or done.
// It returns what unsubscribes when the actor stops.
type ObservableLogic struct {
	Events    bool
	Subscribe func(self *Actor, input any, next func(any), fail func(error), complete func()) (unsubscribe func(), err error)
}

func (*ObservableLogic) logicKind() string { return "observable" }

func (*MachineLogic) logicKind() string    { return "machine" }
func (*PromiseLogic) logicKind() string    { return "promise" }
func (*CallbackLogic) logicKind() string   { return "callback" }
func (*TransitionLogic) logicKind() string { return "transition" }

// SpawnAction starts a child actor (XState's spawnChild, and invoke).
type SpawnAction struct {
	// Src names a named actor of the implementations, or the inline Logic
	// of an invoke (as XState names it: xstate.invoke.INDEX.NODE_ID).
	Src          string
	Logic        ActorLogic // the logic itself, for inline logic
	ID           *Expr      // the child's id; nil: generated
	Input        *Expr
	SystemID     string
	SyncSnapshot bool
}

// StopAction stops a child actor by id (XState's stopChild).
type StopAction struct {
	ID *Expr // evaluates to a child id or an *Actor
}

// SendToAction sends an event to another actor (XState's sendTo,
// sendParent and forwardTo).
type SendToAction struct {
	// To evaluates to a child id, an *Actor, or nil for the parent when
	// Parent is set.
	To     *Expr
	Parent bool
	Event  *Expr // nil: the current event (forwardTo)
	Delay  *Expr
	// DelayName names a delay of the implementations.
	DelayName string
	ID        *Expr
}

// EnqueueAction is XState's enqueueActions: Fn returns the actions to run,
// which are resolved at once, in order. params are the action's (when it
// is a named action given {type, params}); check evaluates a guard as the
// machine would.
type EnqueueAction struct {
	Fn func(a Args, params any, check func(Guard) (bool, error)) ([]Action, error)
}

func (*SpawnAction) actionType() string   { return "xstate.spawnChild" }
func (*StopAction) actionType() string    { return "xstate.stopChild" }
func (*SendToAction) actionType() string  { return "xstate.sendTo" }
func (*EnqueueAction) actionType() string { return "xstate.enqueueActions" }

// invokeStarts returns the actions that start a node's invoked actors.
func invokeStarts(n *StateNode) []Action {
	out := make([]Action, len(n.Invoke))
	for i, inv := range n.Invoke {
		out[i] = inv.spawn
	}
	return out
}

// invokeStops returns the actions that stop a node's invoked actors.
func invokeStops(n *StateNode) []Action {
	out := make([]Action, len(n.Invoke))
	for i, inv := range n.Invoke {
		out[i] = inv.stop
	}
	return out
}

// stopChildren stops every child of a snapshot that is no longer active.
func (st *stepper) stopChildren(s *Snapshot) *Snapshot {
	for _, id := range s.Children() {
		var err error
		if s, err = st.resolveAction(s, Event{}, &StopAction{ID: Static(id)}, nil); err != nil {
			return s
		}
	}
	return s
}

// Spawn is the Spawner of an assign's function: it makes a child, as
// spawnChild does, and collects it for the assign in progress
// (st.spawned), which adds it to its snapshot and starts it.
func (st *stepper) Spawn(src string, logic ActorLogic, o SpawnOptions) (*Actor, error) {
	if logic != nil {
		src = "" // inline logic has no name: it is not persisted
	} else if logic = st.m.Impl.Actors[src]; logic == nil {
		return nil, fmt.Errorf("Actor logic '%s' not implemented in machine '%s'", src, st.m.ID)
	}
	id := o.ID
	if id == "" {
		id = st.newID()
	}
	c, err := st.makeChild(logic, src, id, o.Input, o.SyncSnapshot, o.SystemID)
	if err == nil {
		st.spawned = append(st.spawned, c)
	}
	return c, err
}

// adopt adds a child to a snapshot of the step (one it cloned), to be
// started once the step is done; a nil child, for logic the machine
// lacks, holds its id with no actor, as in XState.
func (st *stepper) adopt(s *Snapshot, id string, c *Actor) {
	x := s.own()
	x.children = maps.Clone(x.children)
	if x.children == nil {
		x.children = map[string]*Actor{}
	}
	x.children[id] = c
	if c != nil {
		st.effects = append(st.effects, Effect{Kind: EffectStart, To: c})
	}
}

// makeChild makes a child actor of the step's actor, entered in the actor
// system under systemID when there is one; src names its logic ("" for
// inline logic).
func (st *stepper) makeChild(logic ActorLogic, src, id string, input any, sync bool, systemID string) (*Actor, error) {
	if _, isMachine := logic.(*MachineLogic); isMachine {
		// A child machine's input goes into Go values (its init event),
		// which Go code may read.
		if st.thread != nil {
			var err error
			if input, err = st.thread.Seal(input); err != nil {
				return nil, err
			}
		}
	}
	c := newChild(st.actor, id, logic, input, sync)
	c.src = src
	if systemID != "" && st.actor != nil {
		if err := c.register(systemID); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (st *stepper) resolveChildAction(s *Snapshot, ev Event, a Action, params any) (*Snapshot, error) {
	args := st.args(s, ev)
	switch a := a.(type) {
	case *SpawnAction:
		st.impure = true
		logic := a.Logic
		if logic == nil {
			logic = st.m.Impl.Actors[a.Src]
		}
		id := ""
		if a.ID != nil {
			v, err := st.eval(a.ID, args, params)
			if err != nil {
				return nil, err
			}
			id, _ = v.(string)
		}
		if id == "" {
			id = st.newID()
		}
		var child *Actor
		if logic != nil {
			input, err := st.eval(a.Input, Args{Context: s.Context, Event: ev, Self: st.actor, Snapshot: s, Thread: st.thread}, nil)
			if err != nil {
				return nil, err
			}
			if child, err = st.makeChild(logic, a.Src, id, input, a.SyncSnapshot, a.SystemID); err != nil {
				return nil, err
			}
		}
		s = s.clone()
		st.adopt(s, id, child)
	case *StopAction:
		st.impure = true
		v, err := st.eval(a.ID, args, params)
		if err != nil {
			return nil, err
		}
		var child *Actor
		switch x := v.(type) {
		case string:
			child = s.extra().children[x]
		case *Actor:
			child = x
		}
		s = s.clone()
		if child != nil {
			x := s.own()
			x.children = maps.Clone(x.children)
			delete(x.children, child.ID)
			st.effects = append(st.effects, Effect{Kind: EffectStop, To: child})
			if st.running {
				// As XState does, the stopped actor (and its children) leave
				// the actor system at once, though they stop later: an actor
				// spawned next in the step may take the same system id.
				child.unregister()
				if !child.started {
					// One that has not started (spawned in this step) is
					// stopped now and never starts: its start-up code
					// (a callback's sendBack, a machine's entry) never runs.
					child.Stop()
				}
			} else if !child.started {
				// In an actor's initial step XState stops it (later, as the
				// actor starts) before it would have started.
				child.noStart = true
			}
		}
	case *SendToAction:
		st.impure = true
		var e Event
		if a.Event == nil {
			e = ev
		} else {
			v, err := st.eval(a.Event, args, params)
			if err != nil {
				return nil, err
			}
			if e, err = toEvent(v, "sendTo"); err != nil {
				return nil, err
			}
		}
		delay, err := st.delay(a.DelayName, a.Delay, args, params)
		if err != nil {
			return nil, err
		}
		var to *Actor
		var child string // a child the state being entered invokes
		var target any
		if a.To != nil {
			if target, err = st.eval(a.To, args, params); err != nil {
				return nil, err
			}
		}
		switch t := target.(type) {
		case string:
			switch t {
			case "#_parent":
				if to = st.parent(); to == nil && st.actor != nil {
					return nil, errNoParent(s)
				}
			case "#_internal":
				to = st.actor
			default:
				id := t
				if len(t) > 2 && t[:2] == "#_" {
					id = t[2:]
				}
				to = s.extra().children[id]
				if to == nil && id == t && st.invokes(id) {
					child = id
				} else if to == nil {
					//lint:ignore ST1005 XState's own wording, which traces and users see
					return nil, fmt.Errorf("Unable to send event to actor '%s' from machine '%s'.", t, s.Machine.ID)
				}
			}
		case *Actor:
			to = t
		case nil:
			if a.Parent {
				if to = st.parent(); to == nil && st.actor != nil {
					return nil, errNoParent(s)
				}
			}
		}
		if to == nil && child == "" {
			to = st.actor
		}
		eff := Effect{Kind: EffectSend, To: to, Event: e, ToChild: child}
		if ms, ok := toNumber(delay); ok {
			id, err := st.id(a.ID, args, params)
			if err != nil {
				return nil, err
			}
			eff.Kind, eff.Delay, eff.ID = EffectSchedule, ms, id
		}
		st.effects = append(st.effects, eff)
	case *EnqueueAction:
		st.impure = true
		check := func(g Guard) (bool, error) { return st.evalGuard(g, s, s.Context, ev) }
		actions, err := a.Fn(args, params, check)
		if err != nil {
			return nil, err
		}
		return st.resolveActions(s, ev, actions)
	default:
		return nil, fmt.Errorf("unsupported action %T", a)
	}
	return s, nil
}

// errNoParent is XState's error for a sendParent from an actor that has no
// parent (a root actor).
func errNoParent(s *Snapshot) error {
	//lint:ignore ST1005 XState's own wording, which traces and users see
	return fmt.Errorf("Unable to send event to actor '#_parent' from machine '%s'.", s.Machine.ID)
}

// invokes reports whether the state being entered invokes a child with
// the id: a sendTo in its entry actions may name it, though it starts
// after them (XState's deferredActorIds).
func (st *stepper) invokes(id string) bool {
	if st.entering == nil {
		return false
	}
	for _, inv := range st.entering.Invoke {
		if inv.ID == id {
			return true
		}
	}
	return false
}

func (st *stepper) parent() *Actor {
	if st.actor == nil {
		return nil
	}
	return st.actor.parent
}

// newID makes an id for a spawned actor that has none.
func (st *stepper) newID() string {
	if st.actor != nil {
		st.actor.seq++
		return fmt.Sprintf("x:%d", st.actor.seq)
	}
	return "x:0"
}
