package badger

import (
	"strings"
	"testing"

	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/store/storetest"
)

// TestKeyEncoding: a key reads back as it was written, and no key is a
// prefix of another instance's.
func TestKeyEncoding(t *testing.T) {
	for _, m := range storetest.Awkward {
		for _, h := range storetest.Awkward {
			k := store.Key{Machine: m, Handle: h}
			got, ok := parseInstanceKey(instanceKey(k))
			if !ok || got != k || len(instanceKey(k)) != keyLen(k) || keyLen(k) != store.KeySize(k) {
				t.Fatalf("%q/%q read back as %q/%q (%v)", m, h, got.Machine, got.Handle, ok)
			}
			got, v, ok := parseAuditKey(auditKey(k, 77))
			if !ok || got != k || v != 77 {
				t.Fatalf("audit key of %q/%q read back as %q/%q %d", m, h, got.Machine, got.Handle, v)
			}
			for _, h2 := range storetest.Awkward {
				if h2 == h {
					continue
				}
				o := store.Key{Machine: m, Handle: h2}
				if strings.HasPrefix(string(auditKey(o, 1)), string(trailPrefix(k))) {
					t.Fatalf("the trail of %q reaches into %q's", h, h2)
				}
			}
		}
	}
}

// TestFormatIsRecorded: a new store records its key format, so that the
// keys of the earlier format are looked for once.
func TestFormatIsRecorded(t *testing.T) {
	b := openTest(t, t.TempDir(), Options{})
	defer b.Close()
	if v, err := b.get(formatKey); err != nil || string(v) != formatVersion {
		t.Fatalf("format %q, %v", v, err)
	}
}
