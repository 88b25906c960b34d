package interp

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Actor runs a machine, or the logic of a child actor: it holds the
// current snapshot, processes events one at a time (events sent while one
// is processed wait in a mailbox), carries out the effects of each step,
// and keeps the timers of delayed events on a Clock. An Actor is not safe
// for concurrent use: one goroutine drives it and its children.
type Actor struct {
	ID string

	m       *Machine   // a machine actor's machine
	logic   ActorLogic // a child's logic when it is not a machine
	src     string     // a child's logic's name ("" for inline logic)
	snap    *Snapshot
	clock   Clock
	opts    ActorOptions
	parent  *Actor
	sync    bool // send snapshots to the parent (invoke onSnapshot)
	started bool
	stopped bool
	busy    bool
	mailbox []Event
	pending []Effect // effects of the initial snapshot, run by Start
	timers  []actorTimer
	seq     int
	scratch []uint64 // reused by steps for temporary node sets
	effects []Effect // reused by steps: effects are carried out at once
	queue   []Event  // reused by steps for the internal queue
	// scratchBuf and queueBuf back scratch and queue at first, so that an
	// actor whose steps need little allocates none for them.
	scratchBuf [16]uint64
	queueBuf   [2]Event
	st         stepper // the stepper of the step in progress
	// held is the thread the actor's Host lent it for the step in
	// progress; nil when it holds none.
	held Thread

	// noOutput is set when a promise resolved undefined (output is nil).
	noOutput bool
	// noStart is set on a child stopped in the initial step of its parent
	// that made it: it never starts.
	noStart bool
	// systemID is the actor's id in its tree's actor system ("" when it
	// has none); the root keeps the registry (XState's system.get).
	systemID string
	system   map[string]*Actor
	// The root's: how many calls into the tree (Start, Send) are in
	// progress, and the promise outcomes waiting for them to end, as
	// JavaScript's microtasks wait for the code that runs.
	calls      int
	microtasks []func()
	flushing   bool

	// The state of a child that is not a machine.
	input     any
	status    Status
	output    any
	err       error
	state     any // a transition actor's context
	receivers []func(Event) error
	cleanup   func()
}

// ActorOptions configure an Actor.
type ActorOptions struct {
	// Input is the actor's input (XState's createActor(m, {input})).
	Input any
	// Clock schedules delayed events; a new SimClock when nil.
	Clock Clock
	// Snapshot restores a persisted snapshot instead of starting afresh;
	// no entry action runs again.
	Snapshot *Snapshot
	// OnEmit receives the events the machine emits.
	OnEmit func(Event)
	// OnLog receives what log actions log.
	OnLog func(label string, value any)
	// ID names the actor; "" gives "x:0", the id XState gives a root actor
	// (its children's generated ids are "x:1", "x:2", ...).
	ID string
	// Timers are pending delayed events to restore with Snapshot (XState
	// does not persist them; stategate's server does).
	Timers []PendingTimer
	// HoldPromises keeps the outcome of the actor's promise children (and
	// theirs) from being delivered: each step runs its synchronous part
	// only. It is for timing as XState is timed (scripts/bench-xstate.sh),
	// whose loop never yields to the microtasks that would deliver a
	// promise's outcome; a run that should behave as XState leaves it off.
	HoldPromises bool
	// Context bounds the actor's work (its children's too): once it ends,
	// a macrostep in progress stops between microsteps, and the Host of
	// the machine's code (which gets it with Acquire) stops a call in
	// progress, so the step fails with an error wrapping ErrStopped and
	// the context's cause. The actor then
	// keeps the snapshot from before the event, with status error, as for
	// ErrLoop. nil never ends.
	Context context.Context
}

// PendingTimer is a delayed event not yet delivered to the actor itself,
// or to one of its child machines.
type PendingTimer struct {
	ID    string  `json:"id"`
	Event Event   `json:"-"`
	Due   float64 `json:"due"` // on the actor's clock, in ms
	// Path names the child machine whose timer it is by the ids from the
	// actor's child down (nil: the actor itself).
	Path []string `json:"path,omitempty"`
	// To, when set, is the actor the event goes to, if not the timer's own
	// (a delayed sendTo or sendParent): a path from the root of the tree,
	// "/" for the root and "/a/b" for its child a's child b.
	To string `json:"to,omitempty"`
}

// Host lends the code of a machine's implementations what it runs in (a
// JavaScript runtime, for code written in JavaScript) for the length of a
// step: a Thread. Implementations written in Go have none
// (Implementations.Host is nil).
type Host interface {
	// Acquire lends a thread for one step. ctx bounds the step's work
	// (ActorOptions.Context; context.Background() when the actor has
	// none): a Host that can stop the code it runs stops a call in
	// progress once ctx ends, and the call fails with an error wrapping
	// ErrStopped and ctx's cause (the macrostep stops between microsteps
	// in any case). A Host that cannot make a thread returns one whose
	// calls fail, with the reason.
	Acquire(ctx context.Context) Thread
}

// Thread is what one step's code runs in, lent by a Host. The guards,
// actions and expressions of the step get it in Args.Thread, and assert
// their Host's own type from it.
type Thread interface {
	// Seal converts the values that belong to the thread (left by the
	// step's code in v: a context, params, a child's input, so that they
	// need not be converted between the microsteps of one step) to plain
	// Go values. It is called before Release, at the end of every step,
	// for the context and params of a custom action and the input of a
	// child started past the step, and for a child machine's input. An
	// error says that the step's code made a value that cannot be one
	// (too large, nested too deep, cyclic): the step fails with it.
	Seal(v any) (any, error)
	// Release gives the thread back to its Host: the step is over.
	Release()
}

// seal converts what the step's thread left in a snapshot's context; on
// an error it returns s as it is.
func seal(t Thread, s *Snapshot) (*Snapshot, error) {
	if t == nil || s == nil || s.Context == nil {
		return s, nil
	}
	ctx, err := t.Seal(s.Context)
	if err != nil {
		return s, err
	}
	if sameValue(ctx, s.Context) {
		return s, nil
	}
	c := s.clone()
	c.Context = ctx
	return c, nil
}

// NewActor creates an actor and computes its initial snapshot (an error in
// doing so gives a snapshot with status error). Start runs it.
func NewActor(m *Machine, opts ActorOptions) *Actor {
	a := &Actor{ID: opts.ID, m: m, clock: opts.Clock, opts: opts}
	a.scratch, a.queue = a.scratchBuf[:], a.queueBuf[:0]
	if a.ID == "" {
		a.ID = "x:0"
	}
	if a.clock == nil {
		a.clock = NewSimClock()
	}
	a.init()
	return a
}

func (a *Actor) init() {
	if a.opts.Snapshot != nil {
		a.snap = a.opts.Snapshot
		a.adoptRestored()
		for _, t := range a.opts.Timers {
			// A child machine's timer goes to the child made from the
			// snapshot; one whose child is gone is dropped.
			if d := a.Descendant(t.Path); d != nil && d.m != nil {
				d.schedule(t.ID, t.Event, nil, t.To, t.Due-a.clock.Now())
			}
		}
		return
	}
	t, own := a.acquire()
	snap, effects, err := a.m.initial(a, a.opts.Input, t)
	// The effects run when the actor starts, maybe in another thread.
	if a.opts.OnEmit != nil {
		materialize(effects)
	} else {
		dropLazy(effects)
	}
	serr := sealStarts(t, effects)
	sealed, err2 := seal(t, snap)
	if serr == nil {
		serr = err2
	}
	if serr != nil && err == nil {
		// What the step made cannot be kept: the actor fails to start.
		err = serr
		sealed = a.m.failedStart(&Snapshot{Machine: a.m, Context: map[string]any{}}, err)
	}
	snap = sealed
	a.releaseThread(own)
	if err != nil {
		effects = nil // XState runs none of a failed start's actions
	}
	a.snap = snap
	a.pending = effects
}

// newChild creates a child actor; its initial state is computed now, as
// XState's createActor does, and Start runs it.
func newChild(parent *Actor, id string, logic ActorLogic, input any, sync bool) *Actor {
	c := &Actor{ID: id, parent: parent, sync: sync, input: input, logic: logic}
	if parent != nil {
		c.clock = parent.clock
		c.opts.OnLog = parent.opts.OnLog
		c.opts.HoldPromises = parent.opts.HoldPromises
		c.opts.Context = parent.opts.Context
	} else {
		c.clock = NewSimClock()
	}
	switch l := logic.(type) {
	case *MachineLogic:
		c.m, c.logic = l.Machine, nil
		c.opts.Input = input
		c.init()
	case *TransitionLogic:
		st, err := l.Initial(c, input)
		if err != nil {
			c.status, c.err = StatusError, err
		}
		c.state = st
	}
	return c
}

// acquire returns the thread for a step of the actor, and whether the
// actor holds it itself (releaseThread gives it back). An actor of a tree
// runs on the goroutine of its root, so when the actor or an ancestor
// already holds a thread of the same Host (a parent whose step sends to
// its children), the step shares it: values cross between them without
// conversion.
func (a *Actor) acquire() (Thread, bool) {
	if a.m == nil || a.m.Impl.Host == nil {
		return nil, false
	}
	h := a.m.Impl.Host
	if t := a.HeldThread(h); t != nil {
		return t, false
	}
	ctx := a.opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	a.held = h.Acquire(ctx)
	return a.held, true
}

// releaseThread gives back the thread acquire lent the actor itself.
func (a *Actor) releaseThread(own bool) {
	if !own {
		return
	}
	t := a.held
	a.held = nil
	t.Release()
}

// HeldThread returns the thread of Host h that the actor or one of its
// ancestors holds for a step in progress, or nil. The code of a child's
// logic runs in it rather than in a thread of its own.
func (a *Actor) HeldThread(h Host) Thread {
	for p := a; p != nil; p = p.parent {
		if p.held != nil && p.m != nil && p.m.Impl.Host == h {
			return p.held
		}
	}
	return nil
}

// Machine returns the actor's machine (nil for a child that is not one).
func (a *Actor) Machine() *Machine { return a.m }

// Parent returns the actor's parent, nil for a root actor.
func (a *Actor) Parent() *Actor { return a.parent }

// Snapshot returns the current snapshot of a machine actor.
func (a *Actor) Snapshot() *Snapshot { return a.snap }

// Clock returns the actor's clock.
func (a *Actor) Clock() Clock { return a.clock }

// Status returns the actor's status.
func (a *Actor) Status() Status {
	if a.m != nil {
		return a.snap.Status
	}
	return a.status
}

// Start runs the deferred effects of the initial snapshot (custom entry
// actions, timers, children) and lets the actor take events.
func (a *Actor) Start() {
	if a.started || a.stopped || a.noStart {
		return
	}
	r := a.enterTree()
	defer r.leaveTree()
	a.started = true
	if a.m == nil {
		a.startLogic()
		return
	}
	if a.opts.Snapshot != nil && a.snap.Status == StatusActive {
		a.startRestored()
	}
	effects := a.pending
	a.pending = nil
	t, own := a.acquire()
	// Events sent to the actor while it starts (a child's sendBack) wait
	// until it has started, as in XState's mailbox.
	a.busy = true
	if a.snap.Status == StatusActive {
		// As XState's machine logic does on start, the children of the
		// initial snapshot start before its deferred actions run (so a
		// child's timers are set before the parent's own).
		for _, e := range effects {
			if e.Kind == EffectStart && a.snap.Child(e.To.ID) == e.To && e.To.Status() == StatusActive {
				e.To.Start()
			}
		}
	}
	before := a.snap
	a.update(a.snap, startOrder(effects))
	if s, err := seal(t, a.snap); err != nil {
		a.sealFailed(before, err)
	} else {
		a.snap = s
	}
	a.releaseThread(own)
	a.busy = false
	if a.sync && a.snap.Status == StatusActive {
		a.sendSnapshot()
	}
	a.drain()
}

// Send processes an event. Events sent while the actor is processing one
// are queued; events sent to an actor that is stopped, done or failed are
// ignored.
func (a *Actor) Send(ev Event) {
	if a.stopped {
		return
	}
	r := a.enterTree()
	defer r.leaveTree()
	if !a.started || a.busy {
		// Processed once the actor starts, or once the event in progress
		// is done, as XState's mailbox.
		a.mailbox = append(a.mailbox, ev)
		return
	}
	a.busy = true
	if a.m == nil {
		a.processLogic(ev)
	} else {
		a.process(ev)
	}
	a.busy = false
	a.drain()
}

func (a *Actor) drain() {
	if a.busy || len(a.mailbox) == 0 {
		return
	}
	a.busy = true
	for n := 0; len(a.mailbox) > 0 && !a.stopped; n++ {
		if n == MaxMailboxEvents {
			a.mailbox = nil
			err := fmt.Errorf("%w: more than %d events sent to actor '%s' while it processed one (actors that send to themselves or to each other without end)", ErrLoop, MaxMailboxEvents, a.ID)
			if a.m != nil {
				a.snap = a.snap.withStatus(StatusError, nil, err)
			} else {
				a.status, a.err = StatusError, err
			}
			a.finish()
			break
		}
		ev := a.mailbox[0]
		a.mailbox = a.mailbox[1:]
		if a.m == nil {
			a.processLogic(ev)
		} else {
			a.process(ev)
		}
	}
	a.mailbox = nil
	a.busy = false
}

func (a *Actor) process(ev Event) {
	t, own := a.acquire()
	next, effects, err := a.m.transition(a, a.snap, ev, t)
	if err != nil {
		a.releaseThread(own)
		a.snap = a.snap.withStatus(StatusError, nil, err)
		a.finish()
		return
	}
	before := a.snap
	a.update(next, effects)
	if t != nil {
		if s, err := seal(t, a.snap); err != nil {
			a.sealFailed(before, err)
		} else {
			a.snap = s
		}
	}
	a.releaseThread(own)
	if a.sync && a.snap.Status == StatusActive {
		a.sendSnapshot()
	}
}

// sealFailed is what an actor does when what its step's runtime left in
// the snapshot cannot be converted (seal's err): it keeps the snapshot
// from before the step (before), with status error, as for a step that
// fails.
func (a *Actor) sealFailed(before *Snapshot, err error) {
	active := a.snap.Status == StatusActive
	a.snap = before.withStatus(StatusError, nil, err)
	if active {
		a.finish()
	}
}

// update installs a snapshot and carries out its effects, as XState's
// Actor.update: an effect that fails puts the snapshot in status error.
func (a *Actor) update(s *Snapshot, effects []Effect) {
	a.snap = s
	for _, e := range effects {
		if err := a.effect(e); err != nil {
			a.snap = s.withStatus(StatusError, nil, err)
			break
		}
	}
	if a.snap.Status != StatusActive {
		a.finish()
	}
}

func (a *Actor) effect(e Effect) error {
	switch e.Kind {
	case EffectExec:
		return e.exec()
	case EffectSchedule:
		path := ""
		if e.ToChild != "" {
			// A child not started yet: found by its path when the timer fires.
			path = strings.TrimSuffix(a.treePath(), "/") + "/" + e.ToChild
		}
		a.schedule(e.ID, e.Event, e.To, path, e.Delay)
	case EffectCancel:
		for i := range a.timers {
			if a.timers[i].id == e.ID {
				a.clock.ClearTimeout(a.timers[i].tid)
				a.timers = append(a.timers[:i], a.timers[i+1:]...)
				break
			}
		}
	case EffectEmit:
		if a.opts.OnEmit != nil {
			ev := e.Event
			if e.data != nil {
				ev.Data = e.data()
			}
			a.opts.OnEmit(ev)
		}
	case EffectLog:
		if a.opts.OnLog != nil {
			a.opts.OnLog(e.Label, e.Value)
		}
	case EffectSend:
		to := e.To
		if e.ToChild != "" {
			to = a.snap.Child(e.ToChild)
		}
		if to != nil {
			to.Send(e.Event)
		}
	case EffectStart:
		e.To.Start()
	case EffectStop:
		e.To.Stop()
	}
	return nil
}

// finish is what an actor does once it is done or failed: it takes no more
// events, cancels its timers, and tells its parent.
func (a *Actor) finish() {
	a.halt()
	if a.parent == nil {
		return
	}
	switch a.Status() {
	case StatusDone:
		data := map[string]any{"actorId": a.ID}
		switch {
		case a.m != nil && a.m.Root.Output != nil:
			data["output"] = a.snap.Output()
		case a.m == nil && !a.noOutput:
			data["output"] = a.output
		}
		// Otherwise event.output is undefined: a machine with no output,
		// a promise that resolved undefined.
		a.parent.Send(Event{Type: "xstate.done.actor." + a.ID, Data: data})
	case StatusError:
		err := a.err
		if a.m != nil {
			err = a.snap.Err()
		}
		a.parent.Send(Event{Type: "xstate.error.actor." + a.ID, Data: map[string]any{"error": err, "actorId": a.ID}})
	}
}

// unregister takes the actor and its descendants out of the actor system
// (XState's unregisterRecursively), children first.
func (a *Actor) unregister() {
	if a.m != nil && a.snap != nil {
		for _, c := range a.snap.extra().children {
			c.unregister()
		}
	}
	if a.systemID != "" {
		if r := a.root(); r.system[a.systemID] == a {
			delete(r.system, a.systemID)
		}
	}
}

// halt stops taking events and cancels the actor's timers.
func (a *Actor) halt() {
	if a.systemID != "" {
		if r := a.root(); r.system[a.systemID] == a {
			delete(r.system, a.systemID)
		}
	}
	a.stopped = true
	a.mailbox = nil
	for _, t := range a.timers {
		a.clock.ClearTimeout(t.tid)
	}
	a.timers = a.timers[:0]
}

// Stop stops the actor and its children: its status becomes stopped
// (unless it is already done or failed) and it takes no more events.
func (a *Actor) Stop() {
	if a.m == nil {
		if a.status == StatusActive && !a.stopped {
			a.status = StatusStopped
			if a.cleanup != nil {
				a.cleanup()
			}
		}
		a.halt()
		return
	}
	if a.snap.Status == StatusActive {
		a.snap = a.snap.withStatus(StatusStopped, nil, nil)
	}
	a.halt()
	for _, id := range a.snap.Children() {
		if c := a.snap.Child(id); c != nil {
			c.Stop()
		}
	}
}

type actorTimer struct {
	id    string
	tid   TimerID
	event Event
	due   float64
	self  bool // the event goes to the actor itself
	// Where else it goes: an actor, or an actor by its path from the root
	// (ActorAt), found when the timer fires.
	to   *Actor
	path string
}

// schedule sets a timer for a delayed event to the actor itself, or to
// another: to, or the actor at path (ActorAt), found when the timer fires.
func (a *Actor) schedule(id string, ev Event, to *Actor, path string, delay float64) {
	self := to == nil && path == ""
	tid := a.clock.SetTimeout(func() {
		a.dropTimer(id)
		dest := to
		switch {
		case self:
			dest = a
		case path != "":
			dest = a.root().ActorAt(path)
		}
		if dest != nil {
			dest.Send(ev)
		}
	}, delay)
	t := actorTimer{id: id, tid: tid, event: ev, due: a.clock.Now() + delay, self: self, to: to, path: path}
	// A second timer with the same id replaces the first in the table but
	// does not clear it, as in XState's scheduler.
	for i := range a.timers {
		if a.timers[i].id == id {
			a.timers[i] = t
			return
		}
	}
	a.timers = append(a.timers, t)
}

// PendingTimers returns the actor's pending delayed events, and those of
// its child machines (and theirs) with their paths, for a server that
// persists them. An event for an actor that is no longer in the tree is
// left out.
func (a *Actor) PendingTimers() []PendingTimer {
	var out []PendingTimer
	for _, t := range a.timers {
		pt := PendingTimer{ID: t.id, Event: t.event, Due: t.due}
		switch {
		case t.self:
		case t.path != "":
			pt.To = t.path
		default:
			if pt.To = t.to.treePath(); pt.To == "" {
				continue
			}
		}
		out = append(out, pt)
	}
	if a.snap == nil {
		return out
	}
	for _, id := range a.snap.Children() {
		c := a.snap.Child(id)
		if c == nil || c.m == nil || c.stopped {
			continue
		}
		for _, t := range c.PendingTimers() {
			t.Path = append([]string{id}, t.Path...)
			out = append(out, t)
		}
	}
	return out
}

// treePath is the actor's path from the root of its tree, as ActorAt reads
// it ("/" for the root), or "" when it is no longer in the tree.
func (a *Actor) treePath() string {
	var ids []string
	for x := a; x.parent != nil; x = x.parent {
		if x.parent.snap == nil || x.parent.snap.Child(x.ID) != x {
			return ""
		}
		ids = append(ids, x.ID)
	}
	slices.Reverse(ids)
	return "/" + strings.Join(ids, "/")
}

// ActorAt returns the actor of a tree path ("/" for the actor itself, the
// root; "/a/b" for its child a's child b), or nil.
func (a *Actor) ActorAt(path string) *Actor {
	rest, ok := strings.CutPrefix(path, "/")
	if !ok {
		return nil
	}
	if rest == "" {
		return a
	}
	return a.Descendant(strings.Split(rest, "/"))
}

// Descendant returns the child actor a path of ids leads to, from the
// actor's children down (nil path: the actor itself), or nil.
func (a *Actor) Descendant(path []string) *Actor {
	for _, id := range path {
		if a == nil || a.snap == nil {
			return nil
		}
		a = a.snap.Child(id)
	}
	return a
}

func (a *Actor) dropTimer(id string) {
	for i := range a.timers {
		if a.timers[i].id == id {
			a.timers = append(a.timers[:i], a.timers[i+1:]...)
			return
		}
	}
}

// sendSnapshot tells the parent the actor's snapshot (invoke onSnapshot).
func (a *Actor) sendSnapshot() {
	if a.parent == nil {
		return
	}
	a.parent.Send(Event{Type: "xstate.snapshot." + a.ID, Data: map[string]any{"snapshot": a.SnapshotValue()}})
}

// SnapshotValue returns the actor's snapshot as a JSON-like value: status,
// context, value (machines), output and error.
func (a *Actor) SnapshotValue() map[string]any {
	if a.m != nil {
		s := a.snap
		v := map[string]any{"status": s.Status.String(), "value": s.Value(), "context": s.Context}
		if s.Status == StatusDone {
			v["output"] = s.Output()
		}
		if s.Status == StatusError {
			v["error"] = s.Err()
		}
		return v
	}
	v := map[string]any{"status": a.status.String()}
	// As XState's snapshots of these: a callback's input, a promise's
	// while it runs; no context.
	switch a.logic.(type) {
	case *PromiseLogic:
		if a.input != nil && a.status == StatusActive {
			v["input"] = a.input
		}
	case *CallbackLogic:
		if a.input != nil {
			v["input"] = a.input
		}
	default:
		v["context"] = a.state
	}
	if a.status == StatusDone {
		v["output"] = a.output
	}
	if a.status == StatusError {
		v["error"] = a.err
	}
	return v
}

// startLogic starts a child that is not a machine.
func (a *Actor) startLogic() {
	if a.status != StatusActive {
		a.finish()
		return
	}
	switch l := a.logic.(type) {
	case *PromiseLogic:
		err := l.Start(a, a.input, func(out any, err error) {
			if a.opts.HoldPromises {
				return
			}
			a.queueMicrotask(func() {
				if a.status != StatusActive || a.stopped {
					return
				}
				if err != nil {
					a.status, a.err = StatusError, err
				} else if _, undef := out.(Undefined); undef {
					a.status, a.output, a.noOutput = StatusDone, nil, true
				} else {
					a.status, a.output = StatusDone, out
				}
				a.finish()
			})
		})
		if err != nil && a.status == StatusActive {
			a.status, a.err = StatusError, err
			a.finish()
			return
		}
		a.startedSnapshot()
	case *CallbackLogic:
		sendBack := func(ev Event) {
			if a.status == StatusStopped || a.parent == nil {
				return
			}
			a.parent.Send(ev)
		}
		receive := func(f func(Event) error) { a.receivers = append(a.receivers, f) }
		cleanup, err := l.Start(a, a.input, sendBack, receive)
		a.cleanup = cleanup
		if err != nil {
			a.status, a.err = StatusError, err
			a.finish()
			return
		}
		a.startedSnapshot()
	case *TransitionLogic:
		if a.sync {
			a.sendSnapshot()
		}
	case *ObservableLogic:
		a.subscribe(l)
		if a.status != StatusActive {
			return
		}
	}
	a.drain()
}

// startedSnapshot tells the parent of a synced promise or callback actor
// its snapshot once it has started, as XState's Actor.start does: after
// the events a callback sends back as it starts, before a promise's
// outcome (a microtask), and only while the actor is active.
func (a *Actor) startedSnapshot() {
	if a.sync && a.status == StatusActive && !a.stopped {
		a.sendSnapshot()
	}
}

// subscribe starts an observable actor: what the observable reports is the
// actor's context, or events for its parent; complete and error end it.
func (a *Actor) subscribe(l *ObservableLogic) {
	if a.sync && !l.Events {
		a.sendSnapshot() // the initial snapshot, with no context yet
	}
	var unsubscribe func()
	ended := false
	end := func() {
		if unsubscribe != nil {
			unsubscribe()
			unsubscribe = nil
		}
	}
	next := func(v any) {
		if a.status != StatusActive || a.stopped {
			return
		}
		if l.Events {
			if obj, ok := v.(map[string]any); ok && a.parent != nil {
				if ev, ok := EventFromObject(obj); ok {
					a.parent.Send(ev)
				}
			}
			return
		}
		a.state = v
		if a.sync {
			a.sendSnapshot()
		}
	}
	stop := func(st Status, err error) {
		if a.status != StatusActive || a.stopped {
			return
		}
		a.status, a.err = st, err
		ended = true
		end()
		a.finish()
	}
	cleanup, err := l.Subscribe(a, a.input, next, func(err error) { stop(StatusError, err) }, func() { stop(StatusDone, nil) })
	if err != nil {
		if a.status == StatusActive {
			a.status, a.err = StatusError, err
			a.finish()
		}
		return
	}
	unsubscribe = cleanup
	if ended {
		end() // it ended while it subscribed
		return
	}
	a.cleanup = end
}

// processLogic gives an event to a child that is not a machine.
func (a *Actor) processLogic(ev Event) {
	if a.status != StatusActive {
		return
	}
	switch l := a.logic.(type) {
	case *CallbackLogic:
		for _, r := range a.receivers {
			if err := r(ev); err != nil {
				a.status, a.err = StatusError, err
				a.finish()
				return
			}
		}
	case *TransitionLogic:
		st, err := l.Transition(a, a.state, ev)
		if err != nil {
			a.status, a.err = StatusError, err
			a.finish()
			return
		}
		a.state = st
		if a.sync {
			a.sendSnapshot()
		}
	}
}

// MaxMailboxEvents bounds the events an actor processes for one Send
// (those sent to it meanwhile, by itself or by other actors, wait in its
// mailbox). XState has no bound and hangs on actors that send to
// themselves or to each other without end (a sendTo whose target is
// null sends to self); stategate stops the actor with ErrLoop instead.
const MaxMailboxEvents = 100_000

// startOrder orders the effects of an actor's initial step as XState
// runs them when the actor starts: its custom actions (and logs) first,
// then what XState's built-in actions defer once more (emitted events,
// sends, timers, cancels, children's starts and stops). A custom action
// that throws stops the actor before any of those.
func startOrder(effects []Effect) []Effect {
	// Most often already in that order: then no copy (the slice may be a
	// machine's cached initial effects, shared by its actors).
	first := func(e Effect) bool { return e.Kind == EffectExec || e.Kind == EffectLog }
	sorted, seenLater := true, false
	for _, e := range effects {
		if !first(e) {
			seenLater = true
		} else if seenLater {
			sorted = false
			break
		}
	}
	if sorted {
		return effects
	}
	out := make([]Effect, 0, len(effects))
	for _, e := range effects {
		if first(e) {
			out = append(out, e)
		}
	}
	for _, e := range effects {
		if !first(e) {
			out = append(out, e)
		}
	}
	return out
}

// enterTree notes a call into the actor's tree and returns its root,
// whose leaveTree ends the call: the outermost call's end delivers the
// promise outcomes that waited (see queueMicrotask).
func (a *Actor) enterTree() *Actor {
	r := a.root()
	r.calls++
	return r
}

func (a *Actor) leaveTree() {
	a.calls--
	if a.calls > 0 || a.flushing {
		return
	}
	a.flushing = true
	for len(a.microtasks) > 0 {
		f := a.microtasks[0]
		a.microtasks = a.microtasks[1:]
		a.calls++
		f()
		a.calls--
	}
	a.microtasks = nil
	a.flushing = false
}

// queueMicrotask runs f once the calls into the tree in progress end, as
// a promise's reactions run after the code that settled it: a promise
// child's outcome reaches its parent after the siblings that start in
// the same step (a callback's sendBack comes first, as in XState). With
// no call in progress, f runs at once.
func (a *Actor) queueMicrotask(f func()) {
	r := a.root()
	if r.calls == 0 {
		f()
		return
	}
	r.microtasks = append(r.microtasks, f)
}

// Undefined is JavaScript's undefined where Go code must tell it from
// null: a promise's output (its done event then has no output).
type Undefined struct{}

// root returns the root of the actor's tree.
func (a *Actor) root() *Actor {
	for a.parent != nil {
		a = a.parent
	}
	return a
}

// System returns the actor of the tree registered under a system id (an
// invoke's or a spawn's systemId), or nil: XState's system.get.
func (a *Actor) System(systemID string) *Actor {
	return a.root().system[systemID]
}

// register enters the actor in its tree's actor system under systemID; an
// id another live actor holds is an error, as in XState.
func (a *Actor) register(systemID string) error {
	r := a.root()
	if other := r.system[systemID]; other != nil && other != a {
		//lint:ignore ST1005 XState's own wording, which traces and users see
		return fmt.Errorf("Actor with system ID '%s' already exists.", systemID)
	}
	if r.system == nil {
		r.system = map[string]*Actor{}
	}
	r.system[systemID] = a
	a.systemID = systemID
	return nil
}
