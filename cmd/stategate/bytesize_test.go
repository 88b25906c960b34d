package main

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stategate/stategate/store"
)

func TestByteSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"128MiB", 128 << 20, true}, {"1GiB", 1 << 30, true}, {"4096", 4096, true}, {"0", 0, true},
		{"10KiB", 10 << 10, true}, {"1.5GiB", 3 << 29, true},
		{"64MB", 64e6, true}, {"2 gb", 2e9, true}, // decimal units are decimal
		{"", 0, false}, {"MiB", 0, false}, {"-1MiB", 0, false}, {"lots", 0, false}, {"99999999999EiB", 0, false},
	} {
		var b byteSize
		err := b.UnmarshalText([]byte(c.in))
		if (err == nil) != c.ok || c.ok && int64(b) != c.want {
			t.Errorf("%q: %d, %v; want %d (ok %v)", c.in, b, err, c.want, c.ok)
		}
	}
}

// TestServeKeepsTheReserve: serve with a reserve larger than the disk's
// free space does not start, and says why.
func TestServeKeepsTheReserve(t *testing.T) {
	err := (&serveCmd{Machines: "../../machines", Data: t.TempDir(), MinFree: 1 << 62}).Run(io.Discard)
	if !errors.Is(err, store.ErrNoSpace) || !strings.Contains(err.Error(), "--min-free") {
		t.Fatalf("err = %v", err)
	}
}
