package badger

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	dgbadger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/pb"
	"github.com/dgraph-io/badger/v4/table"
	"google.golang.org/protobuf/proto"
)

// ErrDamaged is returned by Open for a store whose files do not
// show that they hold everything it acknowledged: Badger would open it
// and lose data without a word (start empty over its tables and delete
// them, skip a table whose checksum fails, cut a log at a damaged record
// and drop the intact ones after it). Nothing on disk is changed.
var ErrDamaged = errors.New("the store is damaged")

// damaged says what is damaged and what to do.
func damaged(dir, format string, a ...any) error {
	return fmt.Errorf("%w: %s: %s. Nothing was changed. Restore the folder from a backup, or move it aside (then the server starts with an empty store)",
		ErrDamaged, dir, fmt.Sprintf(format, a...))
}

// What Badger keeps in a store's folder.
const (
	manifestName = dgbadger.ManifestFilename
	memExt       = ".mem"
	vlogExt      = ".vlog"
	logHeader    = 20 // a memtable's or value log's header (key id and IV)
)

// inspection is what a look at a store's folder found before Badger
// opens it: it changes nothing.
type inspection struct {
	empty  bool                              // nothing stored: no MANIFEST and no data
	tables map[uint64]dgbadger.TableManifest // the tables the MANIFEST names
	// orphans are the table files that the MANIFEST does not name. A crash
	// leaves some (a flush or a compaction that had written its tables
	// but not yet recorded them, or tables recorded as deleted but not yet
	// removed), but so does a MANIFEST that lost its end; Badger deletes
	// them as it opens.
	orphans []uint64
	names   map[uint64]string // the table files' names
	// emptyLogs are memtable logs a kill left empty, which Badger cannot
	// open: they are left out of a scratch copy, and removed before the
	// store is opened in place.
	emptyLogs []string
	// unclean is why the store was not closed cleanly (a killed server:
	// memtable logs left to replay, a value log or the MANIFEST to cut
	// at a write the crash tore, orphan tables), "" if it was. Badger
	// cannot open such a store read-only, and opening it read-write
	// changes it, so it is checked on a scratch copy first.
	unclean string
	// oldBatches are what the write-ahead logs of the older store hold
	// (oldLogs), to import.
	oldBatches [][]oldOp
	oldLogs    []string
}

// inspect looks at a store's folder, read-only.
func inspect(dir string, log *slog.Logger) (*inspection, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	ins := &inspection{names: map[uint64]string{}}
	var mems, vlogs []string
	ssts := ins.names
	hasManifest := false
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == manifestName:
			hasManifest = true
		case strings.HasSuffix(name, ".sst"):
			if id, ok := table.ParseFileID(name); ok {
				ssts[id] = name
			}
		case strings.HasSuffix(name, memExt):
			mems = append(mems, name)
		case strings.HasSuffix(name, vlogExt):
			vlogs = append(vlogs, name)
		}
	}
	// By number (Badger writes them with leading zeros, 5 or 6 digits,
	// but more when the numbers grow).
	byID := func(a, b string) int { return cmp.Compare(logID(a), logID(b)) }
	slices.SortFunc(mems, byID)
	slices.SortFunc(vlogs, byID)

	if ins.oldBatches, ins.oldLogs, err = readOldLogs(dir); err != nil {
		return nil, damaged(dir, "%v", err)
	}

	// The logs: a memtable's log (.mem) holds the writes not yet in a
	// table; a value log (.vlog) the values too large to live in tables.
	written := 0 // logs that hold writes
	// The version (commit timestamp) of the first write of the oldest
	// memtable log that holds one, and that log.
	var memFirst uint64
	var firstMem string
	unclean := func(why string) {
		if ins.unclean == "" {
			ins.unclean = why
		}
	}
	for _, name := range mems {
		if info, err := os.Stat(filepath.Join(dir, name)); err == nil && info.Size() == 0 {
			// Badger makes a memtable's log, then sizes it: a kill in
			// between leaves it empty (it holds nothing), and Badger
			// refuses to open a store with one ("Create a new file").
			ins.emptyLogs = append(ins.emptyLogs, name)
			unclean("the memtable log " + name + " was made but never sized")
			continue
		}
		data, unmap, err := mapFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		end, err := checkMemLog(data)
		if r, _, ok := readRecord(data, logHeader); ok && memFirst == 0 {
			memFirst, firstMem = parseTs(r.key), name
		}
		unmap()
		if err != nil {
			return nil, damaged(dir, "the memtable log %s is damaged: %v", name, err)
		}
		if end > logHeader {
			written++
		}
		// A clean close flushes every memtable and removes its log.
		unclean("the memtable log " + name + " is left to replay")
	}
	openVlog := "" // a value log that a crash left larger than its data (zeros after it)
	for _, name := range vlogs {
		data, unmap, err := mapFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		end, size := replayEnd(data), len(data)
		zeroed := end < size && allZero(data[end:])
		unmap()
		if end > logHeader {
			written++
		}
		if zeroed {
			openVlog = name
		}
		if end < size {
			// Badger cuts the last value log at its end as it opens; a
			// value it cuts away that the store still points to is found
			// on the scratch copy (readAll).
			unclean("the value log " + name + " ends with " + strconv.Itoa(size-end) + " bytes that do not replay")
		}
	}

	// A running Badger always has a memtable with its log, and writes the
	// last value log from a file made larger than its data; a clean
	// close flushes the memtables and removes their logs, and cuts the
	// value log to its data. A value log left larger with no memtable
	// log means that memtable logs were removed (and the writes they
	// held lost); so do memtable logs whose numbers have a gap (they are
	// flushed and removed oldest first).
	if openVlog != "" && len(mems) == 0 {
		return nil, damaged(dir, "the value log %s was being written when the store stopped, yet no memtable log (.mem) is left: the logs holding the last writes were removed", openVlog)
	}
	for i := 1; i < len(mems); i++ {
		if logID(mems[i]) != logID(mems[i-1])+1 {
			return nil, damaged(dir, "the memtable logs %s and %s are not consecutive: the logs between them were removed", mems[i-1], mems[i])
		}
	}

	if !hasManifest {
		if len(ssts) > 0 || written > 0 || len(ins.oldBatches) > 0 {
			return nil, damaged(dir, "the MANIFEST file is missing, yet the folder holds %d table files and %d logs with data: Badger would start an empty store over them and delete the tables", len(ssts), written)
		}
		ins.empty = true
		return ins, nil
	}
	f, err := os.Open(filepath.Join(dir, manifestName))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	mf, end, err := dgbadger.ReplayManifestFile(f, 0, dgbadger.DefaultOptions(dir).WithLogger(badgerLogger{log: log}))
	if err != nil {
		return nil, damaged(dir, "the MANIFEST (the list of the store's tables) is damaged: %v", err)
	}
	if end < st.Size() {
		// A change torn by a crash, or a MANIFEST cut short: the tables
		// of the changes lost are orphans, checked below.
		unclean(fmt.Sprintf("the MANIFEST ends with %d bytes of a change that did not complete", st.Size()-end))
	}
	ins.tables = mf.Tables
	var tablesMax uint64
	for _, id := range slices.Sorted(maps.Keys(mf.Tables)) {
		path := table.NewFilename(id, dir)
		if _, ok := ssts[id]; !ok {
			return nil, damaged(dir, "the table %s, which the MANIFEST names, is missing", filepath.Base(path))
		}
		t, err := openTable(path, id, mf.Tables[id].Compression)
		if err != nil {
			return nil, damaged(dir, "the table %s is damaged: %v", filepath.Base(path), err)
		}
		tablesMax = max(tablesMax, t.MaxVersion())
	}
	// Commits take consecutive versions, and memtables are flushed to
	// tables oldest first: the oldest memtable log left starts at most
	// one version past the tables (it may overlap them, when a crash
	// came between a flush and the removal of its log). A log that
	// starts further on means that the logs before it were removed.
	if memFirst > tablesMax+1 {
		return nil, damaged(dir, "the memtable log %s starts at version %d, but the tables end at version %d: the writes between them are missing (a memtable log before it was removed)", firstMem, memFirst, tablesMax)
	}
	deleted := deletedTables(f)
	for id := range ssts {
		if _, ok := mf.Tables[id]; !ok && !deleted[id] {
			ins.orphans = append(ins.orphans, id)
		}
	}
	slices.Sort(ins.orphans)
	if len(ins.orphans) > 0 {
		unclean(fmt.Sprintf("%d table files are not in the MANIFEST", len(ins.orphans)))
	}
	return ins, nil
}

// logID is the number of a log file (NNNNN.mem, NNNNNN.vlog).
func logID(name string) int {
	n, _ := strconv.Atoi(strings.TrimSuffix(name, filepath.Ext(name)))
	return n
}

// deletedTables returns the tables that the MANIFEST records as deleted.
// A crash between a compaction's change and the removal of its input
// tables leaves them behind: their data is in the tables that replaced
// them (Badger removes them as it opens).
func deletedTables(f *os.File) map[uint64]bool {
	out := map[uint64]bool{}
	data, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<62))
	if err != nil || len(data) < 8 {
		return out
	}
	for off := 8; off+8 <= len(data); {
		n := int(binary.BigEndian.Uint32(data[off:]))
		if off+8+n > len(data) {
			break
		}
		var set pb.ManifestChangeSet
		if proto.Unmarshal(data[off+8:off+8+n], &set) != nil {
			break
		}
		for _, c := range set.Changes {
			if c.Op == pb.ManifestChange_DELETE {
				out[c.Id] = true
			}
		}
		off += 8 + n
	}
	return out
}

// openTable reads a table file and verifies every checksum in it (its
// index and each block). The whole file is read into memory, so that a
// table cut short or garbled cannot take the process down (Badger's own
// reader exits on some of them).
func openTable(path string, id uint64, c options.CompressionType) (t *table.Table, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// The footer: [index][index length u32][checksum][checksum length u32],
	// big-endian; Badger reads it unchecked.
	n := len(data)
	if n < 8 {
		return nil, fmt.Errorf("%d bytes: too short for a table", n)
	}
	chk := int(binary.BigEndian.Uint32(data[n-4:]))
	if chk > n-8 {
		return nil, fmt.Errorf("the footer's checksum length (%d) runs past the start of the file (cut short?)", chk)
	}
	idx := int(binary.BigEndian.Uint32(data[n-8-chk:]))
	if idx == 0 || idx > n-8-chk {
		return nil, fmt.Errorf("the footer's index length (%d) does not fit in the file (cut short?)", idx)
	}
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("its blocks do not decode (%v)", firstLine(fmt.Sprint(r)))
		}
	}()
	opts := table.Options{ReadOnly: true, BlockSize: 4 << 10, Compression: c, ChkMode: options.OnTableRead}
	t, err = table.OpenInMemoryTable(data, id, &opts)
	if err != nil {
		return nil, err
	}
	if err := t.VerifyChecksum(); err != nil {
		return nil, err
	}
	return t, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Badger's log records: a header (meta, user meta, then uvarints key
// length, value length, expiry), the key (with its version), the value,
// and a CRC-32C of all that. A transaction's records carry bitTxn and are
// followed by a record whose key is txnKey (bitFinTxn); replay keeps a
// transaction only once it has seen that record.
const (
	bitDelete = 1 << 0
	bitTxn    = 1 << 6
	bitFinTxn = 1 << 7
	maxHeader = 22
)

var txnKey = []byte("!badger!txn")

type logRecord struct {
	meta     byte
	key, val []byte
}

// readRecord reads the record at off, if it is whole and checks.
func readRecord(data []byte, off int) (logRecord, int, bool) {
	if off+2 > len(data) {
		return logRecord{}, 0, false
	}
	p := off + 2
	var lens [3]uint64
	for i := range lens {
		v, w := binary.Uvarint(data[p:])
		if w <= 0 {
			return logRecord{}, 0, false
		}
		lens[i], p = v, p+w
	}
	kl, vl := lens[0], lens[1]
	if kl == 0 || kl > 1<<16 || vl > uint64(len(data)) || p+int(kl)+int(vl)+4 > len(data) {
		return logRecord{}, 0, false
	}
	end := p + int(kl) + int(vl)
	if crc32.Checksum(data[off:end], castagnoli) != binary.BigEndian.Uint32(data[end:]) {
		return logRecord{}, 0, false
	}
	return logRecord{meta: data[off], key: data[p : p+int(kl)], val: data[p+int(kl) : end]}, end + 4, true
}

// replayEnd is where Badger's replay of a log stops: after the last
// whole transaction (or record outside a transaction) before a record
// that is torn, damaged or zero.
func replayEnd(data []byte) int {
	end, off := logHeader, logHeader
	var txn uint64
	for {
		r, next, ok := readRecord(data, off)
		if !ok {
			return end
		}
		off = next
		switch {
		case r.meta&bitTxn != 0:
			ts := parseTs(r.key)
			if txn == 0 {
				txn = ts
			}
			if txn != ts {
				return end
			}
		case r.meta&bitFinTxn != 0:
			ts, err := strconv.ParseUint(string(r.val), 10, 64)
			if err != nil || ts != txn {
				return end
			}
			txn, end = 0, off
		default:
			if txn != 0 {
				return end
			}
			end = off
		}
	}
}

func parseTs(key []byte) uint64 {
	if len(key) <= 8 {
		return 0
	}
	return ^binary.BigEndian.Uint64(key[len(key)-8:])
}

// checkMemLog checks a memtable's log and returns where its replay ends.
// Past that end, a crash leaves the transaction it interrupted (records
// of one transaction, maybe torn, maybe with its end record if the tear
// is before it) and then zeros, as the file was made: the records of a
// transaction committed after the end mean that a damaged record stops
// the replay early and that Badger would drop those commits.
func checkMemLog(data []byte) (int, error) {
	end := replayEnd(data)
	if end >= len(data) {
		return end, nil
	}
	// The file was made twice a memtable's size and the memtable is
	// flushed once half of it is written: a crash leaves zeros after the
	// last write, a file cut short does not.
	if zeroTail(data) < minZeroTail {
		return 0, fmt.Errorf("it stops in the middle of a write at offset %d, without the zeros a crash leaves after the last write: it was cut short", end)
	}
	var commits []int // offsets of end-of-transaction records past end
	for from := end; ; {
		i := bytes.Index(data[from:], txnKey)
		if i < 0 {
			break
		}
		at := from + i
		for start := max(end, at-maxHeader); start < at; start++ {
			if r, next, ok := readRecord(data, start); ok && r.meta&bitFinTxn != 0 && bytes.HasPrefix(r.key, txnKey) {
				commits = append(commits, start)
				at = next - 1
				break
			}
		}
		from = at + 1
	}
	switch {
	case len(commits) > 1:
		return 0, fmt.Errorf("the record at offset %d does not check, and %d committed transactions follow it (Badger would drop them)", end, len(commits))
	case len(commits) == 1:
		_, next, _ := readRecord(data, commits[0])
		if !allZero(data[next:]) {
			return 0, fmt.Errorf("the record at offset %d does not check, and a committed transaction and more writes follow it (Badger would drop them)", end)
		}
	}
	return end, nil
}

// minZeroTail is the least a crash leaves of a memtable's log unwritten.
const minZeroTail = 4 << 10

// zeroTail returns how many bytes of zeros data ends with.
func zeroTail(data []byte) int {
	n := len(data)
	for n > 0 {
		k := min(n, len(zeros))
		if !allZero(data[n-k : n]) {
			for n > 0 && data[n-1] == 0 {
				n--
			}
			break
		}
		n -= k
	}
	return len(data) - n
}

// copyStore copies a store's folder to dst for a scratch open, leaving
// out the tables in skip and the lock file. Every file is copied, tables
// too: Badger empties a table file (truncates it) before it removes it,
// which through a hard link would empty the store's own.
func copyStore(src, dst string, skip map[uint64]bool, leave []string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || name == "LOCK" || slices.Contains(leave, name) {
			continue
		}
		if id, ok := table.ParseFileID(name); ok && strings.HasSuffix(name, ".sst") && skip[id] {
			continue
		}
		if err := copyFile(filepath.Join(src, name), filepath.Join(dst, name)); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	// Blocks of zeros are skipped (left as holes): Badger's logs are
	// sparse files, mostly unwritten.
	buf := make([]byte, 64<<10)
	var size int64
	for {
		n, rerr := io.ReadFull(in, buf)
		if n > 0 {
			if allZero(buf[:n]) {
				_, err = out.Seek(int64(n), io.SeekCurrent)
			} else {
				_, err = out.Write(buf[:n])
			}
			if err != nil {
				out.Close()
				return err
			}
			size += int64(n)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			out.Close()
			return rerr
		}
	}
	if err := out.Truncate(size); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// checkOrphans checks, against db (the store as Badger opens it, without
// the orphans), that every orphan table of dir holds nothing newer than
// what the store holds: each key's latest version in the orphan is in the
// store too, or a newer one is. That is so of the tables a crash leaves
// (their data is still in the memtable logs or in the tables they were
// compacted from) and not of tables that a MANIFEST cut short no longer
// names, whose memtable logs are gone.
func checkOrphans(db *dgbadger.DB, dir string, ins *inspection, log *slog.Logger) error {
	for _, id := range ins.orphans {
		path := filepath.Join(dir, ins.names[id])
		t, err := openTable(path, id, options.Snappy)
		if err != nil {
			t, err = openTable(path, id, options.None)
		}
		if err != nil {
			// A table a crash interrupted as it was written: never named
			// by the MANIFEST, its data is elsewhere.
			log.Info("store: an incomplete table left by a crash is ignored", "file", filepath.Base(path), "err", err)
			continue
		}
		// Each key's latest version in the table, and whether it is a
		// deletion (which a store without the key covers).
		latest, deletion := map[string]uint64{}, map[string]bool{}
		it := t.NewIterator(0)
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Key()
			user := k[:len(k)-8]
			if bytes.HasPrefix(user, []byte("!badger!")) {
				continue
			}
			if v := parseTs(k); v > latest[string(user)] {
				latest[string(user)] = v
				deletion[string(user)] = it.Value().Meta&bitDelete != 0
			}
		}
		it.Close()
		missing := 0
		var example string
		err = db.View(func(txn *dgbadger.Txn) error {
			opts := dgbadger.DefaultIteratorOptions
			opts.AllVersions, opts.PrefetchValues = true, false
			for user, v := range latest {
				opts.Prefix = []byte(user)
				it := txn.NewIterator(opts)
				it.Rewind()
				found := it.Valid() && bytes.Equal(it.Item().Key(), []byte(user))
				ok := found && it.Item().Version() >= v || !found && deletion[user]
				it.Close()
				if !ok {
					missing++
					if example == "" {
						example = describeKey([]byte(user))
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if missing > 0 {
			return damaged(dir, "the table %s is not in the MANIFEST, and %d of the writes it holds (%s, for one) are nowhere else: the MANIFEST lost its end", filepath.Base(path), missing, example)
		}
	}
	return nil
}

// describeKey names what a key stores, for a message (never its bytes).
func describeKey(key []byte) string {
	if k, ok := parseInstanceKey(key); ok {
		return fmt.Sprintf("the record of %s %q", k.Machine, truncate(k.Handle))
	}
	if k, v, ok := parseAuditKey(key); ok {
		return fmt.Sprintf("audit entry %d of %s %q", v, k.Machine, truncate(k.Handle))
	}
	if len(key) > 0 && (key[0] == tagRecent || key[0] == tagSeq || key[0] == tagCount) {
		return fmt.Sprintf("an entry of the index of the instances (%d bytes)", len(key))
	}
	if nk, ok := newKeyOf(key); ok {
		return describeKey(nk)
	}
	return fmt.Sprintf("a key of %d bytes", len(key))
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// readAll reads every value the store holds of at least min bytes, as a
// load would: a value that its value log no longer holds (a log deleted,
// or cut at a damaged record) or whose checksum fails, or a block whose
// checksum fails, is an error. (Badger logs a value it cannot read from
// its value log and gives it as empty; the store writes no empty value.)
// Values under 1 KiB are never in a value log.
func readAll(db *dgbadger.DB, dir string, min int64) error {
	return db.View(func(txn *dgbadger.Txn) error {
		opts := dgbadger.DefaultIteratorOptions
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if it.Item().ValueSize() < min {
				continue
			}
			err := it.Item().Value(func(v []byte) error {
				if len(v) == 0 {
					return errors.New("its value is lost (Badger cannot read it from its value log)")
				}
				return nil
			})
			if err != nil {
				return damaged(dir, "%s cannot be read: %v", describeKey(it.Item().Key()), err)
			}
		}
		return nil
	})
}
