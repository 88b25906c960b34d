package main

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestProcsFor(t *testing.T) {
	for _, tc := range []struct {
		flag  int
		env   string
		avail int
		want  int
	}{
		{0, "", 1, 1},
		{0, "", 2, 1},
		{0, "", 8, 4},
		{0, "", 7, 3},
		{3, "", 8, 3},
		{0, "6", 6, 0}, // the variable decides, as Go reads it
		{2, "6", 6, 2},
	} {
		if got := procsFor(tc.flag, tc.env, tc.avail); got != tc.want {
			t.Errorf("procsFor(%d, %q, %d) = %d, want %d", tc.flag, tc.env, tc.avail, got, tc.want)
		}
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:3001": true,
		"[::1]:3001":     true,
		"0.0.0.0:3001":   false,
		"[::]:3001":      false,
		"10.1.2.3:80":    false,
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := loopback(a); got != want {
			t.Errorf("loopback(%s) = %v, want %v", addr, got, want)
		}
	}
}

func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]string{
		"s3cret\n":           "s3cret",
		"  s3cret  \nmore\n": "s3cret",
		"\nsecond-line\n":    "",
	} {
		f := filepath.Join(dir, "token")
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := readToken(f)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("readToken(%q) = %q, %v; want %q", content, got, err, want)
		}
	}
}
