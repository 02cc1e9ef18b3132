package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sseEvent is one server-sent event as read off the wire.
type sseEvent struct {
	id   int64
	kind string
	data map[string]any
}

// subscribe opens GET /v1/events and returns a channel of its events and the response.
func subscribe(t *testing.T, s *srv, token, lastID string) (<-chan sseEvent, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan sseEvent, 100)
	if resp.StatusCode != 200 {
		close(out)
		return out, resp
	}
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				ev.id, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
			case strings.HasPrefix(line, "event: "):
				ev.kind = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data)
			case line == "" && ev.kind != "":
				out <- ev
				ev = sseEvent{}
			}
		}
	}()
	return out, resp
}

func next(t *testing.T, ch <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the event stream ended")
		}
		return ev
	case <-time.After(15 * time.Second):
		t.Fatal("no event within 15s")
	}
	return sseEvent{}
}

// TestEventStream: committed events arrive in id order with the store's ids; a client that
// reconnects with Last-Event-ID gets exactly the events after it; agents may not subscribe; a
// shutdown ends the stream.
func TestEventStream(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := start(t, backend, nil)
			if _, resp := subscribe(t, s, s.alice, ""); resp.StatusCode != 403 {
				t.Errorf("an agent subscribing = %d, want 403", resp.StatusCode)
			}
			ch, _ := subscribe(t, s, s.approver, "")
			r := s.do("POST", "/v1/actions", s.alice, charge("inv_1", 100))
			id := r.body["action_id"].(string)
			s.do("POST", "/v1/actions/"+id+"/outcome", s.alice, map[string]any{"outcome": "committed"})
			var got []sseEvent
			for len(got) == 0 || got[len(got)-1].kind != "execution_committed" {
				got = append(got, next(t, ch))
			}
			var kinds []string
			for i, ev := range got {
				kinds = append(kinds, ev.kind)
				if ev.data["id"] != float64(ev.id) || ev.data["action_id"] != id {
					t.Errorf("event %d = %+v", i, ev)
				}
				if i > 0 && ev.id <= got[i-1].id {
					t.Errorf("event ids not increasing: %d after %d", ev.id, got[i-1].id)
				}
			}
			if strings.Join(kinds, ",") != "action_proposed,policy_evaluated,effect_reserved,execution_committed" {
				t.Errorf("kinds = %v", kinds)
			}
			// Resume after the second event: the third comes next, then the fourth.
			resumed, _ := subscribe(t, s, s.approver, strconv.FormatInt(got[1].id, 10))
			if a, b := next(t, resumed), next(t, resumed); a.id != got[2].id || b.id != got[3].id {
				t.Errorf("resumed after %d: got %d, %d; want %d, %d", got[1].id, a.id, b.id, got[2].id, got[3].id)
			}
			// A shutdown ends open streams instead of waiting for them.
			s.cancel()
			select {
			case err := <-s.done:
				if err != nil {
					t.Errorf("Serve: %v", err)
				}
				s.done <- nil
			case <-time.After(10 * time.Second):
				t.Fatal("Serve did not return while event streams were open")
			}
		})
	}
}
