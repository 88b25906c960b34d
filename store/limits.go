package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Limits of what a store keeps, the same for every engine (an engine may
// have larger limits of its own, never smaller ones).
const (
	// MaxKeySize bounds an instance's key as KeySize counts it.
	MaxKeySize = 1 << 10
	// MaxRecordSize bounds an instance's record (its snapshot, timers and
	// machine version, as RecordSize counts them) and each audit entry
	// (as CheckAuditEntry counts it).
	MaxRecordSize = 4 << 20
)

// KeySize is the size of an instance's key as MaxKeySize counts it: one
// byte, then the machine id and the handle, each after its length written
// as a uvarint (a byte for lengths under 128, two under 16,384).
func KeySize(k Key) int {
	return 1 + uvarintLen(len(k.Machine)) + len(k.Machine) + uvarintLen(len(k.Handle)) + len(k.Handle)
}

func uvarintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n))
}

// CheckKey refuses (ErrTooLarge) a key over MaxKeySize, saying how large
// it is (never what it holds).
func CheckKey(k Key) error {
	if n := KeySize(k); n > MaxKeySize {
		return fmt.Errorf("%w: the instance's key (machine id %d bytes, handle %d bytes) takes %d bytes; the limit is %d",
			ErrTooLarge, len(k.Machine), len(k.Handle), n, MaxKeySize)
	}
	return nil
}

// checkSize refuses a record or audit entry of n bytes over MaxRecordSize.
func checkSize(what string, n int) error {
	if n > MaxRecordSize {
		return fmt.Errorf("%w: the %s takes %d bytes; the limit is %d (%d MiB)", ErrTooLarge, what, n, MaxRecordSize, MaxRecordSize>>20)
	}
	return nil
}

// errSnapshotNotJSON refuses a record whose snapshot is not JSON.
var errSnapshotNotJSON = errors.New("the snapshot is not valid JSON")

const recordWhat = "record (snapshot, timers and machine version)"

// recordJSON is a record as JSON, in parts: its snapshot as it is (null
// for a reset's) and the rest as json.Marshal writes it.
type recordJSON struct {
	snap, machineVersion, updated, timers, pending, input []byte
}

func (r recordJSON) size() int {
	n := len(`{"snapshot":`) + len(r.snap) + len(`,"machineVersion":`) + len(r.machineVersion) + len(`,"updated":`) + len(r.updated) + len(`}`)
	if r.timers != nil {
		n += len(`,"timers":`) + len(r.timers)
	}
	if r.pending != nil {
		n += len(`,"pending":`) + len(r.pending)
	}
	if r.input != nil {
		n += len(`,"input":`) + len(r.input)
	}
	return n
}

func (r recordJSON) appendTo(b []byte) []byte {
	b = append(b, `{"snapshot":`...)
	b = append(b, r.snap...)
	b = append(b, `,"machineVersion":`...)
	b = append(b, r.machineVersion...)
	b = append(b, `,"updated":`...)
	b = append(b, r.updated...)
	if r.timers != nil {
		b = append(b, `,"timers":`...)
		b = append(b, r.timers...)
	}
	if r.pending != nil {
		b = append(b, `,"pending":`...)
		b = append(b, r.pending...)
	}
	if r.input != nil {
		b = append(b, `,"input":`...)
		b = append(b, r.input...)
	}
	return append(b, '}')
}

// partsOf returns a record's JSON in parts (not checked).
func partsOf(rec Record) (recordJSON, error) {
	r := recordJSON{snap: rec.Snapshot}
	if len(r.snap) == 0 {
		r.snap = []byte("null")
	}
	var err error
	if r.machineVersion, err = json.Marshal(rec.MachineVersion); err != nil {
		return recordJSON{}, err
	}
	if r.updated, err = rec.Updated.MarshalJSON(); err != nil {
		return recordJSON{}, err
	}
	if len(rec.Timers) > 0 {
		if r.timers, err = json.Marshal(rec.Timers); err != nil {
			return recordJSON{}, err
		}
	}
	if rec.Pending != nil {
		if r.pending, err = json.Marshal(rec.Pending); err != nil {
			return recordJSON{}, err
		}
	}
	if len(rec.Input) > 0 {
		// As json.Marshal writes a RawMessage: compact (and checked).
		var buf bytes.Buffer
		if err := json.Compact(&buf, rec.Input); err != nil {
			return recordJSON{}, fmt.Errorf("the input is not valid JSON: %w", err)
		}
		r.input = buf.Bytes()
	}
	return r, nil
}

// RecordSize is the size of a record as MaxRecordSize counts it: the
// length of its JSON as AppendRecord writes it (its snapshot, machine
// version, time and timers; not its audit entry), computed without
// copying the snapshot.
func RecordSize(rec Record) (int, error) {
	r, err := partsOf(rec)
	if err != nil {
		return 0, err
	}
	return r.size(), nil
}

// CheckRecord refuses what AppendRecord refuses: a snapshot that is not
// JSON, and a record over MaxRecordSize (ErrTooLarge). An engine sets the
// record's time (Updated) before, as its size depends on it.
func CheckRecord(rec Record) error {
	if len(rec.Snapshot) > 0 && !json.Valid(rec.Snapshot) {
		return errSnapshotNotJSON
	}
	n, err := RecordSize(rec)
	if err != nil {
		return err
	}
	return checkSize(recordWhat, n)
}

// AppendRecord appends a record's JSON to b, as json.Marshal writes a
// Record (but for the snapshot, taken as it is: it is JSON already; a
// reset has none, written null), and returns it. It refuses a snapshot
// that is not JSON and a record over MaxRecordSize (ErrTooLarge),
// appending nothing.
func AppendRecord(b []byte, rec Record) ([]byte, error) {
	if len(rec.Snapshot) > 0 && !json.Valid(rec.Snapshot) {
		return b, errSnapshotNotJSON
	}
	r, err := partsOf(rec)
	if err != nil {
		return b, err
	}
	n := r.size()
	if err := checkSize(recordWhat, n); err != nil {
		return b, err
	}
	return r.appendTo(slices.Grow(b, n)), nil
}

// MarshalAuditEntry returns an audit entry as JSON (json.Marshal's),
// refusing one over MaxRecordSize (ErrTooLarge). An engine sets the
// entry's Version before, as its size depends on it.
func MarshalAuditEntry(e AuditEntry) ([]byte, error) {
	b, err := appendAudit(make([]byte, 0, 512), e)
	if err != nil {
		return nil, err
	}
	if err := checkSize("audit entry", len(b)); err != nil {
		return nil, err
	}
	return b, nil
}

// CheckAuditEntry refuses what MarshalAuditEntry refuses.
func CheckAuditEntry(e AuditEntry) error {
	_, err := MarshalAuditEntry(e)
	return err
}
