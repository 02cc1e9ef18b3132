//go:build !linux

package sqlite

import "time"

// procLock is a no-op where flock(2) and POSIX locks may interfere (see flock_linux.go):
// writers of different processes meet in SQLite's busy handler alone.
type procLock struct{}

func openProcLock(string) (*procLock, error) { return nil, nil }
func (l *procLock) lock(time.Duration) bool  { return false }
func (l *procLock) unlock()                  {}
func (l *procLock) close() error             { return nil }
