package interp

// Actor runs a machine: it holds the current snapshot, processes events one
// at a time (events sent while one is processed wait in a mailbox), carries
// out the effects of each step, and keeps the timers of delayed events on a
// Clock. An Actor is not safe for concurrent use: one goroutine drives it.
type Actor struct {
	ID string

	m       *Machine
	snap    *Snapshot
	clock   Clock
	opts    ActorOptions
	started bool
	stopped bool
	busy    bool
	mailbox []Event
	pending []Effect     // effects of the initial snapshot, run by Start
	timers  []actorTimer // pending delayed events
	seq     int
	scratch []uint64 // reused by steps for temporary node sets
	effects []Effect // reused by steps: effects are carried out at once
	queue   []Event  // reused by steps for the internal queue
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
	// ID names the actor ("" for the machine id).
	ID string
}

// NewActor creates an actor and computes its initial snapshot (an error in
// doing so gives a snapshot with status error). Start runs it.
func NewActor(m *Machine, opts ActorOptions) *Actor {
	a := &Actor{ID: opts.ID, m: m, clock: opts.Clock, opts: opts}
	if a.ID == "" {
		a.ID = m.ID
	}
	if a.clock == nil {
		a.clock = NewSimClock()
	}
	if opts.Snapshot != nil {
		a.snap = opts.Snapshot
		return a
	}
	snap, effects, err := m.initial(a, opts.Input)
	if err != nil {
		snap = (&Snapshot{Machine: m, cfg: m.emptyConfig}).withStatus(StatusError, nil, err)
	}
	a.snap = snap
	a.pending = effects
	return a
}

// Machine returns the actor's machine.
func (a *Actor) Machine() *Machine { return a.m }

// Snapshot returns the current snapshot.
func (a *Actor) Snapshot() *Snapshot { return a.snap }

// Clock returns the actor's clock.
func (a *Actor) Clock() Clock { return a.clock }

// Start runs the deferred effects of the initial snapshot (custom entry
// actions, timers) and lets the actor take events.
func (a *Actor) Start() {
	if a.started {
		return
	}
	a.started = true
	effects := a.pending
	a.pending = nil
	a.update(a.snap, effects)
}

// Send processes an event. Events sent while the actor is processing one
// are queued; events sent to an actor that is not active are ignored.
func (a *Actor) Send(ev Event) {
	if !a.started || a.stopped {
		return
	}
	if a.busy {
		a.mailbox = append(a.mailbox, ev)
		return
	}
	a.busy = true
	a.process(ev)
	for len(a.mailbox) > 0 && !a.stopped {
		ev := a.mailbox[0]
		a.mailbox = a.mailbox[1:]
		a.process(ev)
	}
	a.mailbox = nil
	a.busy = false
}

func (a *Actor) process(ev Event) {
	next, effects, err := a.m.transition(a, a.snap, ev)
	if err != nil {
		a.snap = a.snap.withStatus(StatusError, nil, err)
		a.halt()
		return
	}
	a.update(next, effects)
}

// update installs a snapshot and carries out its effects, as XState's
// Actor.update: an effect that fails puts the snapshot in status error.
func (a *Actor) update(s *Snapshot, effects []Effect) {
	a.snap = s
	for i, e := range effects {
		if err := a.effect(e); err != nil {
			a.snap = s.withStatus(StatusError, nil, err)
			_ = effects[i:]
			break
		}
	}
	if a.snap.Status != StatusActive {
		a.halt()
	}
}

func (a *Actor) effect(e Effect) error {
	switch e.Kind {
	case EffectExec:
		return e.exec()
	case EffectSchedule:
		ev := e.Event
		id := e.ID
		tid := a.clock.SetTimeout(func() {
			a.dropTimer(id)
			a.Send(ev)
		}, e.Delay)
		// A second timer with the same id replaces the first in the
		// table but does not clear it, as in XState's scheduler.
		for i := range a.timers {
			if a.timers[i].id == id {
				a.timers[i].tid = tid
				return nil
			}
		}
		a.timers = append(a.timers, actorTimer{id, tid})
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
			a.opts.OnEmit(e.Event)
		}
	case EffectLog:
		if a.opts.OnLog != nil {
			a.opts.OnLog(e.Label, e.Value)
		}
	}
	return nil
}

// halt stops taking events once the snapshot is no longer active, and
// cancels the actor's timers.
func (a *Actor) halt() {
	a.stopped = true
	a.mailbox = nil
	for _, t := range a.timers {
		a.clock.ClearTimeout(t.tid)
	}
	a.timers = a.timers[:0]
}

type actorTimer struct {
	id  string
	tid TimerID
}

func (a *Actor) dropTimer(id string) {
	for i := range a.timers {
		if a.timers[i].id == id {
			a.timers = append(a.timers[:i], a.timers[i+1:]...)
			return
		}
	}
}

// Stop stops the actor: its status becomes stopped (unless it is already
// done or failed) and it takes no more events.
func (a *Actor) Stop() {
	if a.snap.Status == StatusActive {
		s := a.snap.clone()
		s.Status = StatusStopped
		a.snap = s
	}
	a.halt()
}
