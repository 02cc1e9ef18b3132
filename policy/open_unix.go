//go:build unix

package policy

import "syscall"

// openNonblock makes opening a named pipe return at once instead of waiting for a writer; it
// changes nothing for the regular files that are then read.
const openNonblock = syscall.O_NONBLOCK
