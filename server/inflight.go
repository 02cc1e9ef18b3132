package server

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
)

// Defaults of the in-flight limits (Config.MaxInFlight, Config.MaxCallerInFlight).
const (
	DefaultMaxInFlight       = 64 << 20 // 64 MiB of request bodies, all callers together
	DefaultMaxCallerInFlight = 8 << 20  // 8 MiB of them for one caller
	// inFlightFloor is the least a request is counted at: many small requests in flight cost
	// goroutines and buffers too.
	inFlightFloor = 4 << 10
)

// inFlight counts the request bodies being answered on the routes that carry a call's arguments
// or result (POST /v1/actions, its outcome, and POST /v1/calls, counted as it reads each line): a request costs the server several times its
// body while it is decided, reserved and recorded, so what is in flight at once is bounded, in
// all and per caller. A request past a bound is refused at once, before its body is read, with
// a 429 problem naming the bound; one caller's burst leaves the others their share.
type inFlight struct {
	mu       sync.Mutex
	total    int64
	byCaller map[callerKey]int64
}

// callerKey is one caller of the in-flight bounds: a principal.
type callerKey struct{ agent, user string }

// acquire counts r's body (its Content-Length, or the most it may be when it does not say) for
// who and returns the bytes counted, to give back to release when the request is answered, or
// the problem refusing it.
func (s *Server) acquire(r *http.Request, who callerKey) (int64, *Problem) {
	n := r.ContentLength
	if n < 0 || n > s.cfg.MaxBody {
		n = s.cfg.MaxBody // unknown (chunked), or larger: it may be read up to MaxBody
	}
	n = max(n, inFlightFloor)
	return n, s.take(who, n, 0)
}

// take counts n more bytes for who, of a request that has own bytes counted already, or
// returns the problem refusing them (and counts nothing). A request that is its caller's only
// one (or the server's) is let in whatever n is: the bounds stop a burst, not a request that
// MaxBody admits.
func (s *Server) take(who callerKey, n, own int64) *Problem {
	f := &s.inflight
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byCaller == nil {
		f.byCaller = make(map[callerKey]int64)
	}
	mine := f.byCaller[who]
	switch {
	case mine > own && mine+n > s.cfg.MaxCallerInFlight:
		return tooMany(fmt.Sprintf("this caller has %d bytes of requests in flight on the begin, outcome and call routes; one caller may have at most %d (max_caller_in_flight): retry once an earlier request is answered", mine, s.cfg.MaxCallerInFlight))
	case f.total > own && f.total+n > s.cfg.MaxInFlight:
		return tooMany(fmt.Sprintf("the server has %d bytes of requests in flight on the begin, outcome and call routes, at most %d (max_in_flight): retry shortly", f.total, s.cfg.MaxInFlight))
	}
	f.byCaller[who] = mine + n
	f.total += n
	return nil
}

// release gives back the n bytes acquire counted for who.
func (s *Server) release(who callerKey, n int64) {
	f := &s.inflight
	f.mu.Lock()
	defer f.mu.Unlock()
	f.total -= n
	if f.byCaller[who] -= n; f.byCaller[who] <= 0 {
		delete(f.byCaller, who)
	}
}

// tooMany is the 429 of a request past an in-flight bound.
func tooMany(detail string) *Problem {
	return problem(http.StatusTooManyRequests, "too_many_in_flight", detail)
}

// limited runs h counting r's body against the in-flight bounds of c's principal.
func (s *Server) limited(w http.ResponseWriter, r *http.Request, c *caller, h func()) {
	who := callerKey{c.principal.Agent, c.principal.User}
	n, p := s.acquire(r, who)
	if p != nil {
		w.Header().Set("Retry-After", strconv.Itoa(1))
		writeProblem(w, p)
		return
	}
	defer s.release(who, n)
	h()
}
