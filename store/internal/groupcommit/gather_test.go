package groupcommit

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A queue of n writes, as a store keeps one.
type queue struct {
	mu sync.Mutex
	n  int
}

func (q *queue) push(g *Gatherer) {
	q.mu.Lock()
	q.n++
	q.mu.Unlock()
	g.Arrived()
}

func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// A leader after a batch of one, or with as many writes queued as the last batch held, does not
// wait at all: with an hour's window, any wait shows.
func TestWaitReturnsAtOnce(t *testing.T) {
	g := New(time.Hour)
	q := &queue{}
	waits := func(what string) {
		t.Helper()
		done := make(chan struct{})
		go func() { g.Wait(q.len); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Wait waited (its window is an hour)", what)
		}
	}
	waits("no batch yet")
	g.Took(1)
	waits("after a batch of one")
	g.Took(3)
	for range 3 {
		q.push(g)
	}
	waits("as many queued as the last batch held")
}

// A leader that expects more writes returns when they have arrived, not at the window's end.
func TestWaitReturnsWhenTheWritesArrive(t *testing.T) {
	g := New(time.Hour)
	g.Took(4)
	q := &queue{}
	q.push(g)
	var returned atomic.Bool
	done := make(chan struct{})
	go func() {
		g.Wait(q.len)
		returned.Store(true)
		close(done)
	}()
	for range 2 {
		time.Sleep(5 * time.Millisecond)
		q.push(g)
		time.Sleep(5 * time.Millisecond)
		if returned.Load() {
			t.Fatalf("Wait returned with %d of the 4 writes queued", q.len())
		}
	}
	q.push(g)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return once 4 writes were queued")
	}
}

// Writes that do not come cost one window.
func TestWaitEndsWithTheWindow(t *testing.T) {
	g := New(20 * time.Millisecond)
	g.Took(8)
	q := &queue{}
	q.push(g)
	start := time.Now()
	g.Wait(q.len)
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("Wait returned after %v with 1 of 8 writes queued, before the 20ms window", d)
	}
}
