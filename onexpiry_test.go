package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/notify"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// onExpiryPolicy denies a refund nobody answered within its hour.
const onExpiryPolicy = `
schema: latch.policy/v1
approvers:
  roles:
    leads: [alice, bob]
actions:
  refund.issue:
    effect: "refund:{id}"
    decision: approve
    approval_ttl: 1h
    approvers:
      roles: [leads]
      on_expiry: deny
`

// TestOnExpiryDeny: under approvers.on_expiry: deny, a request still pending at its expiry is
// written denied by latch:expiry on every path that finds it expired — the sweeper, a late
// answer, the call presenting it — on both stores; the call is refused approval_denied and never
// runs; the event reaches --notify; the chain verifies.
func TestOnExpiryDeny(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var alerts []notify.Alert
			hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				var a notify.Alert
				if json.Unmarshal(body, &a) == nil {
					mu.Lock()
					alerts = append(alerts, a)
					mu.Unlock()
				}
			}))
			t.Cleanup(hook.Close)
			n, err := notify.New(&notify.Config{URLs: []string{hook.URL}, Secret: []byte("on-expiry-secret")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { n.Close() })
			p, err := policy.Parse("latch.yaml", []byte(onExpiryPolicy))
			if err != nil {
				t.Fatal(err)
			}
			url := "sqlite:" + t.TempDir() + "/state.db"
			if backend == "postgres" {
				url = testdb.PostgresURL(t, "latch_root")
			}
			c := newClock()
			g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: url, Now: c.Now, Sinks: []latch.Sink{n}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })
			ctx := agent(t.Context())
			ran := 0
			refund := func(ctx context.Context, id string) error {
				_, err := g.Execute(ctx, &latch.Call{Action: "refund.issue", Arguments: json.RawMessage(`{"id":"` + id + `"}`)},
					func(context.Context, json.RawMessage) (any, error) { ran++; return "ok", nil })
				return err
			}
			ask := func(id string) string {
				t.Helper()
				var req *latch.ApprovalRequiredError
				if err := refund(ctx, id); !errors.As(err, &req) {
					t.Fatalf("refund %s = %v, want ApprovalRequiredError", id, err)
				}
				return req.ApprovalID
			}
			deniedAtExpiry := func(id string) {
				t.Helper()
				a, err := g.Store().Approval(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				if a.Status != store.Denied || a.Approver != store.ExpiryApprover || !a.DeniedAtExpiry() {
					t.Errorf("request %s = %s by %q, want denied by %s", id, a.Status, a.Approver, store.ExpiryApprover)
				}
				if n := countEvents(t, g, store.EventFilter{ApprovalID: id}, store.EventApprovalDeniedAtExpiry); n != 1 {
					t.Errorf("%d %s events of %s, want 1", n, store.EventApprovalDeniedAtExpiry, id)
				}
			}
			bySweeper, byAnswer, byCall := ask("r1"), ask("r2"), ask("r3")
			c.Add(time.Hour)

			// The call presenting its request past the expiry: refused denied, never run.
			err = refund(latch.WithApproval(ctx, byCall), "r3")
			if r := latch.RefusalOf(err); r == nil || r.Reason != latch.ReasonApprovalDenied {
				t.Errorf("refund presenting %s past its expiry = %v, want refused %s", byCall, err, latch.ReasonApprovalDenied)
			}
			deniedAtExpiry(byCall)

			// An approver answering too late: refused expired, and the request reads denied.
			_, err = g.Approve(t.Context(), byAnswer, "alice")
			var ae *store.AnswerError
			if !errors.As(err, &ae) || ae.Reason != "expired" {
				t.Errorf("Approve past the expiry = %v, want refused expired", err)
			}
			deniedAtExpiry(byAnswer)

			// The sweeper writes the third; a second pass writes nothing.
			rep, err := g.Sweep(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rep.DeniedAtExpiry, []string{bySweeper}) || !slices.Equal(rep.Expired, []string{bySweeper}) {
				t.Errorf("Sweep() = expired %v, denied %v; want %s denied", rep.Expired, rep.DeniedAtExpiry, bySweeper)
			}
			deniedAtExpiry(bySweeper)
			if rep, err := g.Sweep(t.Context()); err != nil || len(rep.Expired) != 0 {
				t.Errorf("second Sweep() = %+v, %v, want nothing", rep, err)
			}
			if ran != 0 {
				t.Errorf("the refund ran %d times, want never", ran)
			}
			verifyChain(t, g)

			// Every denial reaches --notify, once each.
			want := []string{bySweeper, byAnswer, byCall}
			slices.Sort(want)
			var got []string
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				mu.Lock()
				got = got[:0]
				for _, a := range alerts {
					if a.Alert == notify.KindApprovalDeniedAtExpiry {
						got = append(got, a.ApprovalID)
						if a.Action != "refund.issue" {
							t.Errorf("alert %+v, want it to name refund.issue", a)
						}
					}
				}
				mu.Unlock()
				slices.Sort(got)
				if len(got) >= len(want) || time.Now().After(deadline) {
					break
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("denied-at-expiry alerts for %v, want %v (sweeper %s, answer %s, call %s)", got, want, bySweeper, byAnswer, byCall)
			}
		})
	}
}

// TestOnExpiryDefault: without on_expiry a request nobody answered is written expired, by
// nobody, and refused approval_expired, as before.
func TestOnExpiryDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `
schema: latch.policy/v1
actions:
  refund.issue:
    effect: "refund:{id}"
    decision: approve
    approval_ttl: 1h
`)
	ctx := agent(t.Context())
	call := &latch.Call{Action: "refund.issue", Arguments: json.RawMessage(`{"id":"r1"}`)}
	_, err := e.g.Execute(ctx, call, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
	var req *latch.ApprovalRequiredError
	if !errors.As(err, &req) {
		t.Fatalf("Execute = %v, want ApprovalRequiredError", err)
	}
	e.clock.Add(time.Hour)
	_, err = e.g.Execute(latch.WithApproval(ctx, req.ApprovalID), call, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
	if r := latch.RefusalOf(err); r == nil || r.Reason != latch.ReasonApprovalExpired {
		t.Errorf("Execute past the expiry = %v, want refused %s", err, latch.ReasonApprovalExpired)
	}
	a, err := e.g.Store().Approval(t.Context(), req.ApprovalID)
	if err != nil || a.Status != store.Expired || a.Approver != "" {
		t.Errorf("request = %+v, %v, want expired by nobody", a, err)
	}
}
