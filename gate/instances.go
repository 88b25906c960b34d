package gate

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stategate/stategate/interp"
	"github.com/stategate/stategate/store"
)

// Instances keeps the instances of a set of workflows in a store: it
// loads an instance (from a cache, else the store, else afresh), runs an
// event on it under the event deadline, stores the new snapshot with its
// audit entry, fires its timers when they fall due, and runs one event
// at a time per instance (events on different instances run in
// parallel). It knows nothing of MCP: a Gate serves its workflows as
// tools, and Go code sends them events directly (Send).
type Instances struct {
	store   store.Store
	log     *slog.Logger
	timeout time.Duration

	// workflows are the workflows served, by id, replaced whole.
	workflows atomic.Pointer[map[string]*Workflow]

	locks keyedMutex

	cacheMu sync.Mutex
	cache   map[store.Key]*instance

	sched *scheduler

	// run names this process in the intents it writes (store.Intent.Run).
	run string

	// changed, when set, is told of every instance that changed (a call,
	// a timer, a Send): the gate tells the sessions that see it.
	changed func(ctx context.Context, w *Workflow, handle string)

	// watchers are told of every change in the store (Subscribe).
	watchers listeners[Change]
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
}

// NewInstances makes Instances with no workflow yet (see SetWorkflows).
func NewInstances(o InstancesOptions) *Instances {
	x := &Instances{store: o.Store, log: o.Logger, timeout: o.EventTimeout, cache: map[store.Key]*instance{}, sched: newScheduler(), run: rand.Text()[:16]}
	if x.store == nil {
		x.store = store.NewMemory()
	}
	if x.log == nil {
		x.log = slog.Default()
	}
	if x.timeout <= 0 {
		x.timeout = DefaultEventTimeout
	}
	x.workflows.Store(&map[string]*Workflow{})
	return x
}

// Store returns the store the instances are kept in.
func (x *Instances) Store() store.Store { return x.store }

// workflow returns a served workflow by id, nil when none.
func (x *Instances) workflow(id string) *Workflow { return (*x.workflows.Load())[id] }

// SetWorkflows replaces the workflows whose instances are kept, for
// Instances used without a Gate (a Gate's SetWorkflows sets them for its
// own). Two workflows of one id are an error.
func (x *Instances) SetWorkflows(ws ...*Workflow) error {
	m := make(map[string]*Workflow, len(ws))
	for _, w := range ws {
		if _, dup := m[w.ID]; dup {
			return fmt.Errorf("%w: two workflows are named %q", ErrToolClash, w.ID)
		}
		m[w.ID] = w
	}
	x.setWorkflows(m)
	return nil
}

// setWorkflows replaces the workflows served.
func (x *Instances) setWorkflows(ws map[string]*Workflow) { x.workflows.Store(&ws) }

// notify tells whom it concerns that an instance changed.
func (x *Instances) notify(ctx context.Context, w *Workflow, handle string) {
	if x.changed != nil {
		x.changed(context.WithoutCancel(ctx), w, handle)
	}
}

// instance is a loaded workflow instance: an immutable snapshot at a
// version of the store, and what it allows (computed once).
type instance struct {
	m       *Workflow
	handle  string
	snap    *interp.Snapshot
	version uint64        // 0: not stored yet
	timers  []store.Timer // pending delayed events
	// migrated is set when the stored state no longer existed in the
	// machine; the next save records it in the audit trail.
	migrated *store.Migration

	// v is what the instance allows, as computed for vFor (what the
	// gate served then), under vmu.
	vmu  sync.Mutex
	v    view
	vFor *served
}

// maxCached bounds the instances kept in memory.
const maxCached = 1 << 14

// load returns an instance: from the cache, else restored from the store,
// else started afresh (its entry actions run) and not stored yet. The
// cache is authoritative: this process is the only writer of its store.
func (x *Instances) load(ctx context.Context, m *Workflow, handle string) (*instance, error) {
	key := instanceKey(m, handle)
	x.cacheMu.Lock()
	in := x.cache[key]
	x.cacheMu.Unlock()
	if in != nil && in.m == m {
		return in, nil
	}
	rec, version, err := x.store.Load(ctx, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		snap, timers, err := x.fresh(ctx, m)
		if err != nil {
			return nil, err
		}
		in = &instance{m: m, handle: handle, snap: snap, timers: timers}
	case err == nil && rec.IsReset():
		// Reset by an operator: it starts afresh, and its version goes
		// on from the reset's.
		snap, timers, err := x.fresh(ctx, m)
		if err != nil {
			return nil, err
		}
		in = &instance{m: m, handle: handle, snap: snap, version: version, timers: timers}
	case err != nil:
		return nil, err
	default:
		var p interp.Persisted
		if err := json.Unmarshal(rec.Snapshot, &p); err != nil {
			return nil, fmt.Errorf("instance %s/%s: %w", m.ID, handle, err)
		}
		// A machine file that changed may have lost the instance's state:
		// the instance moves to the nearest surviving ancestor's initial
		// state, and that is logged, never silent.
		var migrated *store.Migration
		if pruned, cut := m.Machine.Prune(p.Value); cut {
			migrated = &store.Migration{From: p.Value.Plain(), FromVersion: rec.MachineVersion, ToVersion: m.Version}
			p.Value = pruned
		}
		snap, err := m.Machine.Restore(&p)
		if err != nil {
			return nil, fmt.Errorf("instance %s/%s: %w", m.ID, handle, err)
		}
		if migrated != nil {
			migrated.To = snap.Value()
			// The states as the status tool shows them: the restored
			// one, not the pruned value ({} for the initial state).
			from, _ := json.Marshal(migrated.From)
			if s, ok := migrated.From.(string); ok {
				from = []byte(s)
			}
			x.log.Warn("instance migrated: its state no longer exists in the machine",
				"machine", m.ID, "handle", handle, "from", string(from), "to", stateString(snap),
				"machineVersion", m.Version, "storedWith", rec.MachineVersion)
		}
		in = &instance{m: m, handle: handle, snap: snap, version: version, timers: rec.Timers, migrated: migrated}
	}
	x.remember(key, in)
	return in, nil
}

func (x *Instances) remember(key store.Key, in *instance) {
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
// loaded, and returns the stored instance.
func (x *Instances) save(ctx context.Context, in *instance, snap *interp.Snapshot, timers []store.Timer, audit *store.AuditEntry) (*instance, error) {
	data, err := snap.MarshalJSON() // as json.Marshal writes it, without its second pass
	if err != nil {
		return nil, err
	}
	key := instanceKey(in.m, in.handle)
	if audit == nil && in.migrated != nil {
		audit = &store.AuditEntry{Tool: "(migration)"}
	}
	if audit != nil {
		audit.Migrated = in.migrated
		audit.Time = time.Now()
		audit.Machine, audit.MachineVersion, audit.Handle = in.m.ID, in.m.Version, in.handle
		audit.From, audit.To = in.snap.Value(), snap.Value()
	}
	rec := store.Record{Snapshot: data, MachineVersion: in.m.Version, Timers: timers, Audit: audit}
	v, err := x.store.Save(ctx, key, rec, in.version)
	if err != nil {
		x.forget(key) // reload from the store next time
		return nil, err
	}
	next := &instance{m: in.m, handle: in.handle, snap: snap, version: v, timers: timers}
	x.remember(key, next)
	x.sched.set(key, timers)
	x.watchers.tell(Change{Workflow: in.m.ID, Handle: in.handle})
	return next, nil
}

// fresh starts a new instance (its entry actions run) and returns its
// snapshot and timers; an error when its start did not end within the
// event deadline, or ctx ended first.
func (x *Instances) fresh(ctx context.Context, m *Workflow) (*interp.Snapshot, []store.Timer, error) {
	ctx, cancel := x.eventContext(ctx)
	defer cancel()
	a := interp.NewActor(m.Machine, interp.ActorOptions{ID: m.ID, Clock: newWallClock(), Context: ctx})
	a.Start()
	snap, timers := detached(a), storedTimers(a.PendingTimers())
	a.Stop()
	if err := snap.Err(); errors.Is(err, interp.ErrStopped) {
		return nil, nil, fmt.Errorf("starting the %s workflow: %w", m.ID, err)
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

// stepResult is what an event did to an instance.
type stepOutcome struct {
	snap    *interp.Snapshot
	timers  []store.Timer
	emitted []map[string]any
	// crash is set when the engine panicked (a bug of stategate's): the
	// outcome is then the instance as it was.
	crash error
}

// step runs an event on an instance, with its pending timers, on the wall
// clock (timers fire through the gate's scheduler, not the actor's). A
// timer that fires (fired) is left out of them, and its event goes to the
// actor of the instance it is for (a child's own timer, a delayed send).
// The event's work is bounded by the event deadline and by ctx (a request
// whose client went away): stopped, the snapshot has status error and an
// error wrapping interp.ErrStopped, and the caller keeps the instance.
func (x *Instances) step(ctx context.Context, in *instance, ev interp.Event, fired *store.Timer) (out stepOutcome) {
	ctx, cancel := x.eventContext(ctx)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			// A bug of the engine must not take the server down, nor
			// change the instance: the event is refused.
			x.log.Error("internal error while running a machine; the instance keeps its state",
				"machine", in.m.ID, "handle", in.handle, "event", ev.Type, "panic", r, "stack", string(debug.Stack()))
			out = stepOutcome{snap: in.snap, timers: in.timers, crash: fmt.Errorf("internal error in stategate while handling %s: %v", ev.Type, r)}
		}
	}()
	var pending []interp.PendingTimer
	for _, t := range in.timers {
		if fired != nil && t.Same(*fired) {
			continue
		}
		e, _ := interp.EventFromObject(t.Event)
		pending = append(pending, interp.PendingTimer{ID: t.ID, Event: e, Due: float64(t.Due.UnixMilli()), Path: t.Path, To: t.To})
	}
	a := interp.NewActor(in.m.Machine, interp.ActorOptions{
		ID: in.m.ID, Snapshot: in.snap, Timers: pending, Clock: newWallClock(), Context: ctx,
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

// keyedMutex serializes work per instance.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[store.Key]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int
}

func (k *keyedMutex) lock(key store.Key) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[store.Key]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

// instanceKey names an instance of a machine, as the store does.
func instanceKey(m *Workflow, handle string) store.Key {
	return store.Key{Machine: m.ID, Handle: handle}
}

// DefaultEventTimeout is how long one event on an instance may take, all
// its steps included, when Options.EventTimeout is zero: far more than a
// machine's own work takes (a step is microseconds, a call into
// JavaScript at most a second), and less than an MCP client waits.
const DefaultEventTimeout = 5 * time.Second

// eventContext bounds the work of one event on an instance: it ends at
// the event deadline, or when ctx does (a request whose client went
// away).
func (x *Instances) eventContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := x.timeout
	if d <= 0 {
		d = DefaultEventTimeout
	}
	return context.WithTimeoutCause(ctx, d, &deadlineError{d})
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

// ErrFailed is wrapped by the error of an event whose step failed (a guard
// or action threw, the event ran out of time, or stategate itself
// failed): the instance keeps its state.
var ErrFailed = errors.New("the event failed")

// eventError is the error of an event that was rejected or failed, with
// the instance as it was (and stays).
type eventError struct {
	kind, cause error
	in          *instance
}

func (e *eventError) Error() string {
	msg := fmt.Sprintf("%s %s: %v in state %s", e.in.m.ID, e.in.handle, e.kind, stateString(e.in.snap))
	if e.cause != nil {
		msg += ": " + e.cause.Error()
	}
	return msg
}

func (e *eventError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
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
}

func (in *instance) state() *State {
	s := &State{Workflow: in.m.ID, Handle: in.handle, Value: in.snap.Value(), Status: in.snap.Status.String(),
		Context: in.snap.Context, Version: in.version, Timers: in.timers}
	switch in.snap.Status {
	case interp.StatusDone:
		s.Output = in.snap.Output()
	case interp.StatusError:
		if err := in.snap.Err(); err != nil {
			s.Error = err.Error()
		}
	}
	return s
}

// Snapshot returns an instance's state: as stored, or its initial state
// when it has none yet (which is not stored).
func (x *Instances) Snapshot(ctx context.Context, workflow, handle string) (*State, error) {
	w := x.workflow(workflow)
	if w == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownWorkflow, workflow)
	}
	if err := CheckHandle(handle); err != nil {
		return nil, err
	}
	in, err := x.load(ctx, w, handle)
	if err != nil {
		return nil, err
	}
	return in.state(), nil
}

// Send sends an event to an instance, as a call of the event's tool does
// (without the tool's gating: the machine decides), and stores the new
// state, with its audit entry (tool "(send)"), before it returns. An event
// the instance does not take is ErrRejected, one whose step fails
// ErrFailed; either way the instance keeps its state. Sessions that see
// the instance through a Gate are told their tool list changed.
func (x *Instances) Send(ctx context.Context, workflow, handle string, ev interp.Event) (*State, error) {
	w := x.workflow(workflow)
	if w == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownWorkflow, workflow)
	}
	if err := CheckHandle(handle); err != nil {
		return nil, err
	}
	unlock := x.locks.lock(instanceKey(w, handle))
	defer unlock()
	saved, emitted, err := x.apply(ctx, w, handle, ev, &store.AuditEntry{Tool: SendTool, Event: ev.Object()}, nil)
	if err != nil {
		return nil, err
	}
	s := saved.state()
	s.Emitted = emitted
	return s, nil
}

// SendTool is the tool an audit entry of Send names.
const SendTool = "(send)"

// maxSaveRetries bounds the retries of an event whose save found the
// instance changed by someone else (another process, an operator).
const maxSaveRetries = 5

// apply runs an event on an instance whose lock the caller holds: the
// instance is loaded (again at each attempt), check (when given) may
// refuse it with an error returned as it is, the machine must take the
// event (ErrRejected), the step must not fail (ErrFailed), and the new
// snapshot is stored with the audit entry, retried when another writer
// stored the instance meanwhile. Whom it concerns is told (notify).
func (x *Instances) apply(ctx context.Context, w *Workflow, handle string, ev interp.Event, audit *store.AuditEntry, check func(*instance) error) (*instance, []map[string]any, error) {
	for attempt := 0; ; attempt++ {
		in, err := x.load(ctx, w, handle)
		if err != nil {
			return nil, nil, err
		}
		if check != nil {
			if err := check(in); err != nil {
				return nil, nil, err
			}
		}
		snap := in.snap
		if ok, err := snap.Can(ev); err != nil || !ok {
			return nil, nil, &eventError{kind: ErrRejected, cause: err, in: in}
		}
		out := x.step(ctx, in, ev, nil)
		if out.crash != nil {
			return nil, nil, &eventError{kind: ErrFailed, cause: out.crash, in: in}
		}
		if out.snap.Status == interp.StatusError && snap.Status != interp.StatusError {
			cause := out.snap.Err()
			if cause == nil {
				cause = errors.New("the machine failed")
			}
			return nil, nil, &eventError{kind: ErrFailed, cause: cause, in: in}
		}
		entry := *audit
		saved, err := x.save(ctx, in, out.snap, out.timers, &entry)
		if errors.Is(err, store.ErrConflict) && attempt < maxSaveRetries {
			continue
		}
		if err != nil {
			return nil, nil, &saveError{err: err, in: in}
		}
		x.notify(ctx, w, handle)
		return saved, out.emitted, nil
	}
}

// intend writes an intent to an instance's audit trail, whose lock the
// caller holds, before a bound tool's handler runs: the instance is
// stored as it is (started, if it was not yet) with the entry, and the
// intent's version is returned for the entry that settles it.
func (x *Instances) intend(ctx context.Context, w *Workflow, handle, tool, session, protocol, event string, args map[string]any) (uint64, error) {
	in, err := x.load(ctx, w, handle)
	if err != nil {
		return 0, err
	}
	entry := &store.AuditEntry{Tool: tool, Session: session, Intent: &store.Intent{Arguments: args, Event: event, Run: x.run}, Protocol: protocol}
	saved, err := x.save(ctx, in, in.snap, in.timers, entry)
	if err != nil {
		return 0, err
	}
	return saved.version, nil
}

// settle ends an intent that made no transition, with a note of why,
// under the instance's lock.
func (x *Instances) settle(ctx context.Context, w *Workflow, handle, tool, session string, intent uint64, note string) error {
	in, err := x.load(ctx, w, handle)
	if err != nil {
		return err
	}
	_, err = x.save(ctx, in, in.snap, in.timers, &store.AuditEntry{Tool: tool, Session: session, Settles: intent, Note: note})
	return err
}

// inDoubt returns an instance's intents that nothing settled and that no
// call of this process is working on: their side effect may have
// happened, and the machine did not move.
func (x *Instances) inDoubt(ctx context.Context, w *Workflow, handle string) ([]store.AuditEntry, error) {
	trail, err := x.store.Audit(ctx, instanceKey(w, handle), intentWindow)
	if err != nil {
		return nil, err
	}
	var out []store.AuditEntry
	for _, e := range store.Unsettled(trail) {
		if e.Intent.Run != x.run {
			out = append(out, e)
		}
	}
	return out, nil
}

// intentWindow is how far back in an instance's audit trail intents are
// looked for.
const intentWindow = 200

// saveError is the error of an event whose new state could not be
// stored, with the instance as it was.
type saveError struct {
	err error
	in  *instance
}

func (e *saveError) Error() string {
	return fmt.Sprintf("%s %s: the new state cannot be stored: %v", e.in.m.ID, e.in.handle, e.err)
}
func (e *saveError) Unwrap() error { return e.err }
