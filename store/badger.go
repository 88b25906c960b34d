package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
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
	// NoSync lets writes return before they reach the disk (faster; the
	// last writes may be lost in a crash). Off by default: a save is
	// durable when Save returns, and concurrent saves share fsyncs.
	NoSync bool
	// GCInterval is how often the value log is garbage collected (10
	// minutes when zero; negative: never).
	GCInterval time.Duration
	// AuditRetention bounds the audit entries kept per instance
	// (DefaultAuditRetention when zero).
	AuditRetention int
	Logger         *slog.Logger
}

// Badger is a Store in an embedded Badger database.
type Badger struct {
	db        *badger.DB
	log       *slog.Logger
	stop      chan struct{}
	done      sync.WaitGroup
	retention uint64
	wal       *wal    // nil with NoSync
	ops       []walOp // the writes of the batch being written (by the leader)

	// Group commit: a save that finds no batch being written writes the
	// saves waiting (its own first) as the leader; saves that arrive
	// meanwhile wait, and the first of them leads the next batch.
	mu       sync.Mutex
	queue    []*saveReq
	leading  bool
	closed   bool
	failed   error // set when the disk failed: every save fails
	inflight sync.WaitGroup
	// versions caches the stored version of recently saved instances
	// (this process is the only writer of its folder), so that a save
	// need not read it back from the tables.
	vmu      sync.Mutex
	versions map[Key]uint64
	pending  map[Key]uint64 // the batch's new versions (by the leader)

	nSaves   atomic.Uint64
	nCommits atomic.Uint64
}

// Stats returns how many saves were written, in how many commits (each
// one fsync unless NoSync).
func (b *Badger) Stats() (saves, commits uint64) { return b.nSaves.Load(), b.nCommits.Load() }

// saveReq is a save waiting to be written with others in one transaction.
type saveReq struct {
	k       Key
	rec     Record
	version uint64
	done    chan error    // its outcome
	lead    chan struct{} // told to lead the next batch
}

// maxVersions bounds the versions cached (the cache starts over when full).
const maxVersions = 1 << 16

// maxBatch bounds the saves written in one transaction.
const maxBatch = 256

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
	b := &Badger{db: db, log: log, stop: make(chan struct{}), retention: DefaultAuditRetention,
		versions: map[Key]uint64{}, pending: map[Key]uint64{}}
	if !o.NoSync {
		if err := b.openWAL(filepath.Join(dir, "stategate.wal")); err != nil {
			db.Close()
			return nil, err
		}
	}
	if o.AuditRetention > 0 {
		b.retention = uint64(o.AuditRetention)
	}
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

// commit writes the waiting saves (up to maxBatch) in one transaction and
// one fsync, then hands the lead to the first save still waiting, if any.
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
	for {
		results := make([]error, len(batch))
		clear(b.pending)
		err := b.update(func(txn *badger.Txn) error {
			b.ops = b.ops[:0]
			for i, r := range batch {
				results[i] = b.put(txn, r.k, r.rec, r.version)
				if results[i] != nil && !errors.Is(results[i], ErrConflict) {
					return results[i]
				}
			}
			return nil
		})
		if errors.Is(err, badger.ErrConflict) {
			continue // another transaction wrote meanwhile: redo the batch
		}
		if (errors.Is(err, badger.ErrTxnTooBig) || errors.Is(err, errWALTooBig)) && len(batch) > 1 {
			b.writeBatch(batch[:len(batch)/2])
			b.writeBatch(batch[len(batch)/2:])
			return
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
		return
	}
}

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
	var rec Record
	var version uint64
	err := b.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(keyOf(k))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			rec, version, err = decode(v)
			return err
		})
	})
	return rec, version, err
}

// Save stores a record if the instance is still at version. Concurrent
// saves are written together, in one transaction and one fsync; the save
// returns once its transaction is committed (durably unless NoSync).
func (b *Badger) Save(ctx context.Context, k Key, rec Record, version uint64) (uint64, error) {
	if rec.Updated.IsZero() {
		rec.Updated = time.Now()
	}
	r := &saveReq{k: k, rec: rec, version: version, done: make(chan error, 1), lead: make(chan struct{}, 1)}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return 0, errors.New("store closed")
	}
	if b.failed != nil {
		b.mu.Unlock()
		return 0, b.failed
	}
	b.inflight.Add(1)
	defer b.inflight.Done()
	b.queue = append(b.queue, r)
	lead := !b.leading
	b.leading = true
	b.mu.Unlock()
	if lead {
		b.commit()
	}
	for {
		select {
		case err := <-r.done:
			if err != nil {
				return 0, err
			}
			return version + 1, nil
		case <-r.lead:
			b.commit()
		}
	}
}

// put writes one save in a transaction: the record (if the instance is
// still at version) and its audit entry, dropping the entry that falls out
// of the retention.
func (b *Badger) put(txn *badger.Txn, k Key, rec Record, version uint64) error {
	cur, known := b.pending[k]
	if !known {
		b.vmu.Lock()
		cur, known = b.versions[k]
		b.vmu.Unlock()
	}
	var item *badger.Item
	var err error
	if !known {
		item, err = txn.Get(keyOf(k))
	}
	switch {
	case known:
	case errors.Is(err, badger.ErrKeyNotFound):
	case err != nil:
		return err
	default:
		if err := item.Value(func(v []byte) error {
			if len(v) < 8 {
				return errors.New("corrupt record")
			}
			cur = binary.BigEndian.Uint64(v) // the record itself is not read
			return nil
		}); err != nil {
			return err
		}
	}
	if cur != version {
		return ErrConflict
	}
	val, err := encode(rec, version+1)
	if err != nil {
		return err
	}
	if err := b.set(txn, keyOf(k), val); err != nil {
		return err
	}
	b.pending[k] = version + 1
	if rec.Audit == nil {
		return nil
	}
	entry := *rec.Audit
	entry.Version = version + 1
	data, err := json.Marshal(entry)
	if err != nil {
		return err
	}
	if err := b.set(txn, auditKey(k, version+1), data); err != nil {
		return err
	}
	if version+1 > b.retention {
		key := auditKey(k, version+1-b.retention)
		b.ops = append(b.ops, walOp{del: true, key: key})
		return txn.Delete(key)
	}
	return nil
}

// set writes a key in the batch's transaction, and notes it for the log.
func (b *Badger) set(txn *badger.Txn, key, val []byte) error {
	b.ops = append(b.ops, walOp{key: key, val: val})
	return txn.Set(key, val)
}

// openWAL opens the write-ahead log and applies what it holds (the
// batches written since Badger was last synced), then starts it over.
func (b *Badger) openWAL(path string) error {
	w, batches, err := openWAL(path)
	if err != nil {
		return err
	}
	if len(batches) > 0 {
		wb := b.db.NewWriteBatch()
		n := 0
		for _, ops := range batches {
			for _, op := range ops {
				if op.del {
					err = wb.Delete(op.key)
				} else {
					err = wb.Set(op.key, op.val)
				}
				if err != nil {
					wb.Cancel()
					w.Close()
					return fmt.Errorf("replay %s: %w", path, err)
				}
				n++
			}
		}
		if err := wb.Flush(); err != nil {
			w.Close()
			return fmt.Errorf("replay %s: %w", path, err)
		}
		b.log.Info("store: replayed the write-ahead log", "batches", len(batches), "writes", n)
	}
	if err := b.syncAndRestart(w); err != nil {
		w.Close()
		return err
	}
	b.wal = w
	return nil
}

// syncAndRestart makes Badger durable by itself, then starts the log over.
func (b *Badger) syncAndRestart(w *wal) error {
	if err := b.db.Sync(); err != nil {
		return fmt.Errorf("sync store: %w", err)
	}
	return w.restart(w.gen + 1)
}

// update runs fn in a read-write transaction and commits it. With a
// write-ahead log, the writes fn made (b.ops) are written to the log
// first, and the log's sync to the disk runs while Badger commits (see
// wal): a save costs one fdatasync, not an fdatasync and then a commit.
func (b *Badger) update(fn func(*badger.Txn) error) error {
	txn := b.db.NewTransaction(true)
	defer txn.Discard()
	if err := fn(txn); err != nil {
		return err
	}
	if b.wal == nil || len(b.ops) == 0 {
		return txn.Commit()
	}
	if err := b.logBatch(); err != nil {
		return err
	}
	committed := make(chan error, 1)
	txn.CommitWith(func(err error) { committed <- err })
	syncErr := b.wal.sync()
	err := <-committed
	if syncErr != nil {
		b.mu.Lock()
		b.failed = fmt.Errorf("%w: the write-ahead log could not be synced: %v", ErrDiskFailed, syncErr)
		b.mu.Unlock()
		b.log.Error("store: the disk failed; every save is refused until the server restarts", "err", syncErr)
		return b.failed
	}
	return err
}

// ErrDiskFailed is returned by every save after the disk failed to make
// one durable; the store must be opened again (its log is replayed).
var ErrDiskFailed = errors.New("the store's disk failed")

// logBatch writes the batch's writes to the write-ahead log, without
// waiting for the disk.
func (b *Badger) logBatch() error {
	err := b.wal.write(b.ops)
	if errors.Is(err, errWALFull) {
		if err = b.syncAndRestart(b.wal); err == nil {
			err = b.wal.write(b.ops)
		}
	}
	if err != nil {
		return fmt.Errorf("write-ahead log: %w", err)
	}
	return nil
}

// Delete removes an instance and its audit trail. It is for a store no
// server writes to (the state command): saves under way may race it.
func (b *Badger) Delete(ctx context.Context, k Key) error {
	b.vmu.Lock()
	delete(b.versions, k)
	b.vmu.Unlock()
	prefix := []byte(auditPrefix + k.Machine + "\x00" + k.Handle + "\x00")
	err := b.db.Update(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = prefix
		it := txn.NewIterator(opts)
		var keys [][]byte
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		it.Close()
		for _, key := range keys {
			if err := txn.Delete(key); err != nil {
				return err
			}
		}
		return txn.Delete(keyOf(k))
	})
	if err == nil && b.wal != nil {
		err = b.db.Sync()
	}
	return err
}

// Audit returns the last n entries of an instance's audit trail.
func (b *Badger) Audit(ctx context.Context, k Key, n int) ([]AuditEntry, error) {
	prefix := []byte(auditPrefix + k.Machine + "\x00" + k.Handle + "\x00")
	var out []AuditEntry
	err := b.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Reverse = true
		opts.Prefix = prefix
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(append(append([]byte(nil), prefix...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)); it.Valid(); it.Next() {
			if n > 0 && len(out) >= n {
				break
			}
			var e AuditEntry
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &e) }); err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, err
}

// List returns the stored instances' keys.
func (b *Badger) List(ctx context.Context) ([]Key, error) {
	var keys []Key
	err := b.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = []byte(instancePrefix)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if k, ok := keyFrom(it.Item().Key()); ok {
				keys = append(keys, k)
			}
		}
		return nil
	})
	return keys, err
}

// Close stops the writer and the garbage collector, and closes the
// database.
func (b *Badger) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.inflight.Wait() // the saves under way are written
	close(b.stop)
	b.done.Wait()
	err := b.db.Close()
	if b.wal != nil {
		if err == nil {
			// Badger is on the disk: the log has nothing left to replay.
			err = b.wal.restart(b.wal.gen + 1)
		}
		if cerr := b.wal.Close(); err == nil {
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
