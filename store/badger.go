package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// ErrLocked is returned by OpenBadger when another process holds the
// store's folder (a running server, most likely).
var ErrLocked = errors.New("store in use by another process")

// BadgerOptions configure a Badger store.
type BadgerOptions struct {
	// NoSync lets writes return once they are in the operating system's
	// cache, without fdatasync (faster; a killed process loses nothing, a
	// power cut may lose the last writes). Off by default: a save is
	// durable when Save returns, and concurrent saves share fsyncs.
	NoSync bool
	// GCInterval is how often the value log is garbage collected (10
	// minutes when zero; negative: never).
	GCInterval time.Duration
	// AuditRetention bounds the audit entries kept per instance
	// (DefaultAuditRetention when zero).
	AuditRetention int
	// CheckpointBytes is how many bytes of saves a write-ahead log holds
	// before they are moved to Badger (4 MiB when zero): more means fewer
	// writes to Badger for instances saved often, and more memory.
	CheckpointBytes int64
	Logger          *slog.Logger
}

// Badger is a Store in an embedded Badger database.
//
// A save is made durable by the store's own write-ahead log (see wal),
// not by Badger: concurrent saves are written to the log together and
// share one fdatasync (group commit), and their writes are then kept in
// memory (the overlay), where reads find them. Badger gets them later, in
// the background, a log at a time: when the log being written holds
// rotateAt bytes, saves go on in a second log while a checkpoint writes
// the first one's overlay to Badger in one batch (an instance saved many
// times meanwhile is written once), syncs Badger and starts that log
// over. After a crash both logs are replayed into Badger, oldest first.
type Badger struct {
	db        *badger.DB
	log       *slog.Logger
	stop      chan struct{}
	done      sync.WaitGroup
	retention uint64
	noSync    bool

	// Group commit: a save that finds no batch being written writes the
	// saves waiting (its own first) as the leader; saves that arrive
	// meanwhile wait, and the first of them leads the next batch.
	mu       sync.Mutex
	queue    []*saveReq
	leading  bool
	closed   bool
	failed   error // set when the disk failed: every save fails
	inflight sync.WaitGroup

	// The leader's: the two logs, the one written now, and the writes of
	// the batch being written.
	logs     [2]*wal
	active   int
	ops      []walOp
	rotateAt int64 // BadgerOptions.CheckpointBytes

	// ovMu guards the overlays: cur holds the writes of logs[active], old
	// those of the other log while a checkpoint moves them to Badger (nil
	// otherwise). A key's latest write is in cur, else in old, else in
	// Badger.
	ovMu sync.RWMutex
	cur  *overlay
	old  *overlay
	// checkpoints takes the index of a log whose overlay (old) is to be
	// written to Badger; drained is signalled after each checkpoint.
	checkpoints chan int
	drained     chan struct{}
	// beforeCheckpoint, when set (by tests), runs before each checkpoint;
	// waitCheckpoint when a full log waits for the checkpoint under way.
	beforeCheckpoint, waitCheckpoint func()

	// versions caches the stored version of recently saved instances
	// (this process is the only writer of its folder), so that a save
	// need not read it back.
	vmu      sync.Mutex
	versions map[Key]uint64
	pending  map[Key]uint64 // the batch's new versions (by the leader)

	nSaves       atomic.Uint64
	nCommits     atomic.Uint64
	nCheckpoints atomic.Uint64
}

// overlay is the writes of one log that Badger does not have yet: the
// last value of each key written, or a deletion.
type overlay struct {
	m map[string]ovEntry
	// audits holds the audit keys of m by instance (their prefix), in the
	// order they were written, so that an instance's trail is found
	// without going through the whole overlay.
	audits map[string][]string
}

func newOverlay() *overlay {
	return &overlay{m: map[string]ovEntry{}, audits: map[string][]string{}}
}

// put notes a write.
func (ov *overlay) put(key string, e ovEntry) {
	if _, seen := ov.m[key]; !seen && strings.HasPrefix(key, auditPrefix) && len(key) > len(auditPrefix)+8 {
		p := key[:len(key)-8]
		ov.audits[p] = append(ov.audits[p], key)
	}
	ov.m[key] = e
}

type ovEntry struct {
	val []byte
	del bool
}

// Stats returns how many saves were written, in how many commits (each
// one fsync unless NoSync).
func (b *Badger) Stats() (saves, commits uint64) { return b.nSaves.Load(), b.nCommits.Load() }

// saveReq is a save (or, with del, a deletion) waiting to be written with
// others in one batch.
type saveReq struct {
	k       Key
	version uint64
	// val is the encoded record, audit its encoded audit entry (nil for
	// none): both are encoded by the saver, before it queues. bad is why
	// the record could not be encoded, reported unless the save conflicts.
	val, audit []byte
	bad        error
	del        bool
	done       chan error    // its outcome
	lead       chan struct{} // told to lead the next batch
}

// maxVersions bounds the versions cached (the cache starts over when full).
const maxVersions = 1 << 16

// maxBatch bounds the saves written in one batch.
const maxBatch = 256

// rotateAt is how many bytes a log holds before its writes are moved to
// Badger (about 4,000 saves of an instance with a small context).
const rotateAt = 4 << 20

// OpenBadger opens (or creates) a store in dir, sized for a small local
// server rather than Badger's defaults.
func OpenBadger(dir string, o BadgerOptions) (*Badger, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	// Durability comes from the store's own write-ahead log (see wal):
	// Badger's SyncWrites stays off.
	opts := badger.DefaultOptions(dir).
		WithSyncWrites(false).
		WithLogger(badgerLogger{log}).
		WithNumMemtables(2).
		WithMemTableSize(4 << 20).
		WithBaseTableSize(1 << 20).
		WithNumLevelZeroTables(4).
		WithNumLevelZeroTablesStall(8).
		WithValueLogFileSize(64 << 20).
		WithBlockCacheSize(4 << 20).
		WithIndexCacheSize(2 << 20).
		WithNumCompactors(2).
		WithValueThreshold(4 << 10)
	db, err := badger.Open(opts)
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("%w: %s is held by another stategate (is a server running on it?)", ErrLocked, dir)
		}
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	b := &Badger{db: db, log: log, stop: make(chan struct{}), retention: DefaultAuditRetention, noSync: o.NoSync,
		rotateAt: rotateAt, cur: newOverlay(), checkpoints: make(chan int, 1), drained: make(chan struct{}, 1),
		versions: map[Key]uint64{}, pending: map[Key]uint64{}}
	if err := b.openLogs(filepath.Join(dir, "stategate.wal"), filepath.Join(dir, "stategate-2.wal")); err != nil {
		db.Close()
		return nil, err
	}
	if o.AuditRetention > 0 {
		b.retention = uint64(o.AuditRetention)
	}
	if o.CheckpointBytes > 0 {
		b.rotateAt = min(o.CheckpointBytes, walSize-headerSize)
	}
	b.done.Add(1)
	go b.checkpointer()
	every := o.GCInterval
	if every == 0 {
		every = 10 * time.Minute
	}
	if every > 0 {
		b.done.Add(1)
		go b.gc(every)
	}
	return b, nil
}

// commit writes the waiting saves (up to maxBatch) in one batch and one
// fsync, then hands the lead to the first save still waiting, if any.
func (b *Badger) commit() {
	b.mu.Lock()
	n := min(len(b.queue), maxBatch)
	batch := append([]*saveReq(nil), b.queue[:n]...)
	b.queue = b.queue[n:]
	b.mu.Unlock()
	b.writeBatch(batch)
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.leading = false
		b.mu.Unlock()
		return
	}
	next := b.queue[0]
	b.mu.Unlock()
	next.lead <- struct{}{}
}

func (b *Badger) writeBatch(batch []*saveReq) {
	results := make([]error, len(batch))
	clear(b.pending)
	b.ops = b.ops[:0]
	var err error
	for i, r := range batch {
		if r.del {
			results[i] = b.drop(r.k)
		} else {
			results[i] = b.put(r)
		}
		if e := results[i]; e != nil && e != r.bad && !errors.Is(e, ErrConflict) {
			err = e // a store error (not the save's own): the batch fails
			break
		}
	}
	if err == nil && len(b.ops) > 0 {
		err = b.logBatch()
		if (errors.Is(err, errWALTooBig)) && len(batch) > 1 {
			b.writeBatch(batch[:len(batch)/2])
			b.writeBatch(batch[len(batch)/2:])
			return
		}
	}
	if err == nil {
		b.vmu.Lock()
		if len(b.versions)+len(b.pending) > maxVersions {
			clear(b.versions)
		}
		maps.Copy(b.versions, b.pending)
		b.vmu.Unlock()
	}
	b.nCommits.Add(1)
	b.nSaves.Add(uint64(len(batch)))
	for i, r := range batch {
		if err != nil {
			r.done <- err
		} else {
			r.done <- results[i]
		}
	}
}

// logBatch writes the batch's writes (b.ops) to the active log and syncs
// it, then puts them in the overlay; it starts a checkpoint when the log
// is full enough.
func (b *Badger) logBatch() error {
	w := b.logs[b.active]
	err := w.write(b.ops)
	if errors.Is(err, errWALFull) {
		if err = b.rotate(); err == nil {
			w = b.logs[b.active]
			err = w.write(b.ops)
		}
	}
	if err != nil {
		return fmt.Errorf("write-ahead log: %w", err)
	}
	if !b.noSync {
		if err := w.sync(); err != nil {
			return b.fail(fmt.Errorf("%w: the write-ahead log could not be synced: %v", ErrDiskFailed, err))
		}
	}
	b.ovMu.Lock()
	for _, op := range b.ops {
		b.cur.put(string(op.key), ovEntry{val: op.val, del: op.del})
	}
	b.ovMu.Unlock()
	if w.off-headerSize >= b.rotateAt {
		b.startCheckpoint() // or at a later batch, if one is under way
	}
	return nil
}

// startCheckpoint moves the saves to the other log and has the active
// one's writes checkpointed, unless a checkpoint is still under way (it
// reports whether it started one).
func (b *Badger) startCheckpoint() bool {
	b.ovMu.Lock()
	if b.old != nil {
		b.ovMu.Unlock()
		return false
	}
	b.old, b.cur = b.cur, newOverlay()
	full := b.active
	b.active ^= 1
	b.ovMu.Unlock()
	b.checkpoints <- full
	return true
}

// rotate is startCheckpoint for a full log: it waits for the checkpoint
// under way, if any, to end first.
func (b *Badger) rotate() error {
	for !b.startCheckpoint() {
		if b.waitCheckpoint != nil {
			b.waitCheckpoint()
		}
		select {
		case <-b.drained:
		case <-b.stop:
			return errors.New("store closed")
		}
		if err := b.failure(); err != nil {
			return err
		}
	}
	return nil
}

// fail records that the disk failed: every later save fails with err.
func (b *Badger) fail(err error) error {
	b.mu.Lock()
	if b.failed == nil {
		b.failed = err
		b.log.Error("store: the disk failed; every save is refused until the server restarts", "err", err)
	}
	b.mu.Unlock()
	return err
}

func (b *Badger) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failed
}

// ErrDiskFailed is returned by every save after the disk failed to make
// one durable; the store must be opened again (its logs are replayed).
var ErrDiskFailed = errors.New("the store's disk failed")

// checkpointer writes the overlays of full logs to Badger, until Close.
func (b *Badger) checkpointer() {
	defer b.done.Done()
	for {
		select {
		case <-b.stop:
			return
		case i := <-b.checkpoints:
			b.ovMu.RLock()
			ov := b.old
			b.ovMu.RUnlock()
			if b.beforeCheckpoint != nil {
				b.beforeCheckpoint()
			}
			if err := b.checkpoint(ov, b.logs[i]); err != nil {
				b.fail(fmt.Errorf("%w: a checkpoint failed: %v", ErrDiskFailed, err))
			} else {
				b.ovMu.Lock()
				b.old = nil
				b.ovMu.Unlock()
			}
			select {
			case b.drained <- struct{}{}:
			default:
			}
		}
	}
}

// checkpoint writes an overlay to Badger, syncs Badger, and starts the
// log that held the overlay's writes over.
func (b *Badger) checkpoint(ov *overlay, w *wal) error {
	if err := b.apply(ov); err != nil {
		return err
	}
	if err := b.db.Sync(); err != nil {
		return fmt.Errorf("sync store: %w", err)
	}
	b.nCheckpoints.Add(1)
	return w.restart(b.nextGen())
}

// apply writes an overlay's writes to Badger.
func (b *Badger) apply(ov *overlay) error {
	if ov == nil || len(ov.m) == 0 {
		return nil
	}
	wb := b.db.NewWriteBatch()
	defer wb.Cancel()
	for k, e := range ov.m {
		var err error
		if e.del {
			err = wb.Delete([]byte(k))
		} else {
			err = wb.Set([]byte(k), e.val)
		}
		if err != nil {
			return err
		}
	}
	return wb.Flush()
}

// nextGen is a generation newer than both logs'.
func (b *Badger) nextGen() uint64 { return max(b.logs[0].gen, b.logs[1].gen) + 1 }

func (b *Badger) gc(every time.Duration) {
	defer b.done.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			for b.db.RunValueLogGC(0.5) == nil {
			}
		}
	}
}

const instancePrefix = "i/"

func keyOf(k Key) []byte { return []byte(instancePrefix + k.Machine + "\x00" + k.Handle) }

func keyFrom(b []byte) (Key, bool) {
	s := strings.TrimPrefix(string(b), instancePrefix)
	m, h, ok := strings.Cut(s, "\x00")
	return Key{Machine: m, Handle: h}, ok
}

// A stored value is the version (8 bytes, big-endian) then the record as
// JSON.
// encode writes a record after its version, as json.Marshal would write
// it (but for the snapshot, taken as it is: it is JSON already).
func encode(rec Record, version uint64) ([]byte, error) {
	if !json.Valid(rec.Snapshot) {
		return nil, errors.New("the snapshot is not valid JSON")
	}
	mv, err := json.Marshal(rec.MachineVersion)
	if err != nil {
		return nil, err
	}
	updated, err := rec.Updated.MarshalJSON()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 8+len(rec.Snapshot)+len(mv)+len(updated)+64)
	b = binary.BigEndian.AppendUint64(b, version)
	b = append(b, `{"snapshot":`...)
	b = append(b, rec.Snapshot...)
	b = append(b, `,"machineVersion":`...)
	b = append(b, mv...)
	b = append(b, `,"updated":`...)
	b = append(b, updated...)
	if len(rec.Timers) > 0 {
		timers, err := json.Marshal(rec.Timers)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"timers":`...)
		b = append(b, timers...)
	}
	return append(b, '}'), nil
}

func decode(v []byte) (Record, uint64, error) {
	if len(v) < 8 {
		return Record{}, 0, errors.New("corrupt record")
	}
	var rec Record
	if err := json.Unmarshal(v[8:], &rec); err != nil {
		return Record{}, 0, fmt.Errorf("corrupt record: %w", err)
	}
	return rec, binary.BigEndian.Uint64(v), nil
}

const auditPrefix = "a/"

func auditKey(k Key, version uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(auditPrefix+k.Machine+"\x00"+k.Handle+"\x00"), version)
}

// Load returns an instance's record and version.
func (b *Badger) Load(ctx context.Context, k Key) (Record, uint64, error) {
	v, err := b.get(keyOf(k))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return Record{}, 0, ErrNotFound
	}
	if err != nil {
		return Record{}, 0, err
	}
	return decode(v)
}

// overlaid returns a key's latest write not yet in Badger, if any.
func (b *Badger) overlaid(key []byte) (ovEntry, bool) {
	b.ovMu.RLock()
	defer b.ovMu.RUnlock()
	if e, ok := b.cur.m[string(key)]; ok {
		return e, true
	}
	if b.old == nil {
		return ovEntry{}, false
	}
	e, ok := b.old.m[string(key)]
	return e, ok
}

// Save stores a record if the instance is still at version. Concurrent
// saves are written together, in one batch and one fsync; the save
// returns once its batch is on the disk (in the operating system's
// cache with NoSync). The record is encoded before it joins the queue, so
// that encoding overlaps the batch being written.
func (b *Badger) Save(ctx context.Context, k Key, rec Record, version uint64) (uint64, error) {
	if rec.Updated.IsZero() {
		rec.Updated = time.Now()
	}
	r := &saveReq{k: k, version: version}
	r.val, r.bad = encode(rec, version+1)
	if rec.Audit != nil && r.bad == nil {
		entry := *rec.Audit
		entry.Version = version + 1
		r.audit, r.bad = json.Marshal(entry)
	}
	if err := b.enqueue(r); err != nil {
		return 0, err
	}
	return version + 1, nil
}

// enqueue writes a request with the others waiting and returns its
// outcome.
func (b *Badger) enqueue(r *saveReq) error {
	r.done, r.lead = make(chan error, 1), make(chan struct{}, 1)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return errors.New("store closed")
	}
	if b.failed != nil {
		b.mu.Unlock()
		return b.failed
	}
	b.inflight.Add(1)
	defer b.inflight.Done()
	b.queue = append(b.queue, r)
	lead := !b.leading
	b.leading = true
	b.mu.Unlock()
	if lead {
		// Saves that are on their way (their goroutines are ready to
		// run, on a single core too) join this batch instead of waiting
		// for the next fsync.
		runtime.Gosched()
		b.commit()
	}
	for {
		select {
		case err := <-r.done:
			return err
		case <-r.lead:
			b.commit()
		}
	}
}

// version returns an instance's stored version (0: not stored), as the
// batch being written leaves it.
func (b *Badger) version(k Key) (uint64, error) {
	if v, ok := b.pending[k]; ok {
		return v, nil
	}
	b.vmu.Lock()
	v, ok := b.versions[k]
	b.vmu.Unlock()
	if ok {
		return v, nil
	}
	val, err := b.get(keyOf(k))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(val) < 8 {
		return 0, errors.New("corrupt record")
	}
	return binary.BigEndian.Uint64(val), nil // the record itself is not decoded
}

// put adds one save's writes to the batch: the record (if the instance is
// still at its version) and its audit entry, dropping the entry that falls
// out of the retention.
func (b *Badger) put(r *saveReq) error {
	k, version := r.k, r.version
	cur, err := b.version(k)
	if err != nil {
		return err
	}
	if cur != version {
		return ErrConflict
	}
	if r.bad != nil {
		return r.bad
	}
	b.ops = append(b.ops, walOp{key: keyOf(k), val: r.val})
	b.pending[k] = version + 1
	if r.audit == nil {
		return nil
	}
	b.ops = append(b.ops, walOp{key: auditKey(k, version+1), val: r.audit})
	if version+1 > b.retention {
		b.ops = append(b.ops, walOp{del: true, key: auditKey(k, version+1-b.retention)})
	}
	return nil
}

// drop adds an instance's deletion to the batch: its record and its
// audit trail.
func (b *Badger) drop(k Key) error {
	prefix := auditPrefixOf(k)
	keys, err := b.keys(prefix, 0)
	if err != nil {
		return err
	}
	for _, op := range b.ops { // the batch's own saves of it
		if !op.del && bytes.HasPrefix(op.key, prefix) {
			keys = append(keys, op.key)
		}
	}
	for _, key := range keys {
		b.ops = append(b.ops, walOp{del: true, key: key})
	}
	b.ops = append(b.ops, walOp{del: true, key: keyOf(k)})
	b.pending[k] = 0
	return nil
}

func auditPrefixOf(k Key) []byte { return []byte(auditPrefix + k.Machine + "\x00" + k.Handle + "\x00") }

// keys returns the keys with a prefix, Badger's and the overlays', in
// order, at most the last n of them when n > 0.
func (b *Badger) keys(prefix []byte, n int) ([][]byte, error) {
	// The overlays' writes under the prefix: they override Badger's.
	trail := bytes.HasPrefix(prefix, []byte(auditPrefix)) && bytes.Count(prefix, []byte{0}) == 2 && prefix[len(prefix)-1] == 0
	b.ovMu.RLock()
	over := map[string]bool{} // key -> set (false: deleted)
	for _, ov := range []*overlay{b.old, b.cur} {
		if ov == nil {
			continue
		}
		if trail {
			// An instance's trail (auditPrefixOf): its keys are indexed.
			for _, k := range ov.audits[string(prefix)] {
				over[k] = !ov.m[k].del
			}
			continue
		}
		for k, e := range ov.m {
			if strings.HasPrefix(k, string(prefix)) {
				over[k] = !e.del
			}
		}
	}
	b.ovMu.RUnlock()
	live := 0
	for _, set := range over {
		if set {
			live++
		}
	}
	var keys [][]byte
	var err error
	// An instance's versions only grow, and its deletion deletes its
	// whole trail in the overlay: the trail's entries in the overlays are
	// newer than those left in Badger, which the last n need not read
	// when the overlays hold n.
	if !trail || n <= 0 || live < n {
		err = b.db.View(func(txn *badger.Txn) error {
			opts := badger.DefaultIteratorOptions
			opts.PrefetchValues = false
			opts.Prefix = prefix
			opts.Reverse = true
			it := txn.NewIterator(opts)
			defer it.Close()
			for it.Seek(append(append([]byte(nil), prefix...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)); it.Valid(); it.Next() {
				if n > 0 && len(keys) >= n {
					break
				}
				if _, ok := over[string(it.Item().Key())]; ok {
					continue
				}
				keys = append(keys, it.Item().KeyCopy(nil))
			}
			return nil
		})
	}
	for k, set := range over {
		if set {
			keys = append(keys, []byte(k))
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	if n > 0 && len(keys) > n {
		keys = keys[len(keys)-n:]
	}
	return keys, err
}

// get returns a key's value, from the overlays or Badger.
func (b *Badger) get(key []byte) ([]byte, error) {
	if e, ok := b.overlaid(key); ok {
		if e.del {
			return nil, badger.ErrKeyNotFound
		}
		return e.val, nil
	}
	var val []byte
	err := b.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		val, err = item.ValueCopy(nil)
		return err
	})
	return val, err
}

// openLogs opens the two write-ahead logs and applies what they hold
// (the batches written since Badger was last synced), the older log
// first, then starts both over.
func (b *Badger) openLogs(paths ...string) error {
	type opened struct {
		w       *wal
		batches [][]walOp
	}
	var logs []opened
	closeAll := func() {
		for _, l := range logs {
			l.w.Close()
		}
	}
	for _, path := range paths {
		w, batches, err := openWAL(path)
		if err != nil {
			closeAll()
			return err
		}
		logs = append(logs, opened{w, batches})
	}
	if logs[1].w.gen < logs[0].w.gen {
		logs[0], logs[1] = logs[1], logs[0]
	}
	wb := b.db.NewWriteBatch()
	n, batches := 0, 0
	for _, l := range logs {
		for _, ops := range l.batches {
			for _, op := range ops {
				var err error
				if op.del {
					err = wb.Delete(op.key)
				} else {
					err = wb.Set(op.key, op.val)
				}
				if err != nil {
					wb.Cancel()
					closeAll()
					return fmt.Errorf("replay %s: %w", l.w.f.Name(), err)
				}
				n++
			}
		}
		batches += len(l.batches)
	}
	if err := wb.Flush(); err != nil {
		closeAll()
		return fmt.Errorf("replay the write-ahead logs: %w", err)
	}
	if batches > 0 {
		b.log.Info("store: replayed the write-ahead logs", "batches", batches, "writes", n)
	}
	if err := b.db.Sync(); err != nil {
		closeAll()
		return fmt.Errorf("sync store: %w", err)
	}
	b.logs = [2]*wal{logs[0].w, logs[1].w}
	for _, w := range b.logs {
		if err := w.restart(b.nextGen()); err != nil {
			closeAll()
			return err
		}
	}
	b.active = 0
	return nil
}

// Delete removes an instance and its audit trail.
func (b *Badger) Delete(ctx context.Context, k Key) error {
	return b.enqueue(&saveReq{k: k, del: true})
}

// Audit returns the last n entries of an instance's audit trail.
func (b *Badger) Audit(ctx context.Context, k Key, n int) ([]AuditEntry, error) {
	keys, err := b.keys(auditPrefixOf(k), n)
	if err != nil {
		return nil, err
	}
	out := make([]AuditEntry, 0, len(keys))
	for _, key := range keys {
		v, err := b.get(key)
		if errors.Is(err, badger.ErrKeyNotFound) {
			continue // deleted meanwhile: it fell out of the retention
		}
		if err != nil {
			return nil, err
		}
		var e AuditEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// List returns the stored instances' keys.
func (b *Badger) List(ctx context.Context) ([]Key, error) {
	keys, err := b.keys([]byte(instancePrefix), 0)
	if err != nil {
		return nil, err
	}
	out := make([]Key, 0, len(keys))
	for _, key := range keys {
		if k, ok := keyFrom(key); ok {
			out = append(out, k)
		}
	}
	return out, nil
}

// Close waits for the saves under way, moves what the logs hold to
// Badger and closes it.
func (b *Badger) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	b.inflight.Wait() // the saves under way are written
	close(b.stop)
	b.done.Wait()
	// The checkpointer has stopped: the overlays are written here, the
	// older first. After a disk failure they are not: the logs keep what
	// they hold, for the next open to replay.
	err := b.failure()
	if err == nil {
		if err = b.apply(b.old); err == nil {
			err = b.apply(b.cur)
		}
	}
	if cerr := b.db.Close(); err == nil {
		err = cerr
	}
	for _, w := range b.logs {
		if err == nil {
			// Badger is on the disk: the log has nothing left to replay.
			err = w.restart(b.nextGen())
		}
		if cerr := w.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// badgerLogger sends Badger's logs to slog: its warnings and errors only.
type badgerLogger struct{ log *slog.Logger }

func (l badgerLogger) Errorf(f string, a ...any) {
	l.log.Error("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}
func (l badgerLogger) Warningf(f string, a ...any) {
	l.log.Warn("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}
func (l badgerLogger) Infof(string, ...any)  {}
func (l badgerLogger) Debugf(string, ...any) {}
