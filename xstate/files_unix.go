//go:build unix

package xstate

import (
	"os"
	"syscall"
)

// openFlags open a file for reading without blocking: opening a FIFO
// returns at once (and the file is then refused, not being regular).
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK
