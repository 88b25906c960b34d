//go:build !unix

package xstate

import "os"

// openFlags open a file for reading.
const openFlags = os.O_RDONLY
