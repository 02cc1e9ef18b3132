package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/store"
)

func approvalCount(t *testing.T, g *latch.Guard) int {
	t.Helper()
	as, err := g.Store().Approvals(t.Context(), store.ApprovalFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return len(as)
}

// TestApprovalAskedOnlyWhenCallCanRun: a call that needs approval, whose effect key is
// committed, executing under a live lease or ambiguous, gets the refusal its reservation would
// give — the same error, a blocked receipt — and no approval request is stored: nobody is asked
// to approve what cannot run or already ran.
func TestApprovalAskedOnlyWhenCallCanRun(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, nestedPolicy)
			ctx := agent(t.Context())
			call := func(id string) *latch.Call {
				return &latch.Call{Action: "payout.send", Arguments: json.RawMessage(`{"id":"` + id + `"}`)}
			}
			never := func(context.Context, json.RawMessage) (any, error) {
				t.Error("an executor ran for a call that should have been refused")
				return nil, nil
			}
			// refused checks a call refused as its reservation refuses it, and that no request
			// was stored for it.
			refused := func(what string, rc *latch.Receipt, err error, reason string, is error) {
				t.Helper()
				var ee *latch.EffectError
				if !errors.As(err, &ee) || ee.Reason != reason || !errors.Is(err, is) {
					t.Fatalf("%s: err = %v, want an EffectError %s matching %v", what, err, reason, is)
				}
				if rc == nil || rc.Result != "blocked" || rc.Error != err.Error() || rc.Decision != "approve" {
					t.Fatalf("%s: receipt = %+v, want a blocked receipt of an approve decision whose error is the call's", what, rc)
				}
				sameAsStored(t, rc)
			}

			// Committed.
			id := approved(t, e, ctx, call("po_1"))
			if _, err := e.g.Execute(latch.WithApproval(ctx, id), call("po_1"), func(context.Context, json.RawMessage) (any, error) {
				return "paid", nil
			}); err != nil {
				t.Fatal(err)
			}
			n := approvalCount(t, e.g)
			rc, err := e.g.Execute(ctx, call("po_1"), never)
			refused("committed key", rc, err, "committed", latch.ErrAlreadyCommitted)
			if got, ok := latch.ResultOf[string](err); !ok || got != "paid" {
				t.Errorf("ResultOf = %q, %t; want the stored result", got, ok)
			}
			if got := approvalCount(t, e.g); got != n {
				t.Errorf("approval requests: %d after the committed key's refusal, want %d (none stored for it)", got, n)
			}

			// Executing under a live lease: the same call asked from inside its own executor.
			id = approved(t, e, ctx, call("po_2"))
			var inner error
			var innerRc *latch.Receipt
			if _, err := e.g.Execute(latch.WithApproval(ctx, id), call("po_2"), func(ctx context.Context, _ json.RawMessage) (any, error) {
				innerRc, inner = e.g.Execute(ctx, call("po_2"), never)
				return "paid", nil
			}); err != nil {
				t.Fatal(err)
			}
			refused("executing key", innerRc, inner, "in_progress", latch.ErrInProgress)

			// Ambiguous.
			id = approved(t, e, ctx, call("po_3"))
			if _, err := e.g.Execute(latch.WithApproval(ctx, id), call("po_3"), func(context.Context, json.RawMessage) (any, error) {
				return nil, errors.New("connection reset")
			}); !errors.Is(err, latch.ErrAmbiguous) {
				t.Fatalf("ambiguous run: %v", err)
			}
			n = approvalCount(t, e.g)
			rc, err = e.g.Execute(ctx, call("po_3"), never)
			refused("ambiguous key", rc, err, "ambiguous", latch.ErrAmbiguousEffect)
			if got := approvalCount(t, e.g); got != n {
				t.Errorf("approval requests: %d after the refusals, want %d (none stored for them)", got, n)
			}
			pending, err := e.g.Store().Approvals(t.Context(), store.ApprovalFilter{Status: store.Pending})
			if err != nil || len(pending) != 0 {
				t.Errorf("pending requests = %d (%v), want none", len(pending), err)
			}

			// A key that can still run is put to a human as before.
			_, err = e.g.Execute(ctx, call("po_4"), never)
			var req *latch.ApprovalRequiredError
			if !errors.As(err, &req) {
				t.Fatalf("fresh key: %v, want ApprovalRequiredError", err)
			}
			if rep := verifyChain(t, e.g); !rep.OK {
				t.Errorf("chain: %+v", rep)
			}
		})
	}
}

// TestApprovalAskedAgain: asking again for the same action while its request is pending hands
// back that request (same id, same expiry), concurrent askers share one request, and a request
// asked after a denial records it.
func TestApprovalAskedAgain(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, nestedPolicy)
			ctx := agent(t.Context())
			call := &latch.Call{Action: "payout.send", Arguments: json.RawMessage(`{"id":"po_1"}`)}
			never := func(context.Context, json.RawMessage) (any, error) {
				t.Error("an executor ran before its approval")
				return nil, nil
			}
			ask := func() *latch.ApprovalRequiredError {
				t.Helper()
				_, err := e.g.Execute(ctx, call, never)
				var req *latch.ApprovalRequiredError
				if !errors.As(err, &req) {
					t.Fatalf("Execute = %v, want ApprovalRequiredError", err)
				}
				return req
			}

			// Concurrent askers (a webhook redelivered at once) share one request.
			const askers = 8
			reqs := make(chan *latch.ApprovalRequiredError, askers)
			errs := make(chan error, askers)
			for range askers {
				go func() {
					_, err := e.g.Execute(ctx, call, never)
					var req *latch.ApprovalRequiredError
					if errors.As(err, &req) {
						reqs <- req
						return
					}
					errs <- err
				}()
			}
			var first *latch.ApprovalRequiredError
			for range askers {
				select {
				case err := <-errs:
					t.Fatalf("concurrent ask: %v", err)
				case req := <-reqs:
					if first == nil {
						first = req
					}
					if req.ApprovalID != first.ApprovalID || !req.ExpiresAt.Equal(first.ExpiresAt) {
						t.Errorf("concurrent asks got %s (expires %s) and %s (expires %s), want one request",
							first.ApprovalID, first.ExpiresAt, req.ApprovalID, req.ExpiresAt)
					}
				}
			}
			// Asked again later: the same request, with its own expiry.
			e.clock.Add(5 * time.Minute)
			if again := ask(); again.ApprovalID != first.ApprovalID || !again.ExpiresAt.Equal(first.ExpiresAt) {
				t.Errorf("asked again: %s expiring %s, want %s expiring %s", again.ApprovalID, again.ExpiresAt, first.ApprovalID, first.ExpiresAt)
			}
			if n := approvalCount(t, e.g); n != 1 {
				t.Errorf("%d requests stored, want 1", n)
			}
			if n := countEvents(t, e.g, store.EventFilter{ApprovalID: first.ApprovalID}, store.EventApprovalReused); n != askers {
				t.Errorf("approval_reused events: %d, want %d", n, askers)
			}

			// Denied, then asked again: a new request that records the denial.
			if _, err := e.g.Deny(t.Context(), first.ApprovalID, "bob"); err != nil {
				t.Fatal(err)
			}
			second := ask()
			if second.ApprovalID == first.ApprovalID {
				t.Fatalf("asked after a denial: the denied request %s came back", first.ApprovalID)
			}
			a, err := e.g.Store().Approval(t.Context(), second.ApprovalID)
			if err != nil {
				t.Fatal(err)
			}
			if a.Status != store.Pending || a.PreviousDenied != first.ApprovalID || a.PreviousDeniedBy != "bob" {
				t.Errorf("request after the denial: %s, previous %q by %q; want pending, previous %s by bob",
					a.Status, a.PreviousDenied, a.PreviousDeniedBy, first.ApprovalID)
			}
			// Once it expires, asking again stores a new request.
			e.clock.Add(time.Hour)
			if third := ask(); third.ApprovalID == second.ApprovalID {
				t.Errorf("asked after expiry: the expired request %s came back", second.ApprovalID)
			}
		})
	}
}
