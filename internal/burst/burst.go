// Package burst holds the helpers of latch's resource tests: a surface (the HTTP API of latch
// serve, its console, the MCP gateway, the operator MCP) takes a bounded burst of requests —
// some with large bodies, some abandoned mid-body — and must come back to where it started: its
// goroutines back to their baseline, its live heap grown by a bounded amount. It is imported by
// tests only.
package burst

import (
	"fmt"
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"
)

// Snapshot is the process's goroutines and live heap at one moment, after a garbage collection.
type Snapshot struct {
	Goroutines int
	Heap       uint64 // bytes of live heap objects (runtime.MemStats.HeapAlloc after a GC)
}

// Take collects garbage and returns the process's snapshot.
func Take() Snapshot {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return Snapshot{Goroutines: runtime.NumGoroutine(), Heap: m.HeapAlloc}
}

// Bounds are how far from its baseline a process may be once a burst is over: generous, so that
// a loaded machine does not fail the test, and far below what a leak per request would leave.
type Bounds struct {
	Goroutines int           // more than the baseline; default 10
	Heap       uint64        // bytes more than the baseline; default 64 MiB
	Within     time.Duration // how long the process may take to settle; default 20s
}

func (b Bounds) withDefaults() Bounds {
	if b.Goroutines == 0 {
		b.Goroutines = 10
	}
	if b.Heap == 0 {
		b.Heap = 64 << 20
	}
	if b.Within == 0 {
		b.Within = 20 * time.Second
	}
	return b
}

// Settled waits up to b.Within for the process to come back to its baseline (two goroutines
// more at most: what the runtime or a library starts once) and fails the test, with the
// goroutines then running, if it is by then more than b from base.
func Settled(t testing.TB, what string, base Snapshot, b Bounds) Snapshot {
	t.Helper()
	b = b.withDefaults()
	deadline := time.Now().Add(b.Within)
	for {
		now := Take()
		back := now.Goroutines <= base.Goroutines+2 && now.Heap <= base.Heap+b.Heap
		late := time.Now().After(deadline)
		if back || late && now.Goroutines <= base.Goroutines+b.Goroutines && now.Heap <= base.Heap+b.Heap {
			t.Logf("%s: goroutines %d → %d, live heap %d → %d KiB", what, base.Goroutines, now.Goroutines, base.Heap>>10, now.Heap>>10)
			return now
		}
		if late {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("%s: after the burst, %d goroutines (baseline %d, at most %d more) and %d KiB of live heap (baseline %d KiB, at most %d KiB more); goroutines:\n%s",
				what, now.Goroutines, base.Goroutines, b.Goroutines, now.Heap>>10, base.Heap>>10, b.Heap>>10, buf)
			return now
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Abandon sends a request to addr (host:port) that stops in the middle of its body: head is the
// request line and headers, which must declare a Content-Length larger than sent, and sent bytes
// of the body follow before the connection is closed.
func Abandon(addr, head string, sent int) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return fmt.Errorf("abandon: %w", err)
	}
	defer c.Close()
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(head)); err != nil {
		return fmt.Errorf("abandon: %w", err)
	}
	body := make([]byte, sent)
	for i := range body {
		body[i] = 'x'
	}
	if _, err := c.Write(body); err != nil {
		return fmt.Errorf("abandon: %w", err)
	}
	return nil
}

// Run runs n requests, at most par at once: do(i) sends request i.
func Run(n, par int, do func(i int)) {
	sem := make(chan struct{}, par)
	done := make(chan struct{}, n)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; done <- struct{}{} }()
			do(i)
		}()
	}
	for range n {
		<-done
	}
}

// Bearer sends a bearer token over a transport of its own, whose idle connections a test can
// close.
type Bearer struct {
	Token     string
	Transport *http.Transport
}

// RoundTrip sends r with the Authorization header set.
func (b Bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.Token)
	return b.Transport.RoundTrip(r)
}
