package groupcommit

import (
	"context"
	"sync/atomic"
)

// The states of a queued write.
const (
	Queued    int32 = iota // waiting for a leader
	Taken                  // in a leader's batch: its caller waits for the answer
	Abandoned              // its caller's context ended before a leader took it
)

// Await waits for the answer to a queued write (done closed by the leader that ran it), leading
// the next batch itself whenever lock, which the leader holds, is free. A context that ends while
// the write still waits in the queue abandons it (state Queued → Abandoned: no leader takes it
// any more) and returns the context's error; once a leader has taken it, the answer is awaited,
// so that a caller is never told "cancelled" about a write that committed.
func Await(ctx context.Context, lock chan struct{}, state *atomic.Int32, done <-chan struct{}, lead func()) error {
	for {
		select {
		case <-done:
			return nil
		case lock <- struct{}{}:
			select {
			case <-done: // a leader answered it while this caller took the lock
			default:
				lead()
			}
			<-lock
		case <-ctx.Done():
			if state.CompareAndSwap(Queued, Abandoned) {
				return ctx.Err()
			}
			<-done
			return nil
		}
	}
}
