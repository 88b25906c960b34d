// Package badger is the store engine on disk: a store.Store in an
// embedded Badger database (github.com/dgraph-io/badger). It owns how
// records are kept there: their keys (lengths before bytes, so that no
// two instances' keys meet) and values, the group commit of concurrent
// saves and their syncs, the checks of a store's files before Badger
// opens them (damage refused with ErrDamaged, nothing changed), the
// import of the earlier format's write-ahead logs and keys, the folder's
// lock (ErrLocked), the free-space reserve (store.ErrNoSpace), and a
// failed disk (store.ErrOutcomeUnknown, then store.ErrDiskFailed). It
// enforces the limits of package store (store.CheckKey, AppendRecord,
// MarshalAuditEntry), well under Badger's own (keys of 65,000 bytes,
// transactions of 15% of a memtable, values of a value log file), and
// passes the contract suite of store/storetest. It knows nothing of the
// gate, of machines or of what a snapshot holds.
package badger

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dgbadger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/stategate/stategate/store"
)

// ErrLocked is returned by Open when another process holds the
// store's folder (a running server, most likely).
var ErrLocked = errors.New("store in use by another process")

// errLockHeld is lockDir's: another process holds the folder's lock.
var errLockHeld = errors.New("lock held")

// ErrNoStore is returned by Open when asked to open an existing
// store (ReadOnly, MustExist) where there is none.
var ErrNoStore = errors.New("no store")

// DefaultMinFree is the free space a Badger store keeps in reserve on its
// disk unless told otherwise: room for what Badger may still write once
// saves stop (the end of a memtable's log, a flush to a table, two
// compactions at once, which write their tables before removing the ones
// they merge). With Badger sized as Open sizes it, that peaked at
// 43 to 53 MiB for stores of 100 to 370 MiB of incompressible records
// (TestFullDisk and its kin, on a tmpfs); a much larger store may want a
// larger reserve.
const DefaultMinFree = 128 << 20

// Options configure a store.
type Options struct {
	// NoSync lets writes return once they are in the operating system's
	// cache, without a sync (faster; a killed process loses nothing, a
	// power cut may lose the last writes). Off by default: a save is
	// durable when Save returns, and concurrent saves share syncs.
	NoSync bool
	// GCInterval is how often the value log is garbage collected (10
	// minutes when zero; negative: never).
	GCInterval time.Duration
	// AuditRetention bounds the audit entries kept per instance
	// (store.DefaultAuditRetention when zero).
	AuditRetention int
	// MinFree is the free space, in bytes, kept in reserve on the store's
	// disk: a write that would leave less fails with store.ErrNoSpace, as
	// does opening the store for writing (DefaultMinFree when zero;
	// negative: no reserve).
	MinFree int64
	// ReadOnly opens an existing store to read it, changing nothing on
	// disk; writes fail with store.ErrReadOnly. A store that was not
	// closed cleanly (a killed server) is read from a scratch copy.
	ReadOnly bool
	// MustExist refuses to create a store where there is none
	// (ErrNoStore).
	MustExist bool
	// SmallTables sizes Badger's memtables, tables and levels tiny, so
	// that flushes and compactions happen every few hundred saves (for
	// tests of what a crash during them leaves).
	SmallTables bool
	Logger      *slog.Logger
}

// Store is a store.Store in an embedded Badger database.
//
// Saves are Badger transactions, synced before Save returns (Badger's
// SyncWrites). Concurrent saves share them (group commit): a save that
// finds no batch being written writes the saves waiting, its own first,
// as one transaction (several when they exceed Badger's transaction size,
// split between saves: a save's record, audit entry and the audit entry
// falling out of the retention are always in one).
type Store struct {
	db        *dgbadger.DB
	dir       string // the store's folder
	scratch   string // a scratch copy read instead of dir, removed on Close
	unlock    func() error
	log       *slog.Logger
	stop      chan struct{}
	done      sync.WaitGroup
	retention uint64
	minFree   int64
	readOnly  bool
	threshold int64 // Badger's value threshold
	maxSize   int64 // Badger's transaction limits
	maxCount  int64

	// Group commit: a save that finds no batch being written writes the
	// saves waiting (its own first) as the leader; saves that arrive
	// meanwhile wait, and the first of them leads the next batch.
	mu       sync.Mutex
	queue    []*saveReq
	leading  bool
	closed   bool
	failed   error // set when the disk failed: every write fails
	inflight sync.WaitGroup

	// versions caches the stored version of recently saved instances
	// (this process is the only writer of its folder), so that a save
	// need not read it back; pending holds the batch's (the leader's).
	vmu      sync.Mutex
	versions map[store.Key]uint64
	pending  map[store.Key]uint64
	// counts caches each machine's count of instances (read from its
	// key once, then kept as creations and deletions change it);
	// pendingCounts holds the batch's (the leader's), and seq numbers the
	// creations (the last one's, the leader's). indexed is unset for a
	// store of format 2 opened read-only, which has no index: Recent and
	// Count then read every record.
	counts        map[string]uint64
	pendingCounts map[string]uint64
	seq           uint64
	indexed       bool

	// syncErr is set by Badger's logger when Badger could not sync a
	// value log file (an error it logs without returning it).
	syncErr atomic.Pointer[string]
	// Test hooks: commit commits a transaction; free returns the free
	// space.
	commit func(*dgbadger.Txn) error
	free   func() (int64, error)

	nSaves   atomic.Uint64
	nCommits atomic.Uint64
}

// Stats returns how many saves were written, in how many commits (each
// one sync unless NoSync).
func (b *Store) Stats() (saves, commits uint64) { return b.nSaves.Load(), b.nCommits.Load() }

// saveReq is a save (or, with del, a deletion) waiting to be written with
// others in one batch.
type saveReq struct {
	k       store.Key
	version uint64
	// key, val are the record's key and encoded record; audit the encoded
	// audit entry (nil for none): all made by the saver, before it queues.
	key, val, audit []byte
	del             bool
	// wake carries its outcome, or errLead when it is to lead the next
	// batch (before its own batch, so never both at once).
	wake chan error
}

// errLead wakes a waiting save to lead the next batch.
var errLead = errors.New("lead the next batch")

// maxVersions bounds the versions cached (the cache starts over when full).
const maxVersions = 1 << 16

// maxBatch bounds the saves written in one batch.
const maxBatch = 256

// badgerOptions sizes Badger for a small local server rather than its
// defaults (a 64 MiB memtable, 1 GiB value log files): a memtable of
// 4 MiB (its log, 8 MiB, is preallocated and memory-mapped), value log
// files of 16 MiB, tables of 1 MiB at every level, level 0 compacted
// from 3 tables (writes wait at 6), and values under 256 KiB kept in the
// tables (one log and one sync per commit). What Badger may write once
// saves stop (DefaultMinFree) follows from these.
func badgerOptions(dir string, o Options, l dgbadger.Logger) dgbadger.Options {
	opts := dgbadger.DefaultOptions(dir).
		WithSyncWrites(!o.NoSync).
		WithDetectConflicts(false). // the leader serializes the writes
		WithReadOnly(o.ReadOnly).
		WithBypassLockGuard(bypassBadgerLock).
		WithLogger(l).
		WithMetricsEnabled(false).
		WithNumMemtables(2).
		WithMemTableSize(4 << 20).
		WithBaseTableSize(1 << 20).
		WithBaseLevelSize(8 << 20).
		WithNumLevelZeroTables(3).
		WithNumLevelZeroTablesStall(6).
		WithValueLogFileSize(16 << 20).
		WithValueThreshold(256 << 10).
		WithBlockCacheSize(4 << 20).
		WithIndexCacheSize(2 << 20).
		WithNumCompactors(2).
		WithVerifyValueChecksum(true).
		WithChecksumVerificationMode(options.OnBlockRead)
	// Tables of one size at every level: a compaction writes at most the
	// tables it merges (a level 0 of 6 memtables and the tables of level
	// 1 they overlap; a table and about ten of the next level), which
	// the reserve must hold until it removes its inputs.
	opts.TableSizeMultiplier = 1
	if o.SmallTables {
		opts = opts.WithMemTableSize(256 << 10).
			WithBaseTableSize(64 << 10).
			WithBaseLevelSize(256 << 10).
			WithNumLevelZeroTables(2).
			WithNumLevelZeroTablesStall(4).
			WithValueLogFileSize(16 << 20).
			WithValueThreshold(12 << 10)
	}
	return opts
}

// Open opens (or creates) a store in dir.
//
// The folder is checked first, under the folder's lock and changing
// nothing: a store whose files do not show that they hold what it
// acknowledged (a MANIFEST missing or damaged, a table or a log that
// does not check, tables that a damaged MANIFEST no longer names) is
// refused with ErrDamaged. A store that was not closed cleanly (a killed
// server) is opened on a scratch copy first, where every value is read
// back, before Badger recovers it in place. The write-ahead logs of the
// store's earlier format are imported, and its keys rewritten (once).
func Open(dir string, o Options) (*Store, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	o.Logger = log
	if o.ReadOnly || o.MustExist {
		if info, err := os.Stat(dir); err != nil || !info.IsDir() {
			return nil, fmt.Errorf("%w at %s: no such folder", ErrNoStore, dir)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	unlock, err := lockDir(dir, o.ReadOnly)
	if errors.Is(err, errLockHeld) {
		return nil, fmt.Errorf("%w: %s is held by another stategate (is a server running on it?)", ErrLocked, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	b, err := openChecked(dir, o, log)
	if err != nil {
		unlock()
		return nil, err
	}
	b.unlock = unlock
	return b, nil
}

// openChecked checks the folder and opens the store, under its lock.
func openChecked(dir string, o Options, log *slog.Logger) (*Store, error) {
	ins, err := inspect(dir, log)
	if err != nil {
		var pe *os.PathError
		if !errors.Is(err, ErrDamaged) && errors.As(err, &pe) {
			return nil, fmt.Errorf("open store %s: %w", dir, err)
		}
		return nil, err
	}
	if ins.empty && (o.ReadOnly || o.MustExist) {
		return nil, fmt.Errorf("%w at %s: the folder holds no stategate store", ErrNoStore, dir)
	}
	if !o.ReadOnly {
		if err := checkFree(dir, minFree(o), 0); err != nil {
			return nil, fmt.Errorf("cannot open the store for writing: %w", err)
		}
	}
	if ins.unclean != "" || (o.ReadOnly && len(ins.oldBatches) > 0) {
		// Checked (and, to read only, read) on a scratch copy, which
		// Badger may recover and change.
		log.Info("store: checking a scratch copy of the store first", "store", dir, "why", ins.unclean)
		s, err := openScratch(dir, ins, o, log)
		if err != nil {
			return nil, err
		}
		if o.ReadOnly {
			return s, nil
		}
		if err := s.Close(); err != nil {
			return nil, err
		}
		if ins.unclean != "" {
			log.Info("store: recovering what the last run left (it was not closed cleanly)", "store", dir, "why", ins.unclean)
		}
	}
	if !ins.empty && ins.unclean == "" {
		// The values in the value logs must all be there: a value log
		// deleted or cut at a record's end shows only in the pointers to
		// it. Checked read-only in place, changing nothing (a scratch
		// copy was read whole).
		ro := o
		ro.ReadOnly, ro.GCInterval = true, -1
		r, err := openDB(dir, ro)
		if err != nil {
			return nil, damaged(dir, "Badger cannot open it: %v", err)
		}
		if err := readAll(r.db, dir, 1<<10); err != nil {
			r.Close()
			return nil, err
		}
		if o.ReadOnly {
			if r.upgraded() {
				return r, nil
			}
			// Keys of the earlier format: rewritten on a scratch copy.
			r.Close()
			return openScratch(dir, ins, o, log)
		}
		r.Close()
	}
	if o.NoSync && len(ins.oldBatches) > 0 {
		// The old logs go only once Badger holds what they held on the
		// disk: imported with syncs, whatever NoSync says.
		so := o
		so.NoSync, so.GCInterval = false, -1
		u, err := openDB(dir, so)
		if err != nil {
			return nil, err
		}
		err = u.upgrade(ins, true)
		if cerr := u.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		ins.oldBatches, ins.oldLogs = nil, nil
	}
	if err := removeEmptyLogs(dir, ins.emptyLogs); err != nil {
		return nil, err
	}
	b, err := openDB(dir, o)
	if err != nil {
		return nil, err
	}
	if err := b.upgrade(ins, true); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// removeEmptyLogs removes the memtable logs a kill left empty (see
// inspection.emptyLogs), durably, before Badger opens the store in place.
func removeEmptyLogs(dir string, names []string) error {
	for _, name := range names {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("open store %s: %w", dir, err)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return syncDir(dir)
}

// openScratch copies the store (but the orphan tables) to a temporary
// folder, opens it there as Badger would open the store in place,
// checks that it holds what the orphans hold and that every value reads
// back, and returns it (read-only when o.ReadOnly).
func openScratch(dir string, ins *inspection, o Options, log *slog.Logger) (*Store, error) {
	tmp, err := os.MkdirTemp("", "stategate-scratch-")
	if err != nil {
		return nil, fmt.Errorf("cannot make a scratch copy of the store %s: %w", dir, err)
	}
	skip := map[uint64]bool{}
	for _, id := range ins.orphans {
		skip[id] = true
	}
	if err := copyStore(dir, tmp, skip, ins.emptyLogs); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("cannot make a scratch copy of the store %s in %s: %w", dir, tmp, err)
	}
	so := o
	so.ReadOnly, so.MinFree, so.GCInterval = false, -1, -1
	so.Logger = log.With("scratch", tmp)
	s, err := openDB(tmp, so)
	if err == nil {
		err = checkOrphans(s.db, dir, ins, log)
		if err == nil {
			err = s.upgrade(ins, false)
		}
		if err == nil {
			err = readAll(s.db, dir, 0)
		}
		if err != nil {
			s.Close()
		}
	}
	if err != nil {
		os.RemoveAll(tmp)
		if !errors.Is(err, ErrDamaged) {
			msg := strings.ReplaceAll(err.Error(), "open store "+tmp+": ", "")
			err = damaged(dir, "Badger cannot open it: %s", strings.ReplaceAll(msg, tmp, "(a scratch copy)"))
		}
		return nil, err
	}
	s.scratch, s.readOnly, s.dir = tmp, o.ReadOnly, dir
	return s, nil
}

func minFree(o Options) int64 {
	if o.MinFree == 0 {
		return DefaultMinFree
	}
	return o.MinFree
}

// checkFree refuses (store.ErrNoSpace) if writing need bytes in dir would leave
// less than reserve free.
func checkFree(dir string, reserve, need int64) error {
	if reserve < 0 {
		return nil
	}
	free, err := freeSpace(dir)
	if err != nil {
		return err
	}
	return spaceError(dir, free, reserve, need)
}

func spaceError(dir string, free, reserve, need int64) error {
	if free-need >= reserve {
		return nil
	}
	return fmt.Errorf("%w: %s has %s free, and the store keeps %s in reserve (--min-free); free some space and the store writes again",
		store.ErrNoSpace, dir, mib(free), mib(reserve))
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// openDB opens Badger in dir (checked) and starts the store.
func openDB(dir string, o Options) (*Store, error) {
	b := &Store{dir: dir, log: o.Logger, stop: make(chan struct{}), retention: store.DefaultAuditRetention,
		minFree: minFree(o), readOnly: o.ReadOnly, versions: map[store.Key]uint64{}, pending: map[store.Key]uint64{},
		counts: map[string]uint64{}, pendingCounts: map[string]uint64{}}
	opts := badgerOptions(dir, o, badgerLogger{log: o.Logger, syncErr: &b.syncErr})
	db, err := dgbadger.Open(opts)
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("%w: %s is held by another stategate (is a server running on it?)", ErrLocked, dir)
		}
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	b.db = db
	b.indexed = b.format() == formatVersion
	b.threshold, b.maxSize, b.maxCount = opts.ValueThreshold, db.MaxBatchSize(), db.MaxBatchCount()
	b.commit = func(txn *dgbadger.Txn) error { return txn.Commit() }
	b.free = func() (int64, error) { return freeSpace(dir) }
	if o.AuditRetention > 0 {
		b.retention = uint64(o.AuditRetention)
	}
	every := o.GCInterval
	if every == 0 {
		every = 10 * time.Minute
	}
	if every > 0 && !o.ReadOnly {
		b.done.Add(1)
		go b.gc(every)
	}
	return b, nil
}

// upgraded reports whether the store's keys are of the current format:
// a format is recorded, or no key is of the earlier one. (A store of
// format 2 has them, and no index.)
func (b *Store) upgraded() bool {
	return b.format() != "" || !b.hasPrefix(oldInstancePrefix) && !b.hasPrefix(oldAuditPrefix)
}

// format returns the store's recorded format, "" for none.
func (b *Store) format() string {
	v, err := b.get(formatKey)
	if err != nil {
		return ""
	}
	return string(v)
}

func (b *Store) hasPrefix(p string) bool {
	found := false
	b.db.View(func(txn *dgbadger.Txn) error {
		opts := dgbadger.DefaultIteratorOptions
		opts.Prefix, opts.PrefetchValues = []byte(p), false
		it := txn.NewIterator(opts)
		defer it.Close()
		it.Rewind()
		found = it.Valid()
		return nil
	})
	return found
}

// upgrade brings a store of an earlier format to this one: the saves its
// write-ahead logs hold go to Badger (older generation first), its keys
// are rewritten, its index is built, and the format is recorded; then, if
// removeLogs, the logs are removed (renamed, if a save in them could not
// be imported).
func (b *Store) upgrade(ins *inspection, removeLogs bool) error {
	skipped := 0
	if len(ins.oldBatches) > 0 {
		n := 0
		wb := b.db.NewWriteBatch()
		for _, ops := range ins.oldBatches {
			for _, op := range ops {
				if len(op.key) > 65000 {
					// Over Badger's limit: the old store could never have
					// moved it to Badger either.
					skipped++
					b.log.Error("store: a save in the old write-ahead log has a key over Badger's limit and is left out (the logs are kept, renamed *.skipped)", "key", describeKey(op.key))
					continue
				}
				var err error
				if op.del {
					err = wb.Delete(op.key)
				} else {
					err = wb.Set(op.key, op.val)
				}
				if err != nil {
					wb.Cancel()
					return fmt.Errorf("import the write-ahead logs of %s: %w", b.dir, err)
				}
				n++
			}
		}
		if err := wb.Flush(); err != nil {
			return fmt.Errorf("import the write-ahead logs of %s: %w", b.dir, err)
		}
		if err := b.db.Sync(); err != nil {
			return fmt.Errorf("import the write-ahead logs of %s: %w", b.dir, err)
		}
		b.log.Info("store: imported the write-ahead logs of the earlier format", "store", b.dir, "batches", len(ins.oldBatches), "writes", n)
	}
	if len(ins.oldBatches) > 0 || b.format() == "" {
		if err := b.migrateKeys(); err != nil {
			return err
		}
	}
	if b.format() != formatVersion {
		if err := b.buildIndex(); err != nil {
			return err
		}
	}
	if err := b.loadSeq(); err != nil {
		return err
	}
	if !removeLogs || len(ins.oldLogs) == 0 {
		return nil
	}
	// Badger holds (synced) what they held: they go.
	for _, path := range ins.oldLogs {
		var err error
		if skipped > 0 {
			err = os.Rename(path, path+".skipped")
		} else {
			err = os.Remove(path)
		}
		if err != nil {
			return err
		}
	}
	return syncDir(b.dir)
}

// migrateKeys rewrites the keys of the earlier format ("i/..." and
// "a/...") as this format's and records the format. A crash midway leaves
// some keys in each format; the next open goes on.
func (b *Store) migrateKeys() error {
	n := 0
	wb := b.db.NewWriteBatch()
	for _, prefix := range []string{oldInstancePrefix, oldAuditPrefix} {
		err := b.db.View(func(txn *dgbadger.Txn) error {
			opts := dgbadger.DefaultIteratorOptions
			opts.Prefix = []byte(prefix)
			it := txn.NewIterator(opts)
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				old := it.Item().KeyCopy(nil)
				nk, ok := newKeyOf(old)
				if !ok {
					b.log.Warn("store: a key of the earlier format does not parse and is left as it is", "key", fmt.Sprintf("%d bytes", len(old)))
					continue
				}
				val, err := it.Item().ValueCopy(nil)
				if err != nil {
					return err
				}
				if err := wb.Set(nk, val); err != nil {
					return err
				}
				if err := wb.Delete(old); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			wb.Cancel()
			return fmt.Errorf("rewrite the keys of %s: %w", b.dir, err)
		}
	}
	if err := wb.Set(formatKey, []byte(formatNoIndex)); err != nil {
		wb.Cancel()
		return err
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("rewrite the keys of %s: %w", b.dir, err)
	}
	if err := b.db.Sync(); err != nil {
		return err
	}
	if n > 0 {
		b.log.Info("store: rewrote the keys of the earlier format", "store", b.dir, "keys", n)
	}
	return nil
}

// buildIndex builds the index of a store of format 2 (which has none):
// the instances in the order of their records' times (their last saves:
// a store of format 2 knows no creations), numbered from 1, and their
// counts per machine; then records the format. An index left half built
// (a crash) is dropped first.
func (b *Store) buildIndex() error {
	for _, tag := range []byte{tagRecent, tagSeq, tagCount} {
		if err := b.db.DropPrefix([]byte{tag}); err != nil {
			return fmt.Errorf("build the index of %s: %w", b.dir, err)
		}
	}
	type saved struct {
		k       store.Key
		key     []byte
		updated time.Time
	}
	var all []saved
	err := b.db.View(func(txn *dgbadger.Txn) error {
		opts := dgbadger.DefaultIteratorOptions
		opts.Prefix = []byte{tagInstance}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k, ok := parseInstanceKey(it.Item().Key())
			if !ok {
				continue
			}
			s := saved{k: k, key: it.Item().KeyCopy(nil)}
			err := it.Item().Value(func(v []byte) error {
				var r struct {
					Updated time.Time `json:"updated"`
				}
				if len(v) > 8 && json.Unmarshal(v[8:], &r) == nil {
					s.updated = r.Updated // (a record that does not decode goes first)
				}
				return nil
			})
			if err != nil {
				return err
			}
			all = append(all, s)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("build the index of %s: %w", b.dir, err)
	}
	slices.SortStableFunc(all, func(x, y saved) int {
		if c := x.updated.Compare(y.updated); c != 0 {
			return c
		}
		return bytes.Compare(x.key, y.key)
	})
	counts := map[string]uint64{}
	wb := b.db.NewWriteBatch()
	set := func(k, v []byte) error {
		if err := wb.Set(k, v); err != nil {
			wb.Cancel()
			return fmt.Errorf("build the index of %s: %w", b.dir, err)
		}
		return nil
	}
	for i, s := range all {
		seq := uint64(i + 1)
		if err := set(recentKey(s.k.Machine, seq), recentValue(s.k.Handle)); err != nil {
			return err
		}
		if err := set(seqKey(s.k), uint64Bytes(seq)); err != nil {
			return err
		}
		counts[s.k.Machine]++
	}
	for m, c := range counts {
		if err := set(countKey(m), uint64Bytes(c)); err != nil {
			return err
		}
	}
	if err := set(formatKey, []byte(formatVersion)); err != nil {
		return err
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("build the index of %s: %w", b.dir, err)
	}
	if err := b.db.Sync(); err != nil {
		return err
	}
	b.indexed = true
	if len(all) > 0 { // (a new store has nothing to say)
		b.log.Info("store: built the index of the instances (once, for a store of an earlier version)", "store", b.dir, "instances", len(all), "machines", len(counts))
	}
	return nil
}

// loadSeq reads the number of the last creation: the highest in the
// machines' indexes.
func (b *Store) loadSeq() error {
	machines, err := b.machines()
	if err != nil {
		return err
	}
	return b.db.View(func(txn *dgbadger.Txn) error {
		for _, m := range machines {
			prefix := machinePrefix(tagRecent, m)
			opts := dgbadger.DefaultIteratorOptions
			opts.PrefetchValues, opts.Prefix, opts.Reverse = false, prefix, true
			it := txn.NewIterator(opts)
			it.Seek(append(append([]byte(nil), prefix...), bytes.Repeat([]byte{0xff}, 9)...))
			if it.Valid() {
				if key := it.Item().Key(); len(key) == len(prefix)+8 {
					b.seq = max(b.seq, binary.BigEndian.Uint64(key[len(prefix):]))
				}
			}
			it.Close()
		}
		return nil
	})
}

// machines returns the ids of the machines that have instances stored
// (their counts' keys).
func (b *Store) machines() ([]string, error) {
	keys, err := b.keys([]byte{tagCount}, 0)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(keys))
	for _, key := range keys {
		if m, ok := parseCountKey(key); ok {
			out = append(out, m)
		}
	}
	return out, nil
}

// commitQueued writes the waiting saves (up to maxBatch) in one batch,
// then hands the lead to the first save still waiting, if any.
func (b *Store) commitQueued() {
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
	next.wake <- errLead
}

// group is the saves of one transaction.
type group struct {
	txn         *dgbadger.Txn
	members     []int
	versions    map[store.Key]uint64
	counts      map[string]uint64
	size, count int64
}

func (b *Store) newGroup() *group {
	return &group{txn: b.db.NewTransaction(true), versions: map[store.Key]uint64{}, counts: map[string]uint64{}}
}

// writeBatch writes a batch: each save (if its instance is still at its
// version) goes into the current transaction, or, if it would make it
// exceed Badger's limits, into a new one after the current one is
// committed.
func (b *Store) writeBatch(batch []*saveReq) {
	results := make([]error, len(batch))
	clear(b.pending)
	clear(b.pendingCounts)
	var g *group
	// stopped, once set, ends the batch: every save not yet written gets
	// it.
	stopped := error(nil)
	flush := func() {
		if g == nil {
			return
		}
		err := b.commitGroup(g)
		for _, i := range g.members {
			results[i] = err
		}
		if err != nil {
			stopped = b.failure()
		}
		g = nil
	}
	var need int64
	for _, r := range batch {
		need += int64(2*len(r.key) + len(r.val) + len(r.audit) + 64)
	}
	if err := b.checkSpace(need); err != nil {
		stopped = err
	}
	for i, r := range batch {
		if stopped != nil {
			results[i] = stopped
			continue
		}
		if r.del {
			flush()
			if stopped == nil {
				results[i] = b.drop(r.k)
				if results[i] != nil && !errors.Is(results[i], store.ErrNotFound) {
					stopped = b.failure()
				}
			} else {
				results[i] = stopped
			}
			continue
		}
		cur, err := b.version(r.k, r.key)
		if err != nil {
			results[i] = err
			continue
		}
		if cur != r.version {
			results[i] = store.ErrConflict
			continue
		}
		var instances, seq uint64 // the machine's count and the number of a creation
		if cur == 0 {
			if instances, err = b.count(r.k.Machine); err != nil {
				results[i] = err
				continue
			}
			instances++
			seq = b.seq + 1
		}
		entries := b.entriesOf(r, seq)
		size, count := b.estimate(entries)
		if instances > 0 {
			// The machine's count, which the transaction writes once
			// as it commits (commitGroup), counted with each creation.
			s, c := b.estimate([]entry{{key: countKey(r.k.Machine), val: uint64Bytes(instances)}})
			size, count = size+s, count+c
		}
		if g != nil && (g.count+count >= b.maxCount || g.size+size >= b.maxSize) {
			flush()
			if stopped != nil {
				results[i] = stopped
				continue
			}
		}
		if count >= b.maxCount || size >= b.maxSize {
			results[i] = fmt.Errorf("%w: the save takes %d bytes in a transaction, over Badger's limit of %d", store.ErrTooLarge, size, b.maxSize)
			continue
		}
		if g == nil {
			g = b.newGroup()
		}
		for _, e := range entries {
			if e.del {
				err = g.txn.Delete(e.key)
			} else {
				err = g.txn.Set(e.key, e.val)
			}
			if err != nil {
				break
			}
		}
		if err != nil {
			// Not expected (entriesOf and estimate follow Badger's own
			// accounting): the transaction holds part of this save, and
			// is dropped with the saves before it.
			g.txn.Discard()
			for _, j := range g.members {
				results[j] = fmt.Errorf("store: a transaction was refused: %w", err)
			}
			results[i] = fmt.Errorf("store: a transaction was refused: %w", err)
			stopped = fmt.Errorf("store: a transaction was refused: %w", err)
			g = nil
			continue
		}
		g.members = append(g.members, i)
		g.size += size
		g.count += count
		g.versions[r.k] = r.version + 1
		b.pending[r.k] = r.version + 1
		if instances > 0 {
			b.seq = seq
			g.counts[r.k.Machine] = instances
			b.pendingCounts[r.k.Machine] = instances
		}
	}
	flush()
	b.nSaves.Add(uint64(len(batch)))
	for i, r := range batch {
		r.wake <- results[i]
	}
}

// entry is one write of a transaction.
type entry struct {
	key, val []byte
	del      bool
}

// entriesOf returns a save's writes: its record, its audit entry, the
// deletion of the audit entry that falls out of the retention, and, for
// the save that creates the instance (seq, the creation's number, is
// set), its index entries (but its machine's count, which its
// transaction writes once: see commitGroup).
func (b *Store) entriesOf(r *saveReq, seq uint64) []entry {
	out := []entry{{key: r.key, val: r.val}}
	if seq != 0 {
		out = append(out, entry{key: recentKey(r.k.Machine, seq), val: recentValue(r.k.Handle)},
			entry{key: seqKey(r.k), val: uint64Bytes(seq)})
	}
	if r.audit == nil {
		return out
	}
	v := r.version + 1
	out = append(out, entry{key: auditKey(r.k, v), val: r.audit})
	if v > b.retention {
		out = append(out, entry{key: auditKey(r.k, v-b.retention), del: true})
	}
	return out
}

// estimate is what writes count against Badger's transaction limits, as
// Badger counts them (Txn.checkSize).
func (b *Store) estimate(es []entry) (size, count int64) {
	for _, e := range es {
		k, v := int64(len(e.key)), int64(len(e.val))
		if v < b.threshold {
			size += k + v + 2
		} else {
			size += k + 12 + 2
		}
		size += 10
		count++
	}
	return size, count
}

// checkSpace refuses a write of need bytes that would eat into the
// reserve.
func (b *Store) checkSpace(need int64) error {
	if b.minFree < 0 {
		return nil
	}
	free, err := b.free()
	if err != nil {
		return fmt.Errorf("store: cannot tell the free disk space: %w", err)
	}
	return spaceError(b.dir, free, b.minFree, need)
}

// commitGroup commits a transaction, synced unless NoSync. A failure
// leaves the outcome unknown and fails the store.
func (b *Store) commitGroup(g *group) error {
	b.nCommits.Add(1)
	// The counts of the machines whose instances it creates or deletes
	// (their sizes are in the members' estimates).
	for m, c := range g.counts {
		var err error
		if c == 0 {
			err = g.txn.Delete(countKey(m))
		} else {
			err = g.txn.Set(countKey(m), uint64Bytes(c))
		}
		if err != nil {
			g.txn.Discard()
			return fmt.Errorf("store: a transaction was refused: %w", err)
		}
	}
	err := b.commit(g.txn)
	if err == nil {
		if msg := b.syncErr.Load(); msg != nil {
			err = errors.New(*msg)
		}
	}
	if err != nil {
		b.fail(fmt.Errorf("%w: %w", store.ErrDiskFailed, err))
		return fmt.Errorf("%w: %w", store.ErrOutcomeUnknown, err)
	}
	b.vmu.Lock()
	if len(b.versions)+len(g.versions) > maxVersions {
		clear(b.versions)
	}
	for k, v := range g.versions {
		b.versions[k] = v
	}
	for m, c := range g.counts {
		b.counts[m] = c
	}
	b.vmu.Unlock()
	return nil
}

// fail records that the disk failed: every later write fails with err.
func (b *Store) fail(err error) {
	b.mu.Lock()
	if b.failed == nil {
		b.failed = err
		b.log.Error("store: the disk failed; every change is refused until the store is opened again (the server restarted)", "err", err)
	}
	b.mu.Unlock()
}

func (b *Store) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failed
}

func (b *Store) gc(every time.Duration) {
	defer b.done.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			if b.failure() != nil || b.checkSpace(16<<20) != nil {
				continue
			}
			for b.db.RunValueLogGC(0.5) == nil {
			}
		}
	}
}

// A stored value is the version (8 bytes, big-endian) then the record as
// JSON (store.AppendRecord's: store.Record's JSON, the snapshot taken as
// it is). encode writes a record after its version; it refuses what
// store.AppendRecord refuses (a snapshot that is not JSON, a record over
// store.MaxRecordSize).
func encode(rec store.Record, version uint64) ([]byte, error) {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(rec.Snapshot)+128), version)
	return store.AppendRecord(b, rec)
}

func decode(v []byte) (store.Record, uint64, error) {
	if len(v) < 8 {
		return store.Record{}, 0, errors.New("corrupt record")
	}
	var rec store.Record
	if err := json.Unmarshal(v[8:], &rec); err != nil {
		return store.Record{}, 0, fmt.Errorf("corrupt record: %w", err)
	}
	if string(rec.Snapshot) == "null" {
		rec.Snapshot = nil // a reset
	}
	return rec, binary.BigEndian.Uint64(v), nil
}

// Load returns an instance's record and version.
func (b *Store) Load(ctx context.Context, k store.Key) (store.Record, uint64, error) {
	if err := ctx.Err(); err != nil {
		return store.Record{}, 0, err
	}
	if err := store.CheckKey(k); err != nil {
		return store.Record{}, 0, err
	}
	v, err := b.get(instanceKey(k))
	if errors.Is(err, dgbadger.ErrKeyNotFound) {
		return store.Record{}, 0, store.ErrNotFound
	}
	if err != nil {
		return store.Record{}, 0, err
	}
	return decode(v)
}

// Save stores a record if the instance is still at version. Concurrent
// saves are written together (see Store); the save returns once its
// transaction is on the disk (in the operating system's cache with
// NoSync). The record is encoded, and its size checked, before it joins
// the queue.
func (b *Store) Save(ctx context.Context, k store.Key, rec store.Record, version uint64) (uint64, error) {
	if b.readOnly {
		return 0, store.ErrReadOnly
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := store.CheckKey(k); err != nil {
		return 0, err
	}
	if rec.Updated.IsZero() {
		rec.Updated = time.Now()
	}
	r := &saveReq{k: k, version: version, key: instanceKey(k)}
	var err error
	if r.val, err = encode(rec, version+1); err != nil {
		return 0, err
	}
	if rec.Audit != nil {
		entry := *rec.Audit
		entry.Version = version + 1
		if r.audit, err = store.MarshalAuditEntry(entry); err != nil {
			return 0, err
		}
	}
	if err := b.enqueue(r); err != nil {
		return 0, err
	}
	return version + 1, nil
}

// enqueue writes a request with the others waiting and returns its
// outcome.
func (b *Store) enqueue(r *saveReq) error {
	r.wake = make(chan error, 1)
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
		// for the next sync.
		runtime.Gosched()
		b.commitQueued()
	}
	for {
		err := <-r.wake
		if err != errLead {
			return err
		}
		b.commitQueued()
	}
}

// version returns an instance's stored version (0: not stored), as the
// batch being written leaves it.
func (b *Store) version(k store.Key, key []byte) (uint64, error) {
	if v, ok := b.pending[k]; ok {
		return v, nil
	}
	b.vmu.Lock()
	v, ok := b.versions[k]
	b.vmu.Unlock()
	if ok {
		return v, nil
	}
	val, err := b.get(key)
	if errors.Is(err, dgbadger.ErrKeyNotFound) {
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

// count returns a machine's count of instances, as the batch being
// written leaves it.
func (b *Store) count(machine string) (uint64, error) {
	if c, ok := b.pendingCounts[machine]; ok {
		return c, nil
	}
	b.vmu.Lock()
	c, ok := b.counts[machine]
	b.vmu.Unlock()
	if ok {
		return c, nil
	}
	val, err := b.get(countKey(machine))
	if errors.Is(err, dgbadger.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(val) != 8 {
		return 0, errors.New("corrupt count of instances")
	}
	return binary.BigEndian.Uint64(val), nil
}

// drop deletes an instance, its audit trail first, then its record and
// index entries, in transactions of its own.
func (b *Store) drop(k store.Key) error {
	cur, err := b.version(k, instanceKey(k))
	if err != nil {
		return err
	}
	keys, err := b.keys(trailPrefix(k), 0)
	if err != nil {
		return err
	}
	var g *group
	add := func(es []entry) error {
		size, count := b.estimate(es)
		if g != nil && (g.count+count >= b.maxCount || g.size+size >= b.maxSize) {
			if err := b.commitGroup(g); err != nil {
				return err
			}
			g = nil
		}
		if g == nil {
			g = b.newGroup()
		}
		for _, e := range es {
			var err error
			if e.del {
				err = g.txn.Delete(e.key)
			} else {
				err = g.txn.Set(e.key, e.val)
			}
			if err != nil {
				g.txn.Discard()
				return err
			}
		}
		g.size += size
		g.count += count
		return nil
	}
	for _, key := range keys {
		if err := add([]entry{{key: key, del: true}}); err != nil {
			return err
		}
	}
	last := []entry{{key: instanceKey(k), del: true}}
	var count uint64
	if cur != 0 {
		if count, err = b.count(k.Machine); err != nil {
			return err
		}
		count = max(count, 1) - 1
		if seq, err := b.get(seqKey(k)); err == nil && len(seq) == 8 {
			last = append(last, entry{key: recentKey(k.Machine, binary.BigEndian.Uint64(seq)), del: true})
		} else if err != nil && !errors.Is(err, dgbadger.ErrKeyNotFound) {
			return err
		}
		last = append(last, entry{key: seqKey(k), del: true})
	}
	size, n := b.estimate(last)
	if cur != 0 {
		s, c := b.estimate([]entry{{key: countKey(k.Machine), val: uint64Bytes(count)}}) // (commitGroup writes it)
		size, n = size+s, n+c
	}
	if g != nil && (g.count+n >= b.maxCount || g.size+size >= b.maxSize) {
		if err := b.commitGroup(g); err != nil {
			return err
		}
		g = nil
	}
	if err := add(last); err != nil {
		return err
	}
	g.versions[k] = 0
	b.pending[k] = 0
	if cur != 0 {
		g.counts[k.Machine] = count
		b.pendingCounts[k.Machine] = count
	}
	return b.commitGroup(g)
}

// keys returns the keys with a prefix, in order, at most the last n of
// them when n > 0.
func (b *Store) keys(prefix []byte, n int) ([][]byte, error) {
	var keys [][]byte
	err := b.db.View(func(txn *dgbadger.Txn) error {
		opts := dgbadger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = prefix
		opts.Reverse = n > 0
		it := txn.NewIterator(opts)
		defer it.Close()
		if n > 0 {
			it.Seek(append(append([]byte(nil), prefix...), bytes.Repeat([]byte{0xff}, 9)...))
		} else {
			it.Rewind()
		}
		for ; it.Valid(); it.Next() {
			if n > 0 && len(keys) >= n {
				break
			}
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		return nil
	})
	if n > 0 {
		for i, j := 0, len(keys)-1; i < j; i, j = i+1, j-1 {
			keys[i], keys[j] = keys[j], keys[i]
		}
	}
	return keys, err
}

// get returns a key's value.
func (b *Store) get(key []byte) ([]byte, error) {
	var val []byte
	err := b.db.View(func(txn *dgbadger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		val, err = item.ValueCopy(nil)
		return err
	})
	return val, err
}

// Delete removes an instance and its audit trail.
func (b *Store) Delete(ctx context.Context, k store.Key) error {
	if b.readOnly {
		return store.ErrReadOnly
	}
	if err := store.CheckKey(k); err != nil {
		return err
	}
	return b.enqueue(&saveReq{k: k, del: true})
}

// Audit returns the last n entries of an instance's audit trail, oldest
// first.
func (b *Store) Audit(ctx context.Context, k store.Key, n int) ([]store.AuditEntry, error) {
	if err := store.CheckKey(k); err != nil {
		return nil, err
	}
	var out []store.AuditEntry
	err := b.db.View(func(txn *dgbadger.Txn) error {
		prefix := trailPrefix(k)
		opts := dgbadger.DefaultIteratorOptions
		opts.Prefix, opts.Reverse = prefix, true
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(append(prefix, bytes.Repeat([]byte{0xff}, 9)...)); it.Valid(); it.Next() {
			if n > 0 && len(out) >= n {
				break
			}
			var e store.AuditEntry
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &e) }); err != nil {
				return fmt.Errorf("audit entry of %s %q: %w", k.Machine, truncate(k.Handle), err)
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// List returns the stored instances' keys.
func (b *Store) List(ctx context.Context) ([]store.Key, error) {
	keys, err := b.keys([]byte{tagInstance}, 0)
	if err != nil {
		return nil, err
	}
	out := make([]store.Key, 0, len(keys))
	for _, key := range keys {
		if k, ok := parseInstanceKey(key); ok {
			out = append(out, k)
		}
	}
	return out, nil
}

// Recent returns the keys of the n newest instances (of a machine, or of
// every machine for ""), the newest first, from the index: for every
// machine, the last n of its index, merged.
func (b *Store) Recent(ctx context.Context, machine string, n int) ([]store.Key, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, nil
	}
	if !b.indexed {
		return b.scanRecent(ctx, machine, n)
	}
	machines := []string{machine}
	if machine == "" {
		var err error
		if machines, err = b.machines(); err != nil {
			return nil, err
		}
	}
	type saved struct {
		k   store.Key
		seq uint64
	}
	var all []saved
	err := b.db.View(func(txn *dgbadger.Txn) error {
		for _, m := range machines {
			prefix := machinePrefix(tagRecent, m)
			opts := dgbadger.DefaultIteratorOptions
			opts.Prefix, opts.Reverse, opts.PrefetchSize = prefix, true, min(n, 100)
			it := txn.NewIterator(opts)
			got := 0
			for it.Seek(append(append([]byte(nil), prefix...), bytes.Repeat([]byte{0xff}, 9)...)); it.Valid() && got < n; it.Next() {
				err := it.Item().Value(func(v []byte) error {
					h, seq, ok := parseRecent(it.Item().Key()[len(prefix):], v)
					if !ok {
						return fmt.Errorf("store: a damaged entry in the index of %s", m)
					}
					all = append(all, saved{store.Key{Machine: m, Handle: h}, seq})
					return nil
				})
				if err != nil {
					it.Close()
					return err
				}
				got++
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(all, func(x, y saved) int { return cmp.Compare(y.seq, x.seq) })
	out := make([]store.Key, 0, min(n, len(all)))
	for _, s := range all[:min(n, len(all))] {
		out = append(out, s.k)
	}
	return out, nil
}

// Count returns how many instances of a machine (of every machine for
// "") are stored, from the index.
func (b *Store) Count(ctx context.Context, machine string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if !b.indexed {
		keys, err := b.scanRecent(ctx, machine, -1)
		return len(keys), err
	}
	machines := []string{machine}
	if machine == "" {
		var err error
		if machines, err = b.machines(); err != nil {
			return 0, err
		}
	}
	total := 0
	for _, m := range machines {
		val, err := b.get(countKey(m))
		if errors.Is(err, dgbadger.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if len(val) != 8 {
			return 0, fmt.Errorf("store: the count of the instances of %s is damaged", m)
		}
		total += int(binary.BigEndian.Uint64(val))
	}
	return total, nil
}

// scanRecent is Recent (every key for n < 0) of a store with no index (of
// format 2, opened read-only): every record is read, and sorted by its
// time, as buildIndex sorts them.
func (b *Store) scanRecent(ctx context.Context, machine string, n int) ([]store.Key, error) {
	keys, err := b.List(ctx)
	if err != nil {
		return nil, err
	}
	type saved struct {
		k       store.Key
		updated time.Time
	}
	var all []saved
	for _, k := range keys {
		if machine != "" && k.Machine != machine {
			continue
		}
		rec, _, err := b.Load(ctx, k)
		if err != nil {
			return nil, err
		}
		all = append(all, saved{k, rec.Updated})
	}
	slices.SortStableFunc(all, func(x, y saved) int { return y.updated.Compare(x.updated) })
	if n >= 0 && len(all) > n {
		all = all[:n]
	}
	out := make([]store.Key, len(all))
	for i, s := range all {
		out[i] = s.k
	}
	return out, nil
}

// Close waits for the saves under way and closes the store.
func (b *Store) Close() error {
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
	err := b.db.Close()
	if b.unlock != nil {
		if uerr := b.unlock(); err == nil {
			err = uerr
		}
	}
	if b.scratch != "" {
		os.RemoveAll(b.scratch)
	}
	return err
}

// badgerLogger sends Badger's logs to slog: its warnings and errors only.
// Badger logs a failed sync of a value log file without returning it:
// syncErr records it for the save being committed.
type badgerLogger struct {
	log     *slog.Logger
	syncErr *atomic.Pointer[string]
}

func (l badgerLogger) Errorf(f string, a ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(f, a...))
	if l.syncErr != nil && strings.HasPrefix(f, "Error while curlf sync") {
		l.syncErr.CompareAndSwap(nil, &msg)
	}
	l.log.Error("badger: " + msg)
}
func (l badgerLogger) Warningf(f string, a ...any) {
	l.log.Warn("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}
func (l badgerLogger) Infof(string, ...any)  {}
func (l badgerLogger) Debugf(string, ...any) {}
