//go:build !linux

package gate_test

import "testing"

// crashFullDisk needs a tmpfs (Linux).
func crashFullDisk(t *testing.T, bin, machines string) { t.Skip("needs Linux (a tmpfs)") }
