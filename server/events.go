package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/latchkit/latch/receipt"
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
)

// eventJSON is the data of one server-sent event.
type eventJSON struct {
	ID         int64           `json:"id"`
	Kind       string          `json:"kind"`
	At         string          `json:"at"`
	ActionID   *string         `json:"action_id"`
	EffectKey  *string         `json:"effect_key"`
	ApprovalID *string         `json:"approval_id"`
	Payload    json.RawMessage `json:"payload,omitempty"`
}

// events is GET /v1/events: the store's committed events as Server-Sent Events, each with its
// store id as the SSE id, from after Last-Event-ID (or ?after=ID; from the first event when
// neither is given), until the client goes away or the server shuts down.
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
	lastWrite := time.Now()
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
			b, _ := json.Marshal(eventJSON{ID: e.ID, Kind: e.Kind, At: e.Time.UTC().Format(receipt.TimeFormat),
				ActionID: jstr(e.ActionID), EffectKey: jstr(e.EffectKey), ApprovalID: jstr(e.ApprovalID), Payload: e.Payload})
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
