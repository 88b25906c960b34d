package main

import "testing"

func TestByteSizeFlag(t *testing.T) {
	for in, want := range map[string]int64{"256MiB": 256 << 20, "1GiB": 1 << 30, "512MB": 512e6, "4096": 4096, "64 MiB": 64 << 20} {
		var b byteSize
		if err := b.UnmarshalText([]byte(in)); err != nil || int64(b) != want {
			t.Errorf("%q = %d, %v; want %d", in, b, err, want)
		}
	}
	var b byteSize
	if err := b.UnmarshalText([]byte("lots")); err == nil {
		t.Error(`"lots" is a size`)
	}
	if s := byteSize(256 << 20).String(); s != "256 MiB" {
		t.Errorf("String() = %q", s)
	}
}
