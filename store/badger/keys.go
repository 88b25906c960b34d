package badger

import (
	"bytes"
	"encoding/binary"
	"strings"

	"github.com/stategate/stategate/store"
)

// Badger keys. Each component of a key is written after its length (a
// uvarint), so that a key is read back one way only and no instance's keys
// are a prefix of another's: the audit trail of handle "a" and that of
// handle "a\x00evil" are two ranges that do not meet, whatever bytes the
// machine ids and handles hold.
//
//	instance record  'I' len(machine) machine len(handle) handle
//	audit entry      'A' len(machine) machine len(handle) handle version (8 bytes, big-endian)
//	index entry      'R' len(machine) machine seq (8 bytes, big-endian) -> len(handle) handle
//	its place        'S' len(machine) machine len(handle) handle -> seq (8 bytes)
//	instances        'C' len(machine) machine -> their count (8 bytes)
//	store format     'M' "format"
//
// The index (R, S, C) is written in the transaction of the save that
// creates an instance (its first) and of its deletion, never by the
// other saves: seq numbers the creations, so that a machine's R keys,
// read backwards, are its newest instances first, and S is where an
// instance's entry is, for its deletion.
//
// Stores written before format 2 (formatKey absent) used
// "i/MACHINE\x00HANDLE" and "a/MACHINE\x00HANDLE\x00VERSION"; they are
// migrated when opened (see migrateKeys). Stores of format 2 have no
// index: it is built when they are opened for writing (buildIndex).
const (
	tagInstance = 'I'
	tagAudit    = 'A'
	tagRecent   = 'R'
	tagSeq      = 'S'
	tagCount    = 'C'
)

// formatKey records the store's key format, formatVersion.
var formatKey = []byte("Mformat")

const (
	formatVersion = "3"
	// formatNoIndex is the format of stores with the keys of today and
	// no index.
	formatNoIndex = "2"
)

// machinePrefix is tag and a machine's id, after its length.
func machinePrefix(tag byte, machine string) []byte {
	b := binary.AppendUvarint(append(make([]byte, 0, 2+binary.MaxVarintLen64+len(machine)+8), tag), uint64(len(machine)))
	return append(b, machine...)
}

// recentKey is the key of an instance's entry in its machine's index, for
// the creation numbered seq.
func recentKey(machine string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(machinePrefix(tagRecent, machine), seq)
}

// recentValue is an entry's value: the handle, after its length (never
// empty: the checks at open take an empty value for a lost one).
func recentValue(handle string) []byte {
	return append(binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(handle)), uint64(len(handle))), handle...)
}

// parseRecent reads an entry of a machine's index (key after the
// machine's prefix, and value).
func parseRecent(rest, val []byte) (handle string, seq uint64, ok bool) {
	n, w := binary.Uvarint(val)
	if len(rest) != 8 || w <= 0 || uint64(len(val)-w) != n {
		return "", 0, false
	}
	return string(val[w:]), binary.BigEndian.Uint64(rest), true
}

// seqKey is the key of an instance's place in the index.
func seqKey(k store.Key) []byte {
	return appendKeyOf(append(make([]byte, 0, keyLen(k)), tagSeq), k)
}

// countKey is the key of a machine's count of instances.
func countKey(machine string) []byte { return machinePrefix(tagCount, machine) }

// parseCountKey reads a machine's id from its count's key.
func parseCountKey(b []byte) (string, bool) {
	if len(b) == 0 || b[0] != tagCount {
		return "", false
	}
	n, w := binary.Uvarint(b[1:])
	if w <= 0 || uint64(len(b)-1-w) != n {
		return "", false
	}
	return string(b[1+w:]), true
}

func uint64Bytes(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// appendKeyOf appends an instance's components to b.
func appendKeyOf(b []byte, k store.Key) []byte {
	b = binary.AppendUvarint(b, uint64(len(k.Machine)))
	b = append(b, k.Machine...)
	b = binary.AppendUvarint(b, uint64(len(k.Handle)))
	return append(b, k.Handle...)
}

// keyLen is the length of an instance's record key: store.KeySize, which
// bounds it (store.MaxKeySize), counts the same bytes.
func keyLen(k store.Key) int {
	return 1 + uvarintLen(len(k.Machine)) + len(k.Machine) + uvarintLen(len(k.Handle)) + len(k.Handle)
}

func uvarintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n))
}

// instanceKey is the key of an instance's record.
func instanceKey(k store.Key) []byte {
	return appendKeyOf(append(make([]byte, 0, keyLen(k)), tagInstance), k)
}

// trailPrefix is the prefix of an instance's audit entries' keys.
func trailPrefix(k store.Key) []byte {
	return appendKeyOf(append(make([]byte, 0, keyLen(k)+8), tagAudit), k)
}

// auditKey is the key of an instance's audit entry at a version.
func auditKey(k store.Key, version uint64) []byte {
	return binary.BigEndian.AppendUint64(trailPrefix(k), version)
}

// readComponents reads the machine id and handle at the start of b and
// returns what follows them.
func readComponents(b []byte) (store.Key, []byte, bool) {
	var parts [2]string
	for i := range parts {
		n, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < n {
			return store.Key{}, nil, false
		}
		parts[i] = string(b[w : w+int(n)])
		b = b[w+int(n):]
	}
	return store.Key{Machine: parts[0], Handle: parts[1]}, b, true
}

// parseInstanceKey reads an instance record's key.
func parseInstanceKey(b []byte) (store.Key, bool) {
	if len(b) == 0 || b[0] != tagInstance {
		return store.Key{}, false
	}
	k, rest, ok := readComponents(b[1:])
	return k, ok && len(rest) == 0
}

// parseAuditKey reads an audit entry's key.
func parseAuditKey(b []byte) (store.Key, uint64, bool) {
	if len(b) == 0 || b[0] != tagAudit {
		return store.Key{}, 0, false
	}
	k, rest, ok := readComponents(b[1:])
	if !ok || len(rest) != 8 {
		return store.Key{}, 0, false
	}
	return k, binary.BigEndian.Uint64(rest), true
}

// The keys of the format before formatKey.
const (
	oldInstancePrefix = "i/"
	oldAuditPrefix    = "a/"
)

// newKeyOf returns the key an old-format key has now (ok false: the key is
// not one of the old format's).
func newKeyOf(old []byte) ([]byte, bool) {
	switch {
	case bytes.HasPrefix(old, []byte(oldInstancePrefix)):
		// "i/MACHINE\x00HANDLE": a machine id holds no NUL (a handle may),
		// as the old store's List read it.
		m, h, ok := strings.Cut(string(old[len(oldInstancePrefix):]), "\x00")
		if !ok {
			return nil, false
		}
		return instanceKey(store.Key{Machine: m, Handle: h}), true
	case bytes.HasPrefix(old, []byte(oldAuditPrefix)):
		// "a/MACHINE\x00HANDLE\x00" then the version's 8 bytes.
		rest := old[len(oldAuditPrefix):]
		if len(rest) < 10 || rest[len(rest)-9] != 0 {
			return nil, false
		}
		m, h, ok := strings.Cut(string(rest[:len(rest)-9]), "\x00")
		if !ok {
			return nil, false
		}
		return auditKey(store.Key{Machine: m, Handle: h}, binary.BigEndian.Uint64(rest[len(rest)-8:])), true
	}
	return nil, false
}
