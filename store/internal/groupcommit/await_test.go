package groupcommit

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// A caller that finds the lock free leads; its lead answers it.
func TestAwaitLeads(t *testing.T) {
	lock := make(chan struct{}, 1)
	var state atomic.Int32
	done := make(chan struct{})
	led := 0
	err := Await(t.Context(), lock, &state, done, func() {
		led++
		state.Store(Taken)
		close(done)
	})
	if err != nil || led != 1 || len(lock) != 0 {
		t.Errorf("Await = %v after %d leads, lock held %d: want nil, 1 lead, lock released", err, led, len(lock))
	}
}

// A write still queued when its context ends is abandoned: no leader may take it any more.
func TestAwaitAbandons(t *testing.T) {
	lock := make(chan struct{}, 1)
	lock <- struct{}{} // another leader is busy
	var state atomic.Int32
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := Await(ctx, lock, &state, make(chan struct{}), func() { t.Error("led while the lock was held") })
	if !errors.Is(err, context.Canceled) || state.Load() != Abandoned {
		t.Errorf("Await = %v, state %d: want context.Canceled and Abandoned", err, state.Load())
	}
}

// A write a leader has taken is waited for even when its context ends: its caller must learn
// what became of it.
func TestAwaitWaitsForTaken(t *testing.T) {
	lock := make(chan struct{}, 1)
	lock <- struct{}{}
	var state atomic.Int32
	state.Store(Taken)
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var answered atomic.Bool
	go func() {
		time.Sleep(20 * time.Millisecond)
		answered.Store(true)
		close(done)
	}()
	if err := Await(ctx, lock, &state, done, func() { t.Error("led while the lock was held") }); err != nil || !answered.Load() {
		t.Errorf("Await = %v, answered %t: want nil after the answer", err, answered.Load())
	}
}
