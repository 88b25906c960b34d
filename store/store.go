// Package store persists workflow instances: each instance's snapshot,
// saved only if nobody saved it since it was loaded (compare-and-swap on a
// version), and its audit trail. It owns the Store interface and what
// every engine shares: the records and audit entries, the sentinel
// errors the gate answers clients by, the limits on keys, records and
// audit entries and their checks (so that every engine refuses the same
// saves), a record's JSON form, and Memory, the engine in memory. It
// knows nothing of how an engine keeps records on disk: the engines are
// packages of their own (store/badger), and each passes the contract
// suite of store/storetest. The gate uses it and knows nothing of the
// engine it is given.
package store

import (
	"bytes"
	"cmp"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"
)

// ErrNotFound is returned by Load for an instance that was never saved.
var ErrNotFound = errors.New("instance not found")

// ErrConflict is returned by Save when the instance changed since the
// version the caller loaded.
var ErrConflict = errors.New("instance changed concurrently")

// ErrTooLarge is returned by Save for a key or a value over the store's
// limits (MaxKeySize, MaxRecordSize), or over an engine's own: nothing is
// written. Load, Delete and Audit return it for a key over MaxKeySize.
var ErrTooLarge = errors.New("too large for the store")

// ErrReadOnly is returned by the writes of a store opened read-only.
var ErrReadOnly = errors.New("the store is open read-only")

// ErrNoSpace is returned by a save (or an engine's open) that would leave
// the store's disk short of space (an engine may keep a reserve): nothing
// is written, reads go on, and saves succeed again once space is freed.
var ErrNoSpace = errors.New("not enough free disk space for the store")

// ErrOutcomeUnknown is returned by a save whose commit failed in a way
// that leaves it unknown whether it was kept (a failed sync, a connection
// lost during the commit): the save may or may not be stored. It wraps
// the cause. An engine whose disk failed then refuses every later write
// (ErrDiskFailed).
var ErrOutcomeUnknown = errors.New("the store's disk failed during the save: its outcome is unknown (it may or may not be on disk)")

// ErrDiskFailed is returned by every write after the disk failed to make
// one durable; the store must be opened again (which shows what the disk
// kept).
var ErrDiskFailed = errors.New("the store's disk failed; it refuses changes until it is opened again")

// Key names an instance: a machine and a handle.
type Key struct {
	Machine string
	Handle  string
}

// MetaMachine is the machine of the keys a server keeps for itself in the
// store, beside the instances (a secret it shares with its other runs):
// no workflow's id has a NUL, and listings of instances leave them out
// (IsMeta).
const MetaMachine = "\x00stategate"

// IsMeta reports whether a key is one a server keeps for itself, not an
// instance's.
func (k Key) IsMeta() bool { return k.Machine == MetaMachine }

// Record is a stored instance.
//
// A record with no snapshot is a reset: the instance starts afresh when
// next used, and its version goes on counting from the reset's (see
// Reset). Its audit trail is kept.
type Record struct {
	// Snapshot is the instance's persisted snapshot (interp.Persisted as
	// JSON); empty for a reset.
	Snapshot json.RawMessage `json:"snapshot"`
	// MachineVersion is the content hash of the machine that made it.
	MachineVersion string `json:"machineVersion"`
	// Updated is when it was saved.
	Updated time.Time `json:"updated"`
	// Timers are the instance's pending delayed events (`after`).
	Timers []Timer `json:"timers,omitempty"`
	// Pending, when set, is a call that waits for an operator's
	// approval: the instance takes no other call until it is settled.
	Pending *Pending `json:"pending,omitempty"`
	// Input is the input the instance was started with (XState's
	// createActor(machine, {input}), as compact JSON), kept so that a
	// reset starts it afresh with the same; empty for none.
	Input json.RawMessage `json:"input,omitempty"`
	// Audit, when set on Save, is appended to the instance's audit trail
	// in the same write.
	Audit *AuditEntry `json:"-"`
}

// A Pending is a call that waits for an operator's approval before its
// event is sent.
type Pending struct {
	// ID names it, for the approval (an operator approves this one, not a
	// later one).
	ID string `json:"id"`
	// Tool is the tool called, Event the event its approval sends (type,
	// principal and arguments).
	Tool  string         `json:"tool"`
	Event map[string]any `json:"event"`
	// Principal is who called.
	Principal Principal `json:"principal"`
	// Roles are the roles of the operators who may approve it: one of
	// them (none: any operator).
	Roles []string `json:"roles,omitempty"`
	// Confirm says what is approved, in words.
	Confirm string `json:"confirm,omitempty"`
	// Time is when it was asked for.
	Time time.Time `json:"time"`
}

// IsReset reports whether the record is a reset (it has no snapshot).
func (r Record) IsReset() bool { return len(r.Snapshot) == 0 }

// Reset records an operator's reset of an instance stored at version:
// a record with no snapshot, so that the instance starts afresh when next
// used, and an audit entry (tool "(reset)", the state it had) in the same
// write. It returns the new version; ErrConflict if the instance changed
// since version.
func Reset(ctx context.Context, s Store, k Key, version uint64, from any, input json.RawMessage, note string) (uint64, error) {
	if note == "" {
		note = "reset by an operator"
	}
	now := time.Now()
	return s.Save(ctx, k, Record{Updated: now, Input: input, Audit: &AuditEntry{
		Time: now, Machine: k.Machine, Handle: k.Handle, Tool: ResetTool, From: from, Note: note,
	}}, version)
}

// ResetTool is the audit trail's tool name for an operator's reset.
const ResetTool = "(reset)"

// Timer is a pending delayed event of an instance.
type Timer struct {
	ID    string         `json:"id"`
	Event map[string]any `json:"event"`
	Due   time.Time      `json:"due"`
	// Path names the child machine whose timer it is, by the ids from the
	// instance's child down (none: the instance itself).
	Path []string `json:"path,omitempty"`
	// To, when set, is the actor the event goes to if not the timer's own,
	// as a path from the instance ("/", "/child", "/child/grandchild").
	To string `json:"to,omitempty"`
}

// Same reports whether two timers are one: the same id for the same
// actor.
func (t Timer) Same(o Timer) bool { return t.ID == o.ID && slices.Equal(t.Path, o.Path) }

// AuditEntry records one accepted transition of an instance.
type AuditEntry struct {
	Time           time.Time      `json:"time"`
	Machine        string         `json:"machine"`
	MachineVersion string         `json:"machineVersion"`
	Handle         string         `json:"handle"`
	Session        string         `json:"session,omitempty"`
	Tool           string         `json:"tool"` // or "(timer)", "(reset)"
	Event          map[string]any `json:"event,omitempty"`
	From           any            `json:"from"`
	To             any            `json:"to"`
	Version        uint64         `json:"version"` // the instance's version after it
	// Migrated, when set, records that the instance's state no longer
	// existed in a new version of its machine and was moved (before this
	// transition).
	Migrated *Migration `json:"migrated,omitempty"`
	// Note says who or what made an entry that no tool call made (an
	// operator's reset), or how an intent ended without a transition.
	Note string `json:"note,omitempty"`
	// Intent, when set, makes the entry an intent: written before a
	// bound tool's handler runs (a call forwarded to an upstream server,
	// a Go function), whose side effects the store cannot undo. The entry
	// that ends it (the transition, or a note that none was made) names
	// its version in Settles; an intent that nothing settles is in doubt:
	// the side effect may have happened, and the machine did not move.
	Intent *Intent `json:"intent,omitempty"`
	// Settles is the version of the intent this entry ends.
	Settles uint64 `json:"settles,omitempty"`
	// Protocol is the MCP protocol revision of the call that made the
	// entry, when a call did.
	Protocol string `json:"protocol,omitempty"`
	// Principal is who made the entry: the caller of a tool (as its
	// transport authenticated it), or "system" for a timer or an
	// upstream's event.
	Principal *Principal `json:"principal,omitempty"`
	// Confirmed, when set, says who confirmed the step before it was
	// taken, and how.
	Confirmed *Confirmation `json:"confirmed,omitempty"`
}

// A Principal is who acts: a subject, its roles, and how it was
// authenticated.
type Principal struct {
	// Sub is the subject: a token's sub, "token" for the shared bearer
	// token, the local user over stdio, "system" for the server itself.
	Sub string `json:"sub"`
	// Roles are its roles (a token's roles claim and the words of its
	// scope; --roles over stdio).
	Roles []string `json:"roles,omitempty"`
	// Auth says how it was authenticated: "jwt", "token", "stdio",
	// "system", "none".
	Auth string `json:"auth,omitempty"`
}

// A Confirmation is a human's yes to a step before it was taken.
type Confirmation struct {
	// By is who confirmed: the principal whose client's human answered,
	// or the operator.
	By Principal `json:"by"`
	// Via is how: "elicitation" (the calling client asked its human) or
	// "operator" (an operator approved it in the inspector).
	Via string `json:"via"`
	// Comment is what the human wrote, if anything.
	Comment string `json:"comment,omitempty"`
}

// An Intent is what a bound tool's call was about to do.
type Intent struct {
	// Arguments are the call's.
	Arguments map[string]any `json:"arguments,omitempty"`
	// Event is the event its success sends.
	Event string `json:"event,omitempty"`
	// Run names the server process that wrote it: an intent of a process
	// that still runs may be a call under way, not one in doubt.
	Run string `json:"run,omitempty"`
}

// Unsettled returns the intents of an audit trail (oldest first) that no
// later entry settles.
func Unsettled(trail []AuditEntry) []AuditEntry {
	settled := map[uint64]bool{}
	for _, e := range trail {
		if e.Settles != 0 {
			settled[e.Settles] = true
		}
	}
	var out []AuditEntry
	for _, e := range trail {
		if e.Intent != nil && !settled[e.Version] {
			out = append(out, e)
		}
	}
	return out
}

// Migration is an instance moved to a surviving state after its machine
// changed.
type Migration struct {
	From        any    `json:"from"`
	To          any    `json:"to"`
	FromVersion string `json:"fromVersion"`
	ToVersion   string `json:"toVersion"`
}

// DefaultAuditRetention is how many audit entries a store keeps per
// instance unless told otherwise.
const DefaultAuditRetention = 1000

// Store keeps instances. Version 0 means "not stored yet": Save with
// version 0 creates the instance, and fails with ErrConflict if it exists.
// Save refuses a key, record or audit entry over the limits with
// ErrTooLarge (see CheckKey, CheckRecord, CheckAuditEntry), writing
// nothing; Load, Delete and Audit refuse such a key too.
type Store interface {
	Load(ctx context.Context, k Key) (rec Record, version uint64, err error)
	Save(ctx context.Context, k Key, rec Record, version uint64) (newVersion uint64, err error)
	Delete(ctx context.Context, k Key) error
	// List returns every stored instance's key, in no order.
	List(ctx context.Context) ([]Key, error)
	// Recent returns the keys of the n newest stored instances (none
	// for n <= 0) of a machine, or of every machine when machine is "":
	// those created last (by their first save, Save at version 0), the
	// last first; later saves do not move an instance. The engine keeps
	// an index of them, changed in the same write as the save that
	// creates an instance and its deletion (no other save writes it, so
	// that saves cost what they did), and what Recent reads grows with n
	// and the number of machines, not with the instances stored.
	Recent(ctx context.Context, machine string, n int) ([]Key, error)
	// Count returns how many instances are stored of a machine, or of
	// every machine when machine is "" (kept with the index).
	Count(ctx context.Context, machine string) (int, error)
	// Audit returns the last n entries of an instance's audit trail,
	// oldest first.
	Audit(ctx context.Context, k Key, n int) ([]AuditEntry, error)
	Close() error
}

// Memory is a Store in memory, for tests and for a server that may forget.
// Its replicas (Replica) are Shared stores on its data, for tests of
// several replicas in one process.
type Memory struct {
	mu    sync.Mutex
	recs  map[Key]memRecord
	audit map[Key][]AuditEntry
	// recent lists each machine's instances, the newest first (its
	// index: the save that creates an instance puts it in front), and
	// seq numbers the creations, to merge the machines' lists.
	recent map[string]*list.List
	seq    uint64
	// Retention bounds the audit entries kept per instance.
	Retention int

	// What its replicas share (memory_shared.go).
	feed Feed
	runs map[string]time.Time // run: expires
}

type memRecord struct {
	rec     Record
	version uint64
	at      *list.Element // in recent[machine]; its Value a memSaved
	// What a Shared store keeps beside the record.
	nextDue    time.Time
	savedBy    string
	intent     OpenIntent
	leaseRun   string
	leaseUntil time.Time // zero: no lease
}

type memSaved struct {
	k   Key
	seq uint64
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{recs: map[Key]memRecord{}, audit: map[Key][]AuditEntry{}, recent: map[string]*list.List{}, Retention: DefaultAuditRetention}
}

// Load returns an instance's record and version.
func (m *Memory) Load(ctx context.Context, k Key) (Record, uint64, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, 0, err
	}
	if err := CheckKey(k); err != nil {
		return Record{}, 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[k]
	if !ok {
		return Record{}, 0, ErrNotFound
	}
	return r.rec, r.version, nil
}

// Save stores a record if the instance is still at version. It refuses
// what every engine refuses (see CheckKey, CheckRecord, CheckAuditEntry),
// storing nothing.
func (m *Memory) Save(ctx context.Context, k Key, rec Record, version uint64) (uint64, error) {
	return m.save(ctx, k, rec, version, "")
}

// save is Save for the replica of a run ("": the Memory itself).
func (m *Memory) save(ctx context.Context, k Key, rec Record, version uint64, run string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := CheckKey(k); err != nil {
		return 0, err
	}
	if rec.Updated.IsZero() {
		rec.Updated = time.Now() // as every engine does, before the record's size is counted
	}
	if err := CheckRecord(rec); err != nil {
		return 0, err
	}
	var entry AuditEntry
	if a := rec.Audit; a != nil {
		entry = *a
		entry.Version = version + 1
		if err := CheckAuditEntry(entry); err != nil {
			return 0, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.recs[k]
	if old.version != version {
		return 0, ErrConflict
	}
	saved := memRecord{version: version + 1, nextDue: NextDueOf(rec.Timers), savedBy: run,
		intent: OpenIntentAfter(old.intent, rec.Audit, version+1)}
	rec.Snapshot = append([]byte(nil), rec.Snapshot...)
	if len(rec.Input) > 0 {
		var buf bytes.Buffer
		_ = json.Compact(&buf, rec.Input) // (valid: CheckRecord)
		rec.Input = buf.Bytes()
	}
	if rec.Audit != nil {
		trail := append(m.audit[k], entry)
		if len(trail) >= 2*m.Retention { // trim in batches, not per save
			trail = append([]AuditEntry(nil), trail[len(trail)-m.Retention:]...)
		}
		m.audit[k] = trail
		rec.Audit = nil
	}
	saved.at = old.at
	if version == 0 {
		l := m.recent[k.Machine]
		if l == nil {
			l = list.New()
			m.recent[k.Machine] = l
		}
		m.seq++
		saved.at = l.PushFront(memSaved{k, m.seq})
	}
	saved.rec = rec
	m.recs[k] = saved
	m.feed.Publish(Change{Key: k, Version: saved.version, NextDue: saved.nextDue, Intent: saved.intent, Run: run})
	return version + 1, nil
}

// Delete removes an instance.
func (m *Memory) Delete(ctx context.Context, k Key) error { return m.delete(k, "") }

// delete is Delete for the replica of a run ("": the Memory itself).
func (m *Memory) delete(k Key, run string) error {
	if err := CheckKey(k); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[k]
	if ok {
		l := m.recent[k.Machine]
		l.Remove(r.at)
		if l.Len() == 0 {
			delete(m.recent, k.Machine)
		}
	}
	delete(m.recs, k)
	delete(m.audit, k)
	if ok {
		m.feed.Publish(Change{Key: k, Run: run})
	}
	return nil
}

// Recent returns the keys of the n newest instances (of a machine, or of
// all), the newest first.
func (m *Memory) Recent(ctx context.Context, machine string, n int) ([]Key, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	lists := []*list.List{m.recent[machine]}
	if machine == "" {
		lists = lists[:0]
		for _, l := range m.recent {
			lists = append(lists, l)
		}
	}
	var saved []memSaved
	for _, l := range lists {
		if l == nil {
			continue
		}
		for e, i := l.Front(), 0; e != nil && i < n; e, i = e.Next(), i+1 {
			saved = append(saved, e.Value.(memSaved))
		}
	}
	return newestKeys(saved, n, func(s memSaved) (Key, uint64) { return s.k, s.seq }), nil
}

// newestKeys returns the keys of the n saves of the highest sequence
// numbers, the highest first: the merge of the machines' indexes that
// Recent of every machine is, for engines whose saves are numbered.
func newestKeys[T any](saved []T, n int, of func(T) (Key, uint64)) []Key {
	slices.SortFunc(saved, func(a, b T) int {
		_, sa := of(a)
		_, sb := of(b)
		return cmp.Compare(sb, sa)
	})
	if len(saved) > n {
		saved = saved[:max(n, 0)]
	}
	keys := make([]Key, len(saved))
	for i, s := range saved {
		keys[i], _ = of(s)
	}
	return keys
}

// Count returns how many instances of a machine (of all, for "") are
// stored.
func (m *Memory) Count(ctx context.Context, machine string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if machine == "" {
		return len(m.recs), nil
	}
	if l := m.recent[machine]; l != nil {
		return l.Len(), nil
	}
	return 0, nil
}

// List returns the stored instances' keys.
func (m *Memory) List(ctx context.Context) ([]Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := make([]Key, 0, len(m.recs))
	for k := range m.recs {
		keys = append(keys, k)
	}
	return keys, nil
}

// Audit returns the last n entries of an instance's audit trail.
func (m *Memory) Audit(ctx context.Context, k Key, n int) ([]AuditEntry, error) {
	if err := CheckKey(k); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	trail := m.audit[k]
	if len(trail) > m.Retention {
		trail = trail[len(trail)-m.Retention:]
	}
	if n > 0 && len(trail) > n {
		trail = trail[len(trail)-n:]
	}
	return append([]AuditEntry(nil), trail...), nil
}

// Close does nothing.
func (m *Memory) Close() error { return nil }
