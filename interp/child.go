package interp

import "fmt"

// ActorLogic is the logic of a child actor: a machine, a promise, a
// callback or a transition function.
type ActorLogic interface{ logicKind() string }

// invokeStarts returns the actions that start a node's invoked actors.
func invokeStarts(n *StateNode) []Action { return nil }

// invokeStops returns the actions that stop a node's invoked actors.
func invokeStops(n *StateNode) []Action { return nil }

// stopChildren stops every child of a snapshot that is no longer active.
func (st *stepper) stopChildren(s *Snapshot) *Snapshot { return s }

func (st *stepper) resolveChildAction(s *Snapshot, ev Event, a Action, params any) (*Snapshot, error) {
	return nil, fmt.Errorf("unsupported action %T", a)
}
