package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/latchkit/latch/auth"
	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/store"
)

// How GET /v1/events follows the log.
const (
	eventPoll      = 250 * time.Millisecond
	eventHeartbeat = 15 * time.Second
	eventPage      = 500
	// eventSettle is how long a gap in event ids is waited on before the stream passes it. On
	// Postgres, ids are taken when a transaction inserts and become visible when it commits, so
	// a lower id can appear after a higher one; a rolled-back transaction leaves a gap forever.
	eventSettle = 2 * time.Second
	// eventRecheck is how often an open stream checks its credential again (one store read,
	// past any token cache): a revoked token, an ended session or a removed account stops the
	// stream within it, and no event is sent on a check older than it. Expiry is checked
	// before every write.
	eventRecheck = time.Second
)

// closedJSON is the data of the stream's last event, closed: why the credential that opened it
// no longer holds.
type closedJSON struct {
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

// holds checks again the credential c that opened the stream r: its expiry, and when full, the
// credential itself as a new request would be checked, but past the token cache. It returns ""
// when the credential still holds, else the reason it does not (token_revoked, token_expired,
// invalid_token, session_ended…) and a detail.
func (s *Server) holds(r *http.Request, c *caller, full bool) (string, string) {
	if !c.expiresAt.IsZero() && !s.cfg.Now().Before(c.expiresAt) {
		return "token_expired", "the credential expired at " + c.expiresAt.UTC().Format(time.RFC3339)
	}
	switch {
	case !full:
	case c.console:
		if name, ok := s.con.Approver(r); !ok || name != c.approver {
			return "session_ended", "the console session ended (logged out, expired, or its account removed)"
		}
	case c.cred != "":
		nc, err := s.auth.Recheck(r.Context(), c.cred)
		var ae *auth.AuthError
		switch {
		case errors.As(err, &ae):
			return ae.Reason, ae.Detail
		case err != nil:
			return "store_unavailable", err.Error()
		case nc.Kind != c.kind || nc.Approver != c.approver:
			return "invalid_token", "the credential names someone else now"
		}
	}
	return "", ""
}

// events is GET /v1/events: the store's committed events as Server-Sent Events, each with its
// store id as the SSE id, from after Last-Event-ID (or ?after=ID; from the first event when
// neither is given), until the client goes away, the server shuts down, or the credential that
// opened the stream stops holding: it is checked again every eventRecheck (and its expiry
// before every write), and the stream then ends with a closed event saying why.
func (s *Server) events(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.approverOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	var after int64
	for _, v := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after")} {
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeProblem(w, badQuery("after", fmt.Sprintf("event id %q is not a non-negative integer", v)))
			return
		}
		after = n
		break
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives the server's write timeout
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": latch events\n\n")
	if err := rc.Flush(); err != nil {
		return
	}
	var gapSince time.Time
	lastWrite, lastCheck := time.Now(), time.Now()
	tick := time.NewTicker(eventPoll)
	defer tick.Stop()
	for {
		evs, err := s.g.Store().Events(r.Context(), store.EventFilter{AfterID: after, Limit: eventPage})
		if err != nil {
			if r.Context().Err() == nil {
				fmt.Fprintf(w, "event: error\ndata: %q\n\n", trimLatch(err))
				_ = rc.Flush()
			}
			return
		}
		// The credential is checked after the read, before anything read is written: no event
		// leaves on a check older than eventRecheck, nor past the credential's expiry.
		due := time.Since(lastCheck) >= eventRecheck
		if reason, detail := s.holds(r, c, due); reason != "" {
			b, _ := json.Marshal(closedJSON{Reason: reason, Detail: detail})
			fmt.Fprintf(w, "event: closed\ndata: %s\n\n", b)
			_ = rc.Flush()
			return
		} else if due {
			lastCheck = time.Now()
		}
		for _, e := range evs {
			if e.ID != after+1 && after > 0 {
				// A gap: an earlier transaction may still be committing its events.
				if gapSince.IsZero() {
					gapSince = time.Now()
				}
				if time.Since(gapSince) < eventSettle {
					break
				}
			}
			gapSince = time.Time{}
			// The data is the event as every surface shows it (jsonview.Event).
			b, _ := json.Marshal(jsonview.NewEvent(s.g.Policy(), e))
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.ID, e.Kind, b)
			after = e.ID
			lastWrite = time.Now()
		}
		if time.Since(lastWrite) >= eventHeartbeat {
			fmt.Fprint(w, ": ping\n\n")
			lastWrite = time.Now()
		}
		if err := rc.Flush(); err != nil {
			return
		}
		if len(evs) == eventPage && gapSince.IsZero() {
			continue // more are waiting
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.stopping:
			return
		case <-tick.C:
		}
	}
}
