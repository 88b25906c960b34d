package main

import (
	"errors"
	"fmt"
	"math"

	"github.com/dustin/go-humanize"
)

// byteSize is a size given as a flag: 256MiB, 1GiB, 512MB (a megabyte is
// 10^6 bytes, a mebibyte 2^20), or a number of bytes.
type byteSize int64

func (b *byteSize) UnmarshalText(text []byte) error {
	n, err := humanize.ParseBytes(string(text))
	if err == nil && n > math.MaxInt64 {
		err = errors.New("too large")
	}
	if err != nil {
		return fmt.Errorf("%q is not a size (such as 256MiB or 1GiB): %w", text, err)
	}
	*b = byteSize(n)
	return nil
}

func (b byteSize) String() string { return humanize.IBytes(uint64(b)) }
