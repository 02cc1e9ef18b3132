//go:build linux

package sqlite

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// procLock orders the writers of different processes before they ask SQLite for its write lock.
//
// SQLite takes its locks without waiting: a writer that finds the lock held sleeps 1, 2, 5, 10 …
// up to 100 ms between tries (the busy handler), so under contention from other processes the
// lock is mostly free while everybody sleeps. A blocking flock(2) on a file beside the database
// wakes a waiter the moment the holder lets go. It is only a queue in front of SQLite's lock:
// exclusion still comes from BEGIN IMMEDIATE, so a writer that does not take it (another
// program, an older latch) is excluded as before, only less promptly.
//
// The file is separate because flock must not touch the database or its -shm file: SQLite
// holds POSIX locks on them, and closing any descriptor of a file drops every POSIX lock the
// process holds on it. Linux keeps flock and POSIX locks apart; other systems do not all do so,
// and do without.
type procLock struct{ f *os.File }

// openProcLock opens (creating) the lock file of the database at path.
func openProcLock(path string) (*procLock, error) {
	f, err := os.OpenFile(path+"-lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	return &procLock{f: f}, nil
}

// lock takes the lock, waiting at most wait; it reports whether it holds it. A holder that
// never lets go (a stopped process) makes lock give up, and the caller then waits in SQLite's
// busy handler, which fails after busy_timeout as it always did.
func (l *procLock) lock(wait time.Duration) bool {
	if l == nil {
		return false
	}
	fd := int(l.f.Fd())
	err := flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return true
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		return false
	}
	got := make(chan error, 1)
	go func() { got <- flock(fd, syscall.LOCK_EX) }()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case err := <-got:
		return err == nil
	case <-t.C:
		// The waiter still queues; whenever it gets the lock it gives it back.
		go func() {
			if <-got == nil {
				_ = flock(fd, syscall.LOCK_UN)
			}
		}()
		return false
	}
}

func (l *procLock) unlock() {
	if l != nil {
		_ = flock(int(l.f.Fd()), syscall.LOCK_UN)
	}
}

func (l *procLock) close() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}

// flock is syscall.Flock, retried when a signal interrupts it.
func flock(fd, how int) error {
	for {
		if err := syscall.Flock(fd, how); !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
