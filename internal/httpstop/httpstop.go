// Package httpstop lets an http.Server shut down without waiting on connections that never
// sent a request.
//
// http.Server.Shutdown closes idle connections at once, but counts a connection that was
// accepted and has not yet sent a request as busy for its first five seconds. An HTTP client
// leaves such connections behind as a matter of course: it dials a second connection for a
// request, an idle one frees first and is used, and the dialled one waits in its pool unused.
// One of them holds every shutdown for five seconds. Fresh tracks those connections and closes
// them when the shutdown begins. No request has been read from them, so nothing they carry
// has run.
package httpstop

import (
	"net"
	"net/http"
	"sync"
)

// Fresh is the set of a server's connections that have not sent a request yet. Install it with
// Install before the server serves.
type Fresh struct {
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	stopping bool
}

// Install makes hs track its fresh connections and close them when hs.Shutdown begins. It
// chains any ConnState hook hs already has.
func Install(hs *http.Server) *Fresh {
	f := &Fresh{conns: make(map[net.Conn]struct{})}
	next := hs.ConnState
	hs.ConnState = func(c net.Conn, s http.ConnState) {
		f.track(c, s)
		if next != nil {
			next(c, s)
		}
	}
	hs.RegisterOnShutdown(f.closeAll)
	return f
}

func (f *Fresh) track(c net.Conn, s http.ConnState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case s == http.StateNew && f.stopping:
		// Accepted as the listener closed: it can carry nothing that runs.
		_ = c.Close()
	case s == http.StateNew:
		f.conns[c] = struct{}{}
	default:
		delete(f.conns, c)
	}
}

// closeAll closes every connection that has not sent a request, and every one accepted from
// now on.
func (f *Fresh) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopping = true
	for c := range f.conns {
		_ = c.Close()
		delete(f.conns, c)
	}
}
