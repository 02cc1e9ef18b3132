package server

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"sync"
	"time"
)

// CallContentType is the media type of POST /v1/calls, both ways: one JSON document a line.
const CallContentType = "application/x-ndjson"

// POST /v1/calls is a call whose effect runs on the caller's side, begun and reported on one
// request: the caller sends the action as the first line of the request body and keeps the body
// open; the server begins the call (decide, approve, reserve) as POST /v1/actions does and
// answers the begun action as the first line of a streamed answer; the caller runs its effect
// and sends the outcome as the second line of the same body; the server records it as POST
// /v1/actions/{id}/outcome does and answers the recorded outcome (or the problem refusing it)
// as the second line. One request instead of two: one authentication, one routing, one
// exchange of headers.
//
// An outcome that does not arrive — the connection cut, the body ended without one, the
// deadline passed — is never guessed: nothing is recorded, and the effect stays executing under
// its lease, exactly as when a caller dies between a begin and its outcome. The caller may still
// report it on POST /v1/actions/{id}/outcome.

// callAnswerGrace is how long the answer to a call's outcome has to go out after the outcome's
// deadline.
const callAnswerGrace = 30 * time.Second

// postCall is POST /v1/calls.
func (s *Server) postCall(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.agentOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != CallContentType {
			writeProblem(w, problem(http.StatusUnsupportedMediaType, "unsupported_media_type",
				fmt.Sprintf("Content-Type %q: the body of POST /v1/calls is %s, one JSON document a line (the action, then the outcome)", ct, CallContentType)))
			return
		}
	}
	key, kp := idempotencyKey(r)
	if kp != nil {
		writeProblem(w, kp)
		return
	}
	rc := http.NewResponseController(w) // full duplex already (route.duplex)
	m := &meter{s: s, who: callerKey{c.principal.Agent, c.principal.User}}
	if p := m.hold(inFlightFloor); p != nil {
		w.Header().Set("Retry-After", "1")
		writeProblem(w, p)
		return
	}
	defer m.done()
	br := lineReaders.Get().(*bufio.Reader)
	br.Reset(r.Body)
	defer func() { br.Reset(nil); lineReaders.Put(br) }()

	line, err := readLine(br, s.cfg.MaxBody, m)
	var req actionRequest
	if err == nil {
		err = decodeLine(line, &req, "the action (the first line)")
	}
	if err != nil {
		writeProblem(w, lineProblem(err, "the action (the first line)"))
		return
	}
	p, status, answer := s.beginCall(r, c, &req, key)
	m.shrink() // the action is decided: only the reader's buffer is held until the outcome comes
	if p == nil {
		writeAnswer(w, status, answer) // refused, or a person must approve: the exchange ends here
		return
	}
	if cw, ok := w.(*confirmWriter); ok {
		if cw.confirm(); cw.refused {
			return // the token was revoked meanwhile, and nothing was reserved with it: the 401 is the answer
		}
	}
	w.Header().Del("Connection") // the body is read to its end below: the connection is reused
	w.Header().Set("Content-Type", CallContentType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if err := writeValue(w, answer); err != nil {
		s.log.Debug("latch serve: the begun call's answer could not be written; it stays executing under its lease", "action_id", p.ActionID, "err", err)
		return
	}
	if err := rc.Flush(); err != nil {
		s.log.Debug("latch serve: the begun call's answer could not be sent; it stays executing under its lease", "action_id", p.ActionID, "err", err)
		return
	}

	// The outcome must come while the lease holds the effect, and within the server's bound on
	// reading a request (ReadTimeout) from the begin's answer: whichever ends first. The answer
	// to it then has callAnswerGrace to go out. (A server that cannot set deadlines bounds the
	// request its own way.)
	wait := s.cfg.ReadTimeout
	if !p.LeaseExpiresAt.IsZero() {
		wait = min(wait, p.LeaseExpiresAt.Sub(s.g.Now())) // the lease is on the guard's clock
	}
	deadline := time.Now().Add(wait)
	_ = rc.SetReadDeadline(deadline)
	_ = rc.SetWriteDeadline(deadline.Add(callAnswerGrace))
	rec, ended, pr := s.callOutcome(r, br, m, p.ActionID, deadline)
	var answer2 any = rec
	if pr != nil {
		pr.ActionID = p.ActionID
		answer2 = pr
	}
	if err := writeValue(w, answer2); err != nil {
		// Recorded or not, the caller that lost this answer reads the action back with
		// GET /v1/actions/{id}.
		s.log.Debug("latch serve: the answer to a call's outcome could not be written", "action_id", p.ActionID, "err", err)
		return
	}
	if !ended {
		// A refused outcome, the body still open: the line goes now, and the body is read to
		// its end here, while the handler runs, so that the connection can take the next
		// request and net/http does not reach the body's end after the handler
		// (golang/go#68560). A read error or the deadline ends it too.
		if rc.Flush() == nil {
			_, _ = io.Copy(io.Discard, br)
		}
	}
	// Else the body has ended: the line goes out with the answer's end, in one write.
}

// lineReaders are the readers of the calls' bodies.
var lineReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, inFlightFloor) }}

// callOutcome reads the outcome line of the call id and the body's end after it, and records
// the outcome, authenticating the request again first as POST /v1/actions/{id}/outcome would:
// a credential revoked or expired since the begin records nothing. It returns the answer, or
// the problem refusing the outcome when nothing was recorded, and whether the body was read to
// its end.
func (s *Server) callOutcome(r *http.Request, br *bufio.Reader, m *meter, id string, deadline time.Time) (_ *recorded, ended bool, _ *Problem) {
	defer m.shrink()
	line, err := readLine(br, s.cfg.MaxBody, m)
	switch {
	case errors.Is(err, io.EOF):
		return nil, true, problem(http.StatusBadRequest, "outcome_missing",
			"the request body ended without an outcome: nothing is recorded, the effect stays executing under its lease: report it with POST /v1/actions/"+id+"/outcome")
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, false, problem(http.StatusRequestTimeout, "outcome_timeout",
			fmt.Sprintf("no outcome arrived by %s (the lease's end or the server's read timeout): nothing is recorded, the effect stays executing under its lease: report it with POST /v1/actions/%s/outcome", deadline.UTC().Format(time.RFC3339Nano), id))
	case err == nil:
	default:
		return nil, false, lineProblem(err, "the outcome (the second line)")
	}
	var req outcomeRequest
	if err := decodeLine(line, &req, "the outcome (the second line)"); err != nil {
		return nil, false, lineProblem(err, "the outcome (the second line)")
	}
	// The outcome is the last line. The body's end is read before anything is recorded: a
	// body with more after its outcome is refused as a body with data after its value is.
	if p := bodyEnd(br, s.cfg.MaxBody, m, id, deadline); p != nil {
		return nil, false, p
	}
	rec, p := s.recordAgain(r, id, &req)
	return rec, true, p
}

// recordAgain records the outcome req of the call id for the request's credential,
// authenticated again.
func (s *Server) recordAgain(r *http.Request, id string, req *outcomeRequest) (*recorded, *Problem) {
	c, p := s.authenticateAs(r, true)
	if p != nil {
		return nil, p
	}
	if p := c.agentOnly(); p != nil {
		return nil, p
	}
	rec, p := s.record(r.Context(), c, id, req)
	if err := s.stillHolds(r.Context(), c); err != nil {
		return nil, authProblem(err)
	}
	return rec, p
}

// bodyEnd reads the rest of a call's body after its outcome line: nothing but whitespace (at
// most limit bytes of it), then its end. It returns the problem when there is more, or when the
// end does not come by the deadline.
func bodyEnd(br *bufio.Reader, limit int64, m *meter, id string, deadline time.Time) *Problem {
	var blank int64
	for {
		line, err := readLine(br, limit, m)
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case errors.Is(err, os.ErrDeadlineExceeded):
			return problem(http.StatusRequestTimeout, "outcome_timeout",
				fmt.Sprintf("the request body did not end after the outcome by %s (the lease's end or the server's read timeout): the outcome is the last line, end the body after it; nothing is recorded, the effect stays executing under its lease: report it with POST /v1/actions/%s/outcome", deadline.UTC().Format(time.RFC3339Nano), id))
		case err != nil:
			return lineProblem(err, "the end of the body")
		case len(bytes.TrimSpace(line)) > 0:
			return problem(http.StatusBadRequest, "invalid_json",
				"the request body goes on after the outcome (the second line): the outcome is the last line; nothing is recorded, the effect stays executing under its lease")
		}
		if blank += int64(len(line)) + 1; blank > limit {
			return problem(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the blank lines after the outcome exceed %d bytes", limit))
		}
	}
}

// lineError is a line of a call's body that is wrong: the problem saying how.
type lineError struct{ p *Problem }

func (e *lineError) Error() string { return e.p.Detail }

// lineProblem is the problem of reading or decoding a line (what) with err.
func lineProblem(err error, what string) *Problem {
	var le *lineError
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &le):
		return le.p
	case errors.As(err, &tooBig):
		return problem(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("%s exceeds %d bytes", what, tooBig.Limit))
	case errors.Is(err, io.EOF):
		return problem(http.StatusBadRequest, "invalid_json", "the request body is empty: send "+what+" as one line of JSON")
	case errors.Is(err, os.ErrDeadlineExceeded):
		return problem(http.StatusRequestTimeout, "request_timeout", what+" did not arrive in time")
	}
	return problem(http.StatusBadRequest, "invalid_json", fmt.Sprintf("reading %s: %v", what, err))
}

// decodeLine decodes one line strictly into v, as decode reads a whole body: the problem names
// the line at fault.
func decodeLine(line []byte, v any, what string) error {
	if len(bytes.TrimSpace(line)) == 0 {
		return &lineError{problem(http.StatusBadRequest, "invalid_json", what+" is an empty line: send one JSON object a line")}
	}
	if h, ok := v.(hotDecoder); ok && h.decodeHot(line) {
		return nil
	}
	if p := decodeRaw(line, v, false); p != nil {
		p.Detail = what + ": " + p.Detail
		return &lineError{p}
	}
	return nil
}

// readLine reads the next line of br, without its end (\n or \r\n), counting what it holds
// with m: at most limit bytes, else a *http.MaxBytesError. The last line may end at the end of
// the body instead; io.EOF is returned when no byte came before it.
func readLine(br *bufio.Reader, limit int64, m *meter) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		n := int64(len(line) + len(frag))
		if n > limit+2 || (n > limit && !bytes.HasSuffix(frag, []byte("\n"))) {
			return nil, &http.MaxBytesError{Limit: limit}
		}
		if p := m.hold(n); p != nil {
			return nil, &lineError{p}
		}
		// Copied, always: what is decoded from a line (the arguments) may be kept after the
		// reader's buffer is read over by the next one.
		line = append(line, frag...)
		switch {
		case err == nil:
			line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
			if int64(len(line)) > limit {
				return nil, &http.MaxBytesError{Limit: limit}
			}
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return line, nil
		}
		return nil, err
	}
}

// meter counts the bytes one exchange of POST /v1/calls holds against the in-flight bounds
// (inflight.go) as it reads them: a line is counted as it grows, and given back once decided,
// so that a caller running its effect holds no more than the reader's buffer.
type meter struct {
	s   *Server
	who callerKey
	n   int64
}

// hold makes the count at least n bytes (and at least inFlightFloor), or returns the problem
// refusing more.
func (m *meter) hold(n int64) *Problem {
	n = max(n, inFlightFloor)
	if n <= m.n {
		return nil
	}
	// Grow by doubling, so that a long line takes the lock a few times, not once a fragment;
	// exactly n when doubling is more than the bounds leave.
	if grown := min(max(n, 2*m.n), m.s.cfg.MaxBody+2); grown > n && m.s.take(m.who, grown-m.n, m.n) == nil {
		m.n = grown
		return nil
	}
	if p := m.s.take(m.who, n-m.n, m.n); p != nil {
		return p
	}
	m.n = n
	return nil
}

// shrink gives back all but inFlightFloor.
func (m *meter) shrink() {
	if m.n > inFlightFloor {
		m.s.release(m.who, m.n-inFlightFloor)
		m.n = inFlightFloor
	}
}

// done gives back everything.
func (m *meter) done() {
	if m.n > 0 {
		m.s.release(m.who, m.n)
		m.n = 0
	}
}
