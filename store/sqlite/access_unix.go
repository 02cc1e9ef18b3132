//go:build unix

package sqlite

import "golang.org/x/sys/unix"

// canWrite asks the system whether this process may write path (access(2), W_OK).
func canWrite(path string) error { return unix.Access(path, unix.W_OK) }
