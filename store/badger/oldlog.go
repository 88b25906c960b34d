package badger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
)

// The write-ahead logs of stategate before it wrote to Badger directly
// (up to commit 314fc77): stategate.wal and stategate-2.wal in the store's
// folder. They may hold acknowledged saves that Badger does not have
// (those made since the last checkpoint); opening the store imports them
// into Badger, then removes them. Reading them is all that is left of
// them, and it is strict: a log that is damaged in a way the old store
// would have read past (and lost saves over) refuses the open instead.
//
// Layout of a log: a file of exactly oldLogSize bytes; a header (magic,
// generation as little-endian uint64) in its first oldLogHeader bytes;
// then records [length u32][crc u32][ops], the crc (Castagnoli) covering
// the generation's 8 bytes then the ops. A log restarted (a new
// generation) keeps its older records after the header, where they fail
// the crc under the new generation. Each restart takes the generation
// after the larger of the two logs', so the two headers' generations
// always differ by one (or are both 1 before the first open finished).
const (
	oldLogMagic  = "SGWAL\x00\x00\x01"
	oldLogSize   = 16 << 20
	oldLogHeader = 4096
)

// oldLogNames are the old logs' file names in a store's folder.
var oldLogNames = [2]string{"stategate.wal", "stategate-2.wal"}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// oldOp is one write of a logged batch: a set of key to val, or a delete.
type oldOp struct {
	del      bool
	key, val []byte
}

// oldLog is what one log holds.
type oldLog struct {
	path    string
	blank   bool // all zeros: made but never written (nothing to import)
	gen     uint64
	batches [][]oldOp
}

// errOldLog is wrapped by every refusal of a damaged old log.
var errOldLog = errors.New("damaged write-ahead log")

// readOldLog reads a log, read-only, and returns the batches of its
// current generation, or why it cannot be trusted.
func readOldLog(path string) (*oldLog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w %s: %s", errOldLog, path, fmt.Sprintf(format, a...))
	}
	l := &oldLog{path: path}
	if len(data) != oldLogSize || string(data[:len(oldLogMagic)]) != oldLogMagic {
		if allZero(data) {
			// A log the old store was still formatting (its header comes
			// last): nothing was written to it.
			l.blank = true
			return l, nil
		}
		if len(data) != oldLogSize {
			return nil, bad("the file is %d bytes long; a log is %d bytes (it was cut short)", len(data), oldLogSize)
		}
		return nil, bad("the header does not start with the log's magic bytes")
	}
	l.gen = binary.LittleEndian.Uint64(data[8:16])
	if l.gen == 0 {
		return nil, bad("the header's generation is 0")
	}
	off := oldLogHeader
	for {
		body, next, ok := oldRecord(data, off, l.gen)
		if !ok {
			break
		}
		ops, err := decodeOldOps(body)
		if err != nil {
			return nil, bad("the record at offset %d checks but does not decode: %v", off, err)
		}
		l.batches = append(l.batches, ops)
		off = next
	}
	// The records end at off: with zeros, a record of an older generation
	// (the log was restarted), or a write torn by a crash (never
	// acknowledged: the old store answered a save once its record was
	// synced). A record of this generation after it means that the one at
	// off was damaged and that the saves after it were acknowledged.
	if off+8 <= len(data) && binary.LittleEndian.Uint32(data[off:]) != 0 {
		for p := off; ; {
			n := int(binary.LittleEndian.Uint32(data[p:]))
			if n == 0 || p+8+n > len(data)-8 {
				break
			}
			p += 8 + n
			if _, _, ok := oldRecord(data, p, l.gen); ok {
				return nil, bad("the record at offset %d fails its checksum, and an intact record of the same generation follows it at offset %d", off, p)
			}
		}
	}
	return l, nil
}

// oldRecord returns the body of the record at off if it belongs to
// generation gen, and the offset after it.
func oldRecord(data []byte, off int, gen uint64) (body []byte, next int, ok bool) {
	if off+8 > len(data) {
		return nil, 0, false
	}
	n := int(binary.LittleEndian.Uint32(data[off:]))
	if n == 0 || off+8+n > len(data) {
		return nil, 0, false
	}
	body = data[off+8 : off+8+n]
	var g [8]byte
	binary.LittleEndian.PutUint64(g[:], gen)
	if crc32.Update(crc32.Checksum(g[:], castagnoli), castagnoli, body) != binary.LittleEndian.Uint32(data[off+4:]) {
		return nil, 0, false
	}
	return body, off + 8 + n, true
}

func decodeOldOps(body []byte) ([]oldOp, error) {
	var ops []oldOp
	for len(body) > 0 {
		if body[0] > 1 {
			return nil, fmt.Errorf("unknown operation %d", body[0])
		}
		op := oldOp{del: body[0] == 1}
		body = body[1:]
		var ok bool
		if op.key, body, ok = oldField(body); !ok || len(op.key) == 0 {
			return nil, errors.New("a key runs past the record")
		}
		if op.val, body, ok = oldField(body); !ok {
			return nil, errors.New("a value runs past the record")
		}
		ops = append(ops, op)
	}
	return ops, nil
}

func oldField(b []byte) ([]byte, []byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}

var zeros [4096]byte

func allZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeros))
		if !bytes.Equal(b[:n], zeros[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// readOldLogs reads the old logs in dir, if any, and returns their
// batches in the order they are to be applied (the older generation
// first, as the old store replayed them) and the logs' paths.
func readOldLogs(dir string) ([][]oldOp, []string, error) {
	var logs []*oldLog
	var paths []string
	for _, name := range oldLogNames {
		path := filepath.Join(dir, name)
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			continue
		}
		l, err := readOldLog(path)
		if err != nil {
			return nil, nil, err
		}
		paths = append(paths, path)
		if !l.blank {
			logs = append(logs, l)
		}
	}
	if len(logs) == 2 {
		a, b := logs[0], logs[1]
		if b.gen < a.gen {
			a, b = b, a
		}
		switch {
		case b.gen == a.gen+1:
		case a.gen == 1 && b.gen == 1 && len(a.batches)+len(b.batches) == 0:
			// Both formatted, never opened further: nothing written.
		default:
			return nil, nil, fmt.Errorf("%w: the generations in the headers of %s (%d) and %s (%d) do not follow each other (one header is damaged)",
				errOldLog, logs[0].path, logs[0].gen, logs[1].path, logs[1].gen)
		}
		logs = []*oldLog{a, b}
	}
	var batches [][]oldOp
	for _, l := range logs {
		batches = append(batches, l.batches...)
	}
	return batches, paths, nil
}
