package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// wal is a write-ahead log of the Badger store: what makes a batch of
// saves durable before Save returns. Badger itself runs without
// SyncWrites, and syncs its memory-mapped log with msync, which costs
// about twice an fdatasync on this kind of disk; a wal is a file of fixed
// size, written in advance with zeros, so that appending a batch and
// syncing it is one pwrite and one fdatasync that change no metadata.
//
// Layout: a header block (magic, generation) and records from headerSize
// on, each [length u32][crc u32][ops], the crc covering the generation and
// the ops, so that a torn record or one of an older generation ends the
// replay. A record holds a batch's writes as they are to be applied to
// Badger; replaying them is idempotent. A log starts over (a new
// generation) once Badger holds its writes and is synced.
//
// The store keeps two logs (see Badger): saves go to one while the other's
// writes are moved to Badger. A batch is written and synced before its
// saves are answered or seen by any read; if the sync fails, the callers
// are told and the store refuses every later save (Linux may have dropped
// the unwritten pages; only a restart, which replays what the logs really
// hold, tells what was kept).
type wal struct {
	f   *os.File
	gen uint64
	off int64
	buf []byte
	// fdatasync syncs f's data (a test makes it fail).
	fdatasync func(*os.File) error
}

const (
	walMagic   = "SGWAL\x00\x00\x01"
	walSize    = 16 << 20
	headerSize = 4096
)

var walTable = crc32.MakeTable(crc32.Castagnoli)

// walOp is one write of a batch: a set of key to val, or a delete.
type walOp struct {
	del      bool
	key, val []byte
}

// openWAL opens (or makes) the log file and returns it with the batches of
// the current generation, to be applied again.
func openWAL(path string) (*wal, [][]walOp, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, err
	}
	w := &wal{f: f, fdatasync: fdatasync}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if st.Size() < walSize {
		if err := w.format(); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("write-ahead log %s: %w", path, err)
		}
		return w, nil, nil
	}
	head := make([]byte, 16)
	if _, err := f.ReadAt(head, 0); err != nil {
		f.Close()
		return nil, nil, err
	}
	if string(head[:8]) != walMagic {
		f.Close()
		return nil, nil, fmt.Errorf("write-ahead log %s: not a stategate log", path)
	}
	w.gen = binary.LittleEndian.Uint64(head[8:])
	batches, err := w.replay()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("write-ahead log %s: %w", path, err)
	}
	return w, batches, nil
}

// format writes the whole file with zeros and a first header.
func (w *wal) format() error {
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < walSize; off += int64(len(zeros)) {
		if _, err := w.f.WriteAt(zeros, off); err != nil {
			return err
		}
	}
	return w.restart(1)
}

// restart begins generation gen: records of earlier ones no longer count.
func (w *wal) restart(gen uint64) error {
	head := make([]byte, 16)
	copy(head, walMagic)
	binary.LittleEndian.PutUint64(head[8:], gen)
	if _, err := w.f.WriteAt(head, 0); err != nil {
		return err
	}
	if err := w.fdatasync(w.f); err != nil {
		return err
	}
	w.gen, w.off = gen, headerSize
	return nil
}

// replay reads the records of the current generation.
func (w *wal) replay() ([][]walOp, error) {
	r := io.NewSectionReader(w.f, headerSize, walSize-headerSize)
	var out [][]walOp
	off := int64(headerSize)
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			break
		}
		n := int64(binary.LittleEndian.Uint32(hdr[:4]))
		if n == 0 || off+8+n > walSize {
			break
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			break
		}
		if w.crc(body) != binary.LittleEndian.Uint32(hdr[4:]) {
			break
		}
		ops, err := decodeOps(body)
		if err != nil {
			return nil, err
		}
		out = append(out, ops)
		off += 8 + n
	}
	w.off = off
	return out, nil
}

func (w *wal) crc(body []byte) uint32 {
	var g [8]byte
	binary.LittleEndian.PutUint64(g[:], w.gen)
	return crc32.Update(crc32.Checksum(g[:], walTable), walTable, body)
}

// errWALFull is returned by write when the batch does not fit: the
// caller syncs Badger and restarts the log.
var errWALFull = errors.New("write-ahead log full")

// errWALTooBig is returned by write for a batch larger than the whole
// log: the caller splits it.
var errWALTooBig = errors.New("batch larger than the write-ahead log")

// sync makes what write wrote durable.
func (w *wal) sync() error { return w.fdatasync(w.f) }

// write writes a batch after the last one, without waiting for the disk.
func (w *wal) write(ops []walOp) error {
	b := w.buf[:0]
	b = append(b, make([]byte, 8)...)
	for _, op := range ops {
		kind := byte(0)
		if op.del {
			kind = 1
		}
		b = append(b, kind)
		b = binary.AppendUvarint(b, uint64(len(op.key)))
		b = append(b, op.key...)
		b = binary.AppendUvarint(b, uint64(len(op.val)))
		b = append(b, op.val...)
	}
	w.buf = b
	n := len(b) - 8
	if w.off+int64(len(b)) > walSize {
		if int64(len(b)) > walSize-headerSize {
			return fmt.Errorf("%w: a batch of %d bytes", errWALTooBig, len(b))
		}
		return errWALFull
	}
	binary.LittleEndian.PutUint32(b[:4], uint32(n))
	binary.LittleEndian.PutUint32(b[4:8], w.crc(b[8:]))
	if _, err := w.f.WriteAt(b, w.off); err != nil {
		return err
	}
	w.off += int64(len(b))
	return nil
}

func decodeOps(body []byte) ([]walOp, error) {
	var ops []walOp
	for len(body) > 0 {
		op := walOp{del: body[0] == 1}
		body = body[1:]
		var ok bool
		if op.key, body, ok = field(body); !ok {
			return nil, errors.New("corrupt record")
		}
		if op.val, body, ok = field(body); !ok {
			return nil, errors.New("corrupt record")
		}
		ops = append(ops, op)
	}
	return ops, nil
}

func field(b []byte) ([]byte, []byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}

func (w *wal) Close() error { return w.f.Close() }
