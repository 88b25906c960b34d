package workflow

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"golang.org/x/time/rate"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
)

// Instances keeps the instances of a set of workflows in a store: it
// loads an instance (from a cache, else the store, else afresh), runs an
// event on it under the event deadline, stores the new snapshot with its
// audit entry before anyone sees it, fires its timers when they fall due,
// and runs one event at a time per instance (events on different
// instances run in parallel). It knows nothing of MCP: a gate serves its
// workflows as tools, and Go code sends them events directly (Send).
type Instances struct {
	store   store.Store
	log     *slog.Logger
	timeout time.Duration
	clock   clockwork.Clock

	// workflows are the workflows served, by id, replaced whole.
	workflows atomic.Pointer[map[string]*Workflow]

	locks keyedMutex

	cacheMu sync.Mutex
	cache   map[store.Key]*Instance

	sched *scheduler

	// run names this process in the intents it writes (store.Intent.Run):
	// the store's run on a store.Shared.
	run string

	// shared is what the instances keep on a store.Shared (replicas:
	// shared.go); nil on a store this process is the only writer of.
	shared *replicas

	// watchers are told of every change of a stored instance (Subscribe).
	watchers listeners[Change]

	// waiting are the calls that wait for an operator's approval, by
	// instance (Approvals).
	waitMu  sync.Mutex
	waiting map[store.Key]*store.Pending

	// loaded is set once the stored instances' timers and waiting calls
	// are known (loadStored).
	loadMu sync.Mutex
	loaded bool

	// The walls of the workflows: at most maxInstances stored each, and
	// created at startRate a second (bursts of startBurst); none when 0.
	// creating counts, by workflow, the creations admitted and not yet
	// saved (so that creations at once never pass the cap), and limiters
	// are the workflows' token buckets, both under limitMu.
	maxInstances int
	startRate    float64
	startBurst   int
	limitMu      sync.Mutex
	creating     map[string]int
	limiters     map[string]*rate.Limiter
}

// setPending records an instance's waiting call (nil: none).
func (x *Instances) setPending(k store.Key, p *store.Pending) {
	x.waitMu.Lock()
	defer x.waitMu.Unlock()
	if p == nil {
		delete(x.waiting, k)
		return
	}
	if x.waiting == nil {
		x.waiting = map[store.Key]*store.Pending{}
	}
	x.waiting[k] = p
}

// Approve approves an instance's waiting call (Hold.Approve), as the
// operator by.
func (x *Instances) Approve(ctx context.Context, workflow, handle, id string, by store.Principal, comment string) (*State, error) {
	return x.settle(ctx, workflow, handle, func(h *Hold) (*Instance, error) { return h.Approve(ctx, id, by, comment) })
}

// Decline declines an instance's waiting call (Hold.Decline), as the
// operator by.
func (x *Instances) Decline(ctx context.Context, workflow, handle, id string, by store.Principal, comment string) (*State, error) {
	return x.settle(ctx, workflow, handle, func(h *Hold) (*Instance, error) { return h.Decline(ctx, id, by, comment) })
}

func (x *Instances) settle(ctx context.Context, workflow, handle string, f func(*Hold) (*Instance, error)) (*State, error) {
	w, err := x.served(workflow, handle)
	if err != nil {
		return nil, err
	}
	h, err := x.Hold(ctx, w, handle)
	if err != nil {
		return nil, err
	}
	defer h.Release()
	in, err := f(h)
	if err != nil {
		return nil, err
	}
	return in.State(), nil
}

// An Approval is a call that waits for an operator's approval.
type Approval struct {
	Workflow, Handle string
	store.Pending
}

// Approvals returns the calls that wait for an operator's approval,
// oldest first (the stored instances are read once, the first time; on a
// store.Shared, the store lists the instances waiting each time).
func (x *Instances) Approvals(ctx context.Context) ([]Approval, error) {
	if x.shared != nil {
		return x.sharedApprovals(ctx)
	}
	if err := x.loadStored(ctx); err != nil {
		return nil, err
	}
	x.waitMu.Lock()
	defer x.waitMu.Unlock()
	out := make([]Approval, 0, len(x.waiting))
	for k, p := range x.waiting {
		out = append(out, Approval{Workflow: k.Machine, Handle: k.Handle, Pending: *p})
	}
	slices.SortFunc(out, func(a, b Approval) int { return a.Time.Compare(b.Time) })
	return out, nil
}

// InstancesOptions configure Instances.
type InstancesOptions struct {
	// Store keeps the instances; a memory store when nil.
	Store store.Store
	// Logger receives the logs; slog.Default() when nil.
	Logger *slog.Logger
	// EventTimeout bounds the work of one event on an instance (a call's,
	// a timer's, an instance's start), all the steps and the events its
	// actors send one another included; DefaultEventTimeout when zero.
	EventTimeout time.Duration
	// Clock tells the time of timers, audit entries and the machines'
	// own clocks (delays, Date-like reads); the wall clock when nil.
	// Tests give a fake one (clockwork.NewFakeClock) and advance it.
	Clock clockwork.Clock
	// MaxInstances bounds the instances stored of each workflow: the
	// save that would create one more (an instance's first save, however
	// it comes: a call of a session or a handle key, a start, an intent,
	// Send) fails with ErrLimit and stores nothing (DefaultMaxInstances
	// when zero; negative: no bound). serve --max-instances.
	MaxInstances int
	// StartRate bounds the instances each workflow creates a second, in
	// bursts of StartBurst (a token bucket): a creation past it fails
	// with ErrLimit and stores nothing (DefaultStartRate when zero;
	// negative: no bound). serve --start-rate.
	StartRate float64
	// StartBurst is the bucket's size (ten seconds of StartRate, at
	// least 1, when zero).
	StartBurst int
	// TimerGrace, on a store.Shared (replicas), is how long past a
	// timer's due time the other replicas leave it to the replica that
	// armed it, which fires it on time; past it, any replica fires it
	// (its armer died). DefaultTimerGrace when zero.
	TimerGrace time.Duration
}

// The defaults of InstancesOptions' walls: far more than the bundled
// workflows make (an instance per invoice, per payment, per session),
// and far less than a client that creates instances in a loop would make
// the store hold (20,000 in 43 s, unbounded before).
const (
	DefaultMaxInstances = 100_000
	DefaultStartRate    = 20 // instances a second, per workflow
)

// ErrLimit is wrapped by the error of a save that would create an
// instance past its workflow's cap (InstancesOptions.MaxInstances) or
// start rate (StartRate): nothing is stored. The error names the limit
// and the serve flag that sets it.
var ErrLimit = errors.New("over the workflow's limit of instances")

// NewInstances makes Instances with no workflow yet (see SetWorkflows).
func NewInstances(o InstancesOptions) *Instances {
	x := &Instances{store: o.Store, log: o.Logger, timeout: o.EventTimeout, clock: o.Clock,
		cache: map[store.Key]*Instance{}, sched: newScheduler(), run: rand.Text()[:16]}
	if x.store == nil {
		x.store = store.NewMemory()
	}
	if x.log == nil {
		x.log = slog.Default()
	}
	if x.timeout <= 0 {
		x.timeout = DefaultEventTimeout
	}
	if x.clock == nil {
		x.clock = clockwork.NewRealClock()
	}
	x.maxInstances, x.startRate, x.startBurst = o.MaxInstances, o.StartRate, o.StartBurst
	switch {
	case x.maxInstances == 0:
		x.maxInstances = DefaultMaxInstances
	case x.maxInstances < 0:
		x.maxInstances = 0
	}
	switch {
	case x.startRate == 0:
		x.startRate = DefaultStartRate
	case x.startRate < 0:
		x.startRate = 0
	}
	if x.startBurst <= 0 {
		x.startBurst = max(1, int(math.Ceil(10*x.startRate)))
	}
	x.creating, x.limiters = map[string]int{}, map[string]*rate.Limiter{}
	x.workflows.Store(&map[string]*Workflow{})
	if sh, ok := x.store.(store.Shared); ok {
		x.share(sh, o)
	}
	return x
}

// CanCreate reports (ErrLimit) whether a workflow may create an instance
// now, without taking the rate's token: a start checks it before it runs
// the machine's entry actions. The save that creates it checks again.
func (x *Instances) CanCreate(ctx context.Context, w *Workflow) error {
	release, err := x.admit(ctx, w, false)
	if err == nil {
		release()
	}
	return err
}

// admit admits the creation of an instance of w (take: its token of the
// rate), or refuses it with ErrLimit; release ends the admission once
// the save is done.
func (x *Instances) admit(ctx context.Context, w *Workflow, take bool) (release func(), err error) {
	if x.maxInstances == 0 && x.startRate == 0 {
		return func() {}, nil
	}
	x.limitMu.Lock()
	defer x.limitMu.Unlock()
	if x.maxInstances > 0 {
		n, err := x.store.Count(ctx, w.ID)
		if err != nil {
			return nil, err
		}
		if n+x.creating[w.ID] >= x.maxInstances {
			return nil, fmt.Errorf("%w: the %s workflow has %d instances stored, its cap (--max-instances, InstancesOptions.MaxInstances): no more are created; those stored go on", ErrLimit, w.ID, x.maxInstances)
		}
	}
	if x.startRate > 0 {
		lim := x.limiters[w.ID]
		if lim == nil {
			lim = rate.NewLimiter(rate.Limit(x.startRate), x.startBurst)
			x.limiters[w.ID] = lim
		}
		now := x.clock.Now()
		if tokens := lim.TokensAt(now); tokens < 1 || take && !lim.AllowN(now, 1) {
			wait := time.Duration((1 - tokens) / x.startRate * float64(time.Second)).Round(time.Millisecond)
			return nil, fmt.Errorf("%w: the %s workflow creates at most %v instances a second, in bursts of %d (--start-rate, InstancesOptions.StartRate): try again in %v", ErrLimit, w.ID, x.startRate, x.startBurst, max(wait, time.Millisecond))
		}
	}
	x.creating[w.ID]++
	return func() {
		x.limitMu.Lock()
		if x.creating[w.ID]--; x.creating[w.ID] == 0 {
			delete(x.creating, w.ID)
		}
		x.limitMu.Unlock()
	}, nil
}

// Store returns the store the instances are kept in.
func (x *Instances) Store() store.Store { return x.store }

// Workflow returns a served workflow by id, nil when none.
func (x *Instances) Workflow(id string) *Workflow { return (*x.workflows.Load())[id] }

// Workflows returns the served workflows, sorted by id.
func (x *Instances) Workflows() []*Workflow {
	m := *x.workflows.Load()
	out := make([]*Workflow, 0, len(m))
	for _, w := range m {
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b *Workflow) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// ErrDuplicate is returned by SetWorkflows for two workflows of one id.
var ErrDuplicate = errors.New("two workflows have one id")

// SetWorkflows replaces the workflows whose instances are kept. Two
// workflows of one id are an error (ErrDuplicate), and nothing changes.
func (x *Instances) SetWorkflows(ws ...*Workflow) error {
	m := make(map[string]*Workflow, len(ws))
	for _, w := range ws {
		if other, dup := m[w.ID]; dup {
			return fmt.Errorf("%w: %q is the id of the workflows of %s and %s", ErrDuplicate, w.ID, origin(other), origin(w))
		}
		m[w.ID] = w
	}
	x.workflows.Store(&m)
	return nil
}

// origin names where a workflow comes from, for errors.
func origin(w *Workflow) string {
	if w.File != "" {
		return w.File
	}
	return "a workflow made in memory"
}

// Instance is a workflow's instance as stored at a version (or as it
// starts, before it is stored): immutable, shared by whoever loads it.
type Instance struct {
	Workflow *Workflow
	Handle   string
	Snapshot *interp.Snapshot
	// Version is its version in the store; 0: not stored yet.
	Version uint64
	// Timers are its pending delayed events.
	Timers []store.Timer
	// Migrated is set when its stored state no longer existed in the
	// machine and it was moved to a surviving one; the next save records
	// it in the audit trail.
	Migrated *store.Migration
	// Pending, when set, is a call that waits for an operator's approval
	// (Hold.Pend): the instance takes no other event from a call or Send
	// until it is settled (Hold.Approve, Hold.Decline); its timers still
	// fire.
	Pending *store.Pending
	// Input is the input it was started with (compact JSON; none for a
	// workflow without meta.input), kept with it: a reset starts it
	// afresh with the same.
	Input json.RawMessage
	// NotStarted is set for an instance of a workflow that needs an input
	// (Workflow.NeedsInput) while none is stored: it takes no event and
	// is never saved but by Hold.Start, which gives it its input. Its
	// Snapshot is the machine's start without input, shown and nothing
	// else.
	NotStarted bool
	// unsaved is set for an instance with no snapshot stored (none yet,
	// or reset): it starts when saved.
	unsaved bool
}

// Key is the instance's key in the store.
func (in *Instance) Key() store.Key { return instanceKey(in.Workflow, in.Handle) }

// maxCached bounds the instances kept in memory.
const maxCached = 1 << 14

// Load returns an instance: from the cache, else restored from the store,
// else as it starts (its entry actions run), which is not stored. The
// cache is authoritative when this process is the only writer of its
// store; on a store.Shared, the change feed keeps it (see shared.go), and
// every write path checks it against the store first (Hold).
func (x *Instances) Load(ctx context.Context, w *Workflow, handle string) (*Instance, error) {
	key := instanceKey(w, handle)
	if in := x.cached(key, w); in != nil {
		return in, nil
	}
	gen := x.shared.gen(key)
	rec, version, err := x.store.Load(ctx, key)
	in, err := x.instance(ctx, w, handle, rec, version, err)
	if err != nil {
		return nil, err
	}
	x.rememberAt(key, in, gen)
	return in, nil
}

// cached returns an instance of w from the cache, nil when none.
func (x *Instances) cached(key store.Key, w *Workflow) *Instance {
	x.cacheMu.Lock()
	in := x.cache[key]
	x.cacheMu.Unlock()
	if in != nil && in.Workflow == w {
		return in
	}
	return nil
}

// instance makes the instance of what the store returned for it (err:
// the load's error): restored, or as it starts when it was never stored
// (store.ErrNotFound) or was reset.
func (x *Instances) instance(ctx context.Context, w *Workflow, handle string, rec store.Record, version uint64, err error) (*Instance, error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return x.unstarted(ctx, w, handle, 0, nil)
	case err == nil && rec.IsReset():
		// Reset by an operator: it starts afresh (with the input it had),
		// and its version goes on from the reset's.
		return x.unstarted(ctx, w, handle, version, rec.Input)
	case err != nil:
		return nil, err
	}
	return x.restore(w, handle, rec, version)
}

// unstarted is an instance with no snapshot stored (none yet, or reset)
// at version, as it starts with input (nothing is stored): NotStarted when
// its workflow needs an input and none is given.
func (x *Instances) unstarted(ctx context.Context, w *Workflow, handle string, version uint64, input json.RawMessage) (*Instance, error) {
	if w.NeedsInput() && len(input) == 0 {
		return &Instance{Workflow: w, Handle: handle, Snapshot: w.notStarted, Version: version, NotStarted: true, unsaved: true}, nil
	}
	snap, timers, err := x.fresh(ctx, w, input)
	if err != nil {
		return nil, err
	}
	return &Instance{Workflow: w, Handle: handle, Snapshot: snap, Version: version, Timers: timers, Input: input, unsaved: true}, nil
}

// restore makes the instance of a stored record. A machine file that
// changed may have lost the instance's state: the instance moves to the
// nearest surviving ancestor's initial state, and that is logged, never
// silent.
func (x *Instances) restore(w *Workflow, handle string, rec store.Record, version uint64) (*Instance, error) {
	var p interp.Persisted
	if err := json.Unmarshal(rec.Snapshot, &p); err != nil {
		return nil, fmt.Errorf("instance %s/%s: %w", w.ID, handle, err)
	}
	var migrated *store.Migration
	if pruned, cut := w.Machine.Prune(p.Value); cut {
		migrated = &store.Migration{From: p.Value.Plain(), FromVersion: rec.MachineVersion, ToVersion: w.Version}
		p.Value = pruned
	}
	snap, err := w.Machine.Restore(&p)
	if err != nil {
		return nil, fmt.Errorf("instance %s/%s: %w", w.ID, handle, err)
	}
	if migrated != nil {
		migrated.To = snap.Value()
		// The states as the status tool shows them: the restored one,
		// not the pruned value ({} for the initial state).
		from, _ := json.Marshal(migrated.From)
		if s, ok := migrated.From.(string); ok {
			from = []byte(s)
		}
		x.log.Warn("instance migrated: its state no longer exists in the machine",
			"machine", w.ID, "handle", handle, "from", string(from), "to", StateString(snap),
			"machineVersion", w.Version, "storedWith", rec.MachineVersion)
	}
	return &Instance{Workflow: w, Handle: handle, Snapshot: snap, Version: version, Timers: rec.Timers, Migrated: migrated, Pending: rec.Pending, Input: rec.Input}, nil
}

func (x *Instances) remember(key store.Key, in *Instance) {
	x.cacheMu.Lock()
	defer x.cacheMu.Unlock()
	if len(x.cache) >= maxCached {
		for k := range x.cache { // drop an arbitrary eighth
			delete(x.cache, k)
			if len(x.cache) < maxCached*7/8 {
				break
			}
		}
	}
	x.cache[key] = in
}

func (x *Instances) forget(key store.Key) {
	x.cacheMu.Lock()
	delete(x.cache, key)
	x.cacheMu.Unlock()
}

// save stores an instance's new snapshot if nobody changed it since it was
// loaded, with its pending approval (if any), and returns the stored
// instance. Subscribers are told.
func (x *Instances) save(ctx context.Context, in *Instance, snap *interp.Snapshot, timers []store.Timer, pending *store.Pending, audit *store.AuditEntry) (*Instance, error) {
	if in.NotStarted {
		return nil, notStarted(in)
	}
	data, err := snap.MarshalJSON() // as json.Marshal writes it, without its second pass
	if err != nil {
		return nil, err
	}
	key := in.Key()
	if audit == nil && in.Migrated != nil {
		audit = &store.AuditEntry{Tool: "(migration)"}
	}
	now := x.clock.Now()
	if audit != nil {
		audit.Migrated = in.Migrated
		audit.Time = now
		audit.Machine, audit.MachineVersion, audit.Handle = in.Workflow.ID, in.Workflow.Version, in.Handle
		audit.To = snap.Value()
		if in.Snapshot != nil { // (nil: a start with an input, from nothing)
			audit.From = in.Snapshot.Value()
		}
		if audit.Intent != nil {
			audit.Intent.Run = x.run
		}
	}
	rec := store.Record{Snapshot: data, MachineVersion: in.Workflow.Version, Updated: now, Timers: timers, Pending: pending, Input: in.Input, Audit: audit}
	if in.Version == 0 {
		// The instance's first save: its creation.
		release, err := x.admit(ctx, in.Workflow, true)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	if audit != nil && audit.Intent != nil {
		// Other replicas take an intent of a run they know alive for a
		// call under way: this one is, before its intent is seen.
		if err := x.shared.alive(ctx, x.clock.Now()); err != nil {
			return nil, err
		}
	}
	gen := x.shared.gen(key)
	v, err := x.store.Save(ctx, key, rec, in.Version)
	if err != nil {
		x.forget(key) // reload from the store next time
		return nil, err
	}
	next := &Instance{Workflow: in.Workflow, Handle: in.Handle, Snapshot: snap, Version: v, Timers: timers, Pending: pending, Input: in.Input}
	x.rememberAt(key, next, gen)
	x.setTimers(key, timers)
	x.setPending(key, pending)
	x.watchers.tell(context.WithoutCancel(ctx), Change{Workflow: in.Workflow.ID, Handle: in.Handle, Version: v, Moved: snap != in.Snapshot || pending != in.Pending})
	return next, nil
}

// fresh starts a new instance (its entry actions run) and returns its
// snapshot and timers; an error when its start did not end within the
// event deadline, or ctx ended first.
func (x *Instances) fresh(ctx context.Context, w *Workflow, input json.RawMessage) (*interp.Snapshot, []store.Timer, error) {
	var in any
	if len(input) > 0 {
		if err := json.Unmarshal(input, &in); err != nil {
			return nil, nil, fmt.Errorf("starting the %s workflow: its input: %w", w.ID, err)
		}
	}
	ctx, cancel := x.eventContext(ctx)
	defer cancel()
	a := interp.NewActor(w.Machine, interp.ActorOptions{ID: w.ID, Clock: x.actorClock(), Context: ctx, Input: in})
	a.Start()
	snap, timers := detached(a), storedTimers(a.PendingTimers())
	a.Stop()
	if err := snap.Err(); errors.Is(err, interp.ErrStopped) {
		return nil, nil, fmt.Errorf("starting the %s workflow: %w", w.ID, err)
	}
	return snap, timers, nil
}

// detached is an actor's snapshot before it stops, with its children as
// they are persisted rather than actors that stop with it: the next call
// makes them again from it (a child machine resumes, a callback actor
// starts again).
func detached(a *interp.Actor) *interp.Snapshot {
	s := a.Snapshot()
	if d, err := s.Detach(); err == nil {
		return d
	}
	return s // a child that cannot be persisted: saving it fails alike
}

// stepOutcome is what an event did to an instance.
type stepOutcome struct {
	snap    *interp.Snapshot
	timers  []store.Timer
	emitted []map[string]any
	// crash is set when the engine panicked (a bug of stategate's): the
	// outcome is then the instance as it was.
	crash error
}

// step runs an event on an instance, with its pending timers, on the
// instances' clock (timers fire through the scheduler, not the actor's).
// A timer that fires (fired) is left out of them, and its event goes to
// the actor of the instance it is for (a child's own timer, a delayed
// send). The event's work is bounded by the event deadline and by ctx (a
// request whose client went away): stopped, the snapshot has status
// error and an error wrapping interp.ErrStopped, and the caller keeps the
// instance.
func (x *Instances) step(ctx context.Context, in *Instance, ev interp.Event, fired *store.Timer) (out stepOutcome) {
	ctx, cancel := x.eventContext(ctx)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			// A bug of the engine must not take the server down, nor
			// change the instance: the event is refused.
			x.log.Error("internal error while running a machine; the instance keeps its state",
				"machine", in.Workflow.ID, "handle", in.Handle, "event", ev.Type, "panic", r, "stack", string(debug.Stack()))
			out = stepOutcome{snap: in.Snapshot, timers: in.Timers, crash: fmt.Errorf("internal error in stategate while handling %s: %v", ev.Type, r)}
		}
	}()
	var pending []interp.PendingTimer
	for _, t := range in.Timers {
		if fired != nil && t.Same(*fired) {
			continue
		}
		e, _ := interp.EventFromObject(t.Event)
		pending = append(pending, interp.PendingTimer{ID: t.ID, Event: e, Due: float64(t.Due.UnixMilli()), Path: t.Path, To: t.To})
	}
	a := interp.NewActor(in.Workflow.Machine, interp.ActorOptions{
		ID: in.Workflow.ID, Snapshot: in.Snapshot, Timers: pending, Clock: x.actorClock(), Context: ctx,
		OnEmit: func(e interp.Event) { out.emitted = append(out.emitted, e.Object()) },
	})
	a.Start()
	to := a
	if fired != nil {
		// The actor the event goes to; nil when it is gone.
		if fired.To != "" {
			to = a.ActorAt(fired.To)
		} else {
			to = a.Descendant(fired.Path)
		}
	}
	if to != nil {
		to.Send(ev)
	}
	out.snap, out.timers = detached(a), storedTimers(a.PendingTimers())
	a.Stop()
	return out
}

func storedTimers(ts []interp.PendingTimer) []store.Timer {
	if len(ts) == 0 {
		return nil
	}
	out := make([]store.Timer, len(ts))
	for i, t := range ts {
		out[i] = store.Timer{ID: t.ID, Event: t.Event.Object(), Due: time.UnixMilli(int64(t.Due)), Path: t.Path, To: t.To}
	}
	return out
}

// instanceKey names an instance of a workflow, as the store does.
func instanceKey(w *Workflow, handle string) store.Key {
	return store.Key{Machine: w.ID, Handle: handle}
}

// DefaultEventTimeout is how long one event on an instance may take, all
// its steps included, when InstancesOptions.EventTimeout is zero: far
// more than a machine's own work takes (a step is microseconds, a call
// into JavaScript at most a second), and less than an MCP client waits.
const DefaultEventTimeout = 5 * time.Second

// eventContext bounds the work of one event on an instance: it ends at
// the event deadline, or when ctx does (a request whose client went
// away).
func (x *Instances) eventContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, x.timeout, &deadlineError{x.timeout})
}

// deadlineError is the cause of an event stopped at its deadline; it
// wraps context.DeadlineExceeded.
type deadlineError struct{ d time.Duration }

func (e *deadlineError) Error() string {
	return fmt.Sprintf("it ran out of time: the event did not settle within the event deadline of %v", e.d)
}

func (e *deadlineError) Unwrap() error { return context.DeadlineExceeded }

// ErrUnknownWorkflow is returned for a workflow that is not served.
var ErrUnknownWorkflow = errors.New("no such workflow")

// ErrRejected is wrapped by the error of an event that the instance does
// not take in its state (XState's snapshot.can says no): nothing changed.
var ErrRejected = errors.New("the workflow does not take the event now")

// ErrPending is wrapped by the error of an event on an instance whose
// call waits for an operator's approval: nothing changed.
var ErrPending = errors.New("the instance waits for an operator's approval")

// ErrNotStarted is wrapped by the error of an event, or of any save, on
// an instance that needs an input and was not started with one
// (Instance.NotStarted): nothing is stored; the start tool starts it.
var ErrNotStarted = errors.New("the instance is not started: it needs its input")

// ErrStarted is returned by Hold.Start for an instance that is stored
// already (started, or finished): nothing changed.
var ErrStarted = errors.New("the instance is started already")

// notStarted is the error of an event on an instance not started.
func notStarted(in *Instance) error {
	return fmt.Errorf("%s %s: %w (call %s with it)", in.Workflow.ID, in.Handle, ErrNotStarted, in.Workflow.StartTool)
}

// ErrFailed is wrapped by the error of an event whose step failed (a guard
// or action threw, the event ran out of time, or stategate itself
// failed): the instance keeps its state.
var ErrFailed = errors.New("the event failed")

// An EventError is the error of an event that was rejected (ErrRejected)
// or failed (ErrFailed), with the instance as it was, and stays.
type EventError struct {
	// Kind is ErrRejected or ErrFailed.
	Kind error
	// Cause says why, when something did (a guard that threw, the
	// deadline); nil for a plain refusal.
	Cause    error
	Instance *Instance
}

func (e *EventError) Error() string {
	msg := fmt.Sprintf("%s %s: %v in state %s", e.Instance.Workflow.ID, e.Instance.Handle, e.Kind, StateString(e.Instance.Snapshot))
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

func (e *EventError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Cause}
}

// A SaveError is the error of an event whose new state could not be
// stored, with the instance as it was (and stays, unless Err is
// store.ErrOutcomeUnknown).
type SaveError struct {
	Err      error
	Instance *Instance
}

func (e *SaveError) Error() string {
	return fmt.Sprintf("%s %s: the new state cannot be stored: %v", e.Instance.Workflow.ID, e.Instance.Handle, e.Err)
}
func (e *SaveError) Unwrap() error { return e.Err }

// StateString renders a state value for messages: "review", or
// {"a":"x","b":"y"}.
func StateString(s *interp.Snapshot) string {
	v := s.Value()
	if str, ok := v.(string); ok {
		return str
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// State is an instance as Go code sees it.
type State struct {
	Workflow, Handle string
	// Value is the state value, as XState shows it: "review", or
	// {"payment": "pending", "shipping": "packed"}.
	Value any
	// Status is active, done, error or stopped.
	Status  string
	Context any
	// Output is the workflow's output once it is done.
	Output any
	// Error is why the workflow failed, when it did.
	Error string
	// Version is the instance's version in the store (0: not stored yet).
	Version uint64
	// Timers are its pending delayed events.
	Timers []store.Timer
	// Emitted are the events the machine emitted during a Send.
	Emitted []map[string]any
	// Pending is the call that waits for an operator's approval, if any.
	Pending *store.Pending
}

// State returns the instance as Go code sees it.
func (in *Instance) State() *State {
	s := &State{Workflow: in.Workflow.ID, Handle: in.Handle, Value: in.Snapshot.Value(), Status: in.Snapshot.Status.String(),
		Context: in.Snapshot.Context, Version: in.Version, Timers: in.Timers, Pending: in.Pending}
	switch in.Snapshot.Status {
	case interp.StatusDone:
		s.Output = in.Snapshot.Output()
	case interp.StatusError:
		if err := in.Snapshot.Err(); err != nil {
			s.Error = err.Error()
		}
	}
	return s
}

// served returns a served workflow by id and checks a handle, the way
// every public entry point by names does.
func (x *Instances) served(workflow, handle string) (*Workflow, error) {
	w := x.Workflow(workflow)
	if w == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownWorkflow, workflow)
	}
	if err := CheckHandle(handle); err != nil {
		return nil, err
	}
	return w, nil
}

// Snapshot returns an instance's state: as stored, or its initial state
// when it has none yet (which is not stored).
func (x *Instances) Snapshot(ctx context.Context, workflow, handle string) (*State, error) {
	w, err := x.served(workflow, handle)
	if err != nil {
		return nil, err
	}
	in, err := x.Load(ctx, w, handle)
	if err != nil {
		return nil, err
	}
	return in.State(), nil
}

// Send sends an event to an instance, as a call of the event's tool does
// (without the tool's gating: the machine decides), and stores the new
// state, with its audit entry (tool "(send)", principal "system"), before
// it returns. The event carries event.principal "system" unless it sets
// one itself. An event
// the instance does not take is ErrRejected, one whose step fails
// ErrFailed; either way the instance keeps its state. Subscribers (the
// sessions of a gate that see the instance) are told.
func (x *Instances) Send(ctx context.Context, workflow, handle string, ev interp.Event) (*State, error) {
	w, err := x.served(workflow, handle)
	if err != nil {
		return nil, err
	}
	h, err := x.Hold(ctx, w, handle)
	if err != nil {
		return nil, err
	}
	defer h.Release()
	if _, set := ev.Data["principal"]; !set {
		ev.Data = maps.Clone(ev.Data)
		if ev.Data == nil {
			ev.Data = map[string]any{}
		}
		ev.Data["principal"] = eventPrincipal(SystemPrincipal())
	}
	sys := SystemPrincipal()
	saved, emitted, err := h.Apply(ctx, ev, store.AuditEntry{Tool: SendTool, Event: ev.Object(), Principal: &sys}, nil)
	if err != nil {
		return nil, err
	}
	s := saved.State()
	s.Emitted = emitted
	return s, nil
}

// SystemPrincipal is the principal of what the server does itself (a
// timer that fires, an event sent from Go code): its events carry it as
// event.principal, and its audit entries name it.
func SystemPrincipal() store.Principal { return store.Principal{Sub: "system", Auth: "system"} }

// eventPrincipal is a principal as an event carries it: {sub, roles}.
func eventPrincipal(p store.Principal) map[string]any {
	roles := make([]any, len(p.Roles))
	for i, r := range p.Roles {
		roles[i] = r
	}
	return map[string]any{"sub": p.Sub, "roles": roles}
}

// SendTool is the tool an audit entry of Send names.
const SendTool = "(send)"

// TimerTool is the tool an audit entry of a timer that fired names.
const TimerTool = "(timer)"

// maxSaveRetries bounds the retries of an event whose save found the
// instance changed by someone else (another process, an operator).
const maxSaveRetries = 5

// intentWindow is how far back in an instance's audit trail intents are
// looked for.
const intentWindow = 200

// InDoubt returns an instance's intents in doubt, oldest first: calls of
// bound tools (to an upstream server, to a Go function) that began and
// that nothing settled, made by an earlier run of the server (those of
// this process may be calls under way; on a store.Shared, those of any
// replica alive, store.Shared.Live). Their side effect may have
// happened, and the machine did not move.
func (x *Instances) InDoubt(ctx context.Context, workflow, handle string) ([]store.AuditEntry, error) {
	w := x.Workflow(workflow)
	if w == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownWorkflow, workflow)
	}
	trail, err := x.store.Audit(ctx, instanceKey(w, handle), intentWindow)
	if err != nil {
		return nil, err
	}
	var out []store.AuditEntry
	for _, e := range store.Unsettled(trail) {
		if e.Intent.Run != x.run && !x.shared.isLive(ctx, e.Intent.Run, x.clock.Now()) {
			out = append(out, e)
		}
	}
	return out, nil
}

// holdStored holds a stored instance of a served workflow for an
// operator's act (Reset, Delete) and loads it: one never stored is
// store.ErrNotFound. The caller releases the hold.
func (x *Instances) holdStored(ctx context.Context, workflow, handle string) (*Workflow, *Hold, *Instance, error) {
	w, err := x.served(workflow, handle)
	if err != nil {
		return nil, nil, nil, err
	}
	h, err := x.Hold(ctx, w, handle)
	if err != nil {
		return nil, nil, nil, err
	}
	in, err := h.Load(ctx)
	if err == nil && in.Version == 0 {
		err = fmt.Errorf("%s %s: %w", workflow, handle, store.ErrNotFound)
	}
	if err != nil {
		h.Release()
		return nil, nil, nil, err
	}
	return w, h, in, nil
}

// ErrActive is returned by Reset for an instance that is still active.
var ErrActive = errors.New("the instance is still active: only a done or failed instance is reset")

// Reset resets an instance that is done or failed, as `stategate state
// reset` does, but under the instance's hold: the store gets a record
// with no snapshot (the instance starts afresh when next used, its
// version counting on) and an audit entry (tool store.ResetTool, the
// state it left, and the note), its timers are dropped, and subscribers
// are told. An active instance is ErrActive; one that was never stored
// is store.ErrNotFound.
func (x *Instances) Reset(ctx context.Context, workflow, handle, note string) error {
	w, h, in, err := x.holdStored(ctx, workflow, handle)
	if err != nil {
		return err
	}
	defer h.Release()
	if in.Snapshot.Status == interp.StatusActive {
		return fmt.Errorf("%s %s: %w", workflow, handle, ErrActive)
	}
	key := in.Key()
	v, err := store.Reset(ctx, x.store, key, in.Version, in.Snapshot.Value(), in.Input, note)
	x.forget(key)
	if err != nil {
		return err
	}
	x.setTimers(key, nil)
	x.setPending(key, nil)
	x.watchers.tell(context.WithoutCancel(ctx), Change{Workflow: w.ID, Handle: handle, Version: v, Moved: true})
	return nil
}

// Change names an instance whose stored record changed, and its new
// version.
type Change struct {
	Workflow, Handle string
	Version          uint64
	// Moved is set when its snapshot or its waiting call changed (a
	// transition, a timer, a reset, a call put to or settled by an
	// operator); an intent or its settling that made no transition
	// leaves it unset. A change another replica made (on a store.Shared)
	// is told Moved: only its version is known here.
	Moved bool
	// Deleted is set when the instance was deleted (Delete, `stategate
	// state delete` or `prune`; another replica's, as the change feed
	// tells it): Version is 0, and the handle names an instance as it
	// starts, not stored.
	Deleted bool
	// Resync, when set, says only that changes made by other replicas
	// may have been missed (the store's change feed was cut): the other
	// fields are empty, and whatever the subscriber shows of any instance
	// should be read again.
	Resync bool
}

// Subscribe calls f after every change of a stored instance (a call, a
// timer, a Send, an intent and its settling, a reset, a deletion; on a store.Shared,
// those of other replicas too, as the change feed tells them, and Resync
// when it may have missed some), once the change is in the store, with the context of the work that made it (its
// values, not its cancellation). f runs while the instance is held: it
// must return quickly, and must not hold the instance itself (Hold,
// Send, Reset, Delete); loading instances (Load) is fine. The returned function
// ends the subscription.
func (x *Instances) Subscribe(f func(context.Context, Change)) (cancel func()) {
	return x.watchers.add(f)
}
