package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"github.com/latchkit/latch/auth"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/latchkit/latch/identity"
	"github.com/latchkit/latch/internal/consoletest"
	"github.com/latchkit/latch/server"
	"github.com/latchkit/latch/store"
)

// recheckBound is how long after its credential stops holding an open stream may still send:
// the server's recheck interval (1s) plus a poll, with room for a slow machine.
const recheckBound = 3 * time.Second

// lastEventID is the id of the newest event in the store.
func lastEventID(t *testing.T, s *srv) int64 {
	t.Helper()
	evs, err := s.g.Store().Events(t.Context(), store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].ID
}

// wantClosed reads ch until the stream ends and checks that it ended with a closed event of
// reason, within recheckBound of the first read, having sent no event above maxID.
func wantClosed(t *testing.T, ch <-chan sseEvent, maxID int64, reason string) {
	t.Helper()
	deadline := time.After(recheckBound + 15*time.Second) // the stream's own bound is asserted below
	start := time.Now()
	var last sseEvent
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				if last.kind != "closed" || last.data["reason"] != reason || last.data["detail"] == "" {
					t.Fatalf("the stream ended with %+v, want a closed event with reason %s", last, reason)
				}
				if d := time.Since(start); d > recheckBound {
					t.Errorf("the stream ended %s after the credential stopped holding, want within %s", d, recheckBound)
				}
				return
			}
			if ev.kind != "closed" && ev.id > maxID {
				t.Fatalf("event %d (%s) was sent after the credential stopped holding", ev.id, ev.kind)
			}
			last = ev
		case <-deadline:
			t.Fatal("the stream is still open")
		}
	}
}

// busy proposes an action every 100ms until the returned stop is called (and returns once the
// last proposal is done): a stream that still sends would have their events to send.
func busy(propose func(n int)) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-quit:
				return
			case <-time.After(100 * time.Millisecond):
			}
			propose(i)
		}
	}()
	return func() { close(quit); <-done }
}

// proposer posts body(n) to POST /v1/actions of the server at base as bearer; errors are
// ignored: the proposals only make events.
func proposer(base, bearer string, body func(n int) string) func(n int) {
	return func(n int) {
		req, _ := http.NewRequest("POST", base+"/v1/actions", strings.NewReader(body(n)))
		req.Header.Set("Authorization", "Bearer "+bearer)
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}
}

func chargeBody(n int) string {
	return `{"action":"billing.charge","arguments":{"invoice_id":"busy_` + strconv.Itoa(n) + `","amount":100}}`
}

func mergeBody(n int) string {
	return `{"action":"git.merge","arguments":{"repo":"latch","number":` + strconv.Itoa(n) + `}}`
}

// TestEventStreamRevokedToken: a stream opened with an approver token ends with a closed event
// (token_revoked) once the token is revoked, and sends no event after the recheck bound — even
// with a token cache of an hour, which a stream reads past.
func TestEventStreamRevokedToken(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := start(t, backend, &server.Config{TokenCache: time.Hour})
			ts := s.g.Store().(store.TokenStore)
			secret, tk, err := auth.CreateToken(t.Context(), ts, &auth.NewToken{Kind: store.TokenApprover, Approver: "erin"}, s.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			ch, resp := subscribe(t, s, secret, "")
			if resp.StatusCode != 200 {
				t.Fatalf("subscribe = %d", resp.StatusCode)
			}
			s.do("POST", "/v1/actions", s.alice, charge("inv_1", 100))
			if ev := next(t, ch); ev.kind != "action_proposed" {
				t.Fatalf("first event = %+v", ev)
			}
			if _, err := ts.RevokeToken(t.Context(), tk.ID, s.clock.Now()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1100 * time.Millisecond) // past the recheck interval: every later event is after it
			maxID := lastEventID(t, s)
			defer busy(proposer(s.url, s.alice, chargeBody))()
			wantClosed(t, ch, maxID, "token_revoked")
		})
	}
}

// TestEventStreamExpiredToken: a stream opened with an approver token that expires ends with a
// closed event (token_expired) when the server's clock passes the expiry, with no event after.
func TestEventStreamExpiredToken(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := start(t, backend, nil)
			secret, _, err := auth.CreateToken(t.Context(), s.g.Store().(store.TokenStore),
				&auth.NewToken{Kind: store.TokenApprover, Approver: "erin", TTL: time.Minute}, s.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			ch, resp := subscribe(t, s, secret, "")
			if resp.StatusCode != 200 {
				t.Fatalf("subscribe = %d", resp.StatusCode)
			}
			s.do("POST", "/v1/actions", s.alice, charge("inv_1", 100))
			next(t, ch)
			s.clock.Add(time.Minute)
			maxID := lastEventID(t, s)
			defer busy(proposer(s.url, s.alice, chargeBody))()
			wantClosed(t, ch, maxID, "token_expired")
		})
	}
}

// TestEventStreamExpiredJWT: a stream opened with a person's JWT ends with a closed event
// (token_expired) when the clock passes the JWT's exp, with no event after.
func TestEventStreamExpiredJWT(t *testing.T) {
	t.Parallel()
	iss := newIssuer(t)
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			var s *srv
			now := func() time.Time { return s.clock.Now() }
			v := iss.verifier(func(c *identity.Config) {
				c.ApproverClaim, c.ApproverValue, c.Now = "latch_role", "approver", func() time.Time { return now() }
			})
			s = start(t, backend, &server.Config{Identity: v})
			at := s.clock.Now()
			tok, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"iss": "https://sso.test", "aud": "latch", "sub": "dana",
				"latch_role": "approver", "iat": at.Unix(), "exp": at.Add(time.Minute).Unix()}).SignedString(iss.priv)
			if err != nil {
				t.Fatal(err)
			}
			ch, resp := subscribe(t, s, tok, "")
			if resp.StatusCode != 200 {
				t.Fatalf("subscribe = %d", resp.StatusCode)
			}
			s.do("POST", "/v1/actions", s.alice, charge("inv_1", 100))
			next(t, ch)
			s.clock.Add(time.Minute)
			maxID := lastEventID(t, s)
			defer busy(proposer(s.url, s.alice, chargeBody))()
			wantClosed(t, ch, maxID, "token_expired")
		})
	}
}

// TestEventStreamConsoleSession: the console follows the stream with its session cookie; when
// the person logs out, or their account is removed, the stream ends with a closed event
// (session_ended) and sends nothing after the recheck bound.
func TestEventStreamConsoleSession(t *testing.T) {
	t.Parallel()
	const pw = "correct horse battery staple"
	for _, tc := range []struct{ end, backend string }{
		{"logout", "sqlite"}, {"logout", "postgres"}, {"account removed", "sqlite"}, {"account removed", "postgres"},
	} {
		end := tc.end
		t.Run(end+"/"+tc.backend, func(t *testing.T) {
			t.Parallel()
			cs := consoletest.Start(t, &consoletest.Options{Backend: tc.backend})
			cs.AddAccount(t, "alice", pw, "payments-leads")
			c := consoletest.Client(t, "")
			if p := consoletest.Login(t, c, cs.URL, "alice", pw); p.Status != http.StatusSeeOther {
				t.Fatalf("login = %d %s", p.Status, p.Body)
			}
			csrf := consoletest.CSRF(consoletest.Get(t, c, cs.URL+"/approvals").Body)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", cs.URL+"/v1/events", nil)
			resp, err := c.Do(req)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("the console's stream = %v %v", resp, err)
			}
			ch := make(chan sseEvent, 100)
			go func() {
				defer close(ch)
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
						ch <- ev
						ev = sseEvent{}
					}
				}
			}()
			propose := proposer(cs.URL, cs.Agent, mergeBody)
			propose(1)
			if ev := next(t, ch); ev.kind != "action_proposed" {
				t.Fatalf("first event = %+v", ev)
			}
			switch end {
			case "logout":
				if p := consoletest.Post(t, c, cs.URL+"/logout", url.Values{"csrf": {csrf}}); p.Status != http.StatusSeeOther {
					t.Fatalf("logout = %d %s", p.Status, p.Body)
				}
			default:
				if _, err := cs.Guard.Store().(store.AccountStore).RemoveAccount(t.Context(), "alice"); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(1100 * time.Millisecond)
			evs, err := cs.Guard.Store().Events(t.Context(), store.EventFilter{})
			if err != nil {
				t.Fatal(err)
			}
			maxID := evs[len(evs)-1].ID
			defer busy(func(n int) { propose(n + 2) })()
			wantClosed(t, ch, maxID, "session_ended")
		})
	}
}
