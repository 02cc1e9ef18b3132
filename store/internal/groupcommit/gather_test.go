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
// wait at all: with an hour's window and gap, any wait shows.
func TestWaitReturnsAtOnce(t *testing.T) {
	g := New(time.Hour, time.Hour)
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
	g := New(time.Hour, time.Hour)
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

// Writes that keep arriving but never reach the count cost one window.
func TestWaitEndsWithTheWindow(t *testing.T) {
	g := New(100*time.Millisecond, time.Hour)
	g.Took(1000)
	q := &queue{}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
				q.push(g)
			}
		}
	}()
	start := time.Now()
	queued := make(chan int, 1)
	go func() { g.Wait(q.len); queued <- q.len() }()
	select {
	case n := <-queued:
		// A write every 2ms or more takes 2s or more to reach 1000: only the window ends the wait.
		if d := time.Since(start); d < 100*time.Millisecond || n >= 1000 {
			t.Errorf("Wait returned after %v with %d writes queued, want at the 100ms window with fewer than 1000", d, n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait still waiting 10s into a 100ms window")
	}
}

// Writes that stop arriving cost one gap after the last of them, not the window.
func TestWaitEndsAGapAfterTheLastArrival(t *testing.T) {
	const gap = 200 * time.Millisecond
	g := New(time.Hour, gap)
	g.Took(100)
	q := &queue{}
	q.push(g)
	start := time.Now()
	done := make(chan time.Time)
	go func() { g.Wait(q.len); done <- time.Now() }()
	// Arrivals 20ms apart for 300ms keep the leader waiting well past one gap.
	var last time.Time
	for range 15 {
		time.Sleep(20 * time.Millisecond)
		q.push(g)
		last = time.Now()
	}
	select {
	case <-done:
		t.Fatalf("Wait had returned %v in, while writes were still arriving 20ms apart (gap %v)", time.Since(start), gap)
	default:
	}
	select {
	case end := <-done:
		if d := end.Sub(last); d < gap {
			t.Errorf("Wait returned %v after the last arrival, before the %v gap", d, gap)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait still waiting 10s after the last arrival (gap 200ms, window an hour)")
	}
}
