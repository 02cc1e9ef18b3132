package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/store"
)

// TestGrantedApprovalUsedByNextAttempt: a queue's retry or a workflow's next attempt cannot
// present the approval id of the request its previous attempt raised. Before, such an attempt
// was asked again (a new pending request) and the grant was never spent: a human approved, the
// next attempt asked again, and so on. Now the next attempt of the exact action finds the
// granted, unspent request by its action hash and spends it once; other arguments, another
// principal or an expired grant find nothing.
func TestGrantedApprovalUsedByNextAttempt(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, nestedPolicy)
			ctx := agent(t.Context())
			call := func(id string, amount int) *latch.Call {
				return &latch.Call{Action: "payout.send", Arguments: json.RawMessage(`{"id":"` + id + `","amount":` + strconv.Itoa(amount) + `}`)}
			}
			ran := 0
			run := func(context.Context, json.RawMessage) (any, error) { ran++; return map[string]int{"n": ran}, nil }

			// The first attempt raises a request; its error names the request and the effect.
			_, err := e.g.Execute(ctx, call("p1", 100), run)
			var req *latch.ApprovalRequiredError
			if !errors.As(err, &req) {
				t.Fatalf("first attempt = %v, want ApprovalRequiredError", err)
			}
			if req.EffectKey != "payout:p1" || req.ApprovalID == "" {
				t.Fatalf("ApprovalRequiredError = %+v, want its approval id and effect key payout:p1", req)
			}
			if r := latch.RefusalOf(err); r.EffectKey != "payout:p1" || r.ApprovalID != req.ApprovalID {
				t.Fatalf("RefusalOf(first attempt) = %+v, want effect key and approval id", r)
			}
			if _, err := e.g.Approve(t.Context(), req.ApprovalID, "alice"); err != nil {
				t.Fatal(err)
			}

			// Another principal's attempt of the same arguments finds nothing of it.
			other := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "other-worker"})
			if _, err := e.g.Execute(other, call("p1", 100), run); !errors.As(err, new(*latch.ApprovalRequiredError)) {
				t.Fatalf("another principal's attempt = %v, want ApprovalRequiredError", err)
			}
			// Other arguments find nothing either.
			if _, err := e.g.Execute(ctx, call("p1", 999), run); !errors.As(err, new(*latch.ApprovalRequiredError)) {
				t.Fatalf("attempt with another amount = %v, want ApprovalRequiredError", err)
			}
			// The next attempt of the exact action, with no approval id, runs on the grant.
			rc, err := e.g.Execute(ctx, call("p1", 100), run)
			if err != nil || ran != 1 {
				t.Fatalf("next attempt = %v (ran %d times), want it to run once on the grant", err, ran)
			}
			if rc.ApprovalID != req.ApprovalID {
				t.Fatalf("receipt approval = %q, want the granted request %s", rc.ApprovalID, req.ApprovalID)
			}
			a, err := e.g.Store().Approval(t.Context(), req.ApprovalID)
			if err != nil || a.Status != store.Consumed {
				t.Fatalf("approval after the run = %+v, %v; want consumed", a, err)
			}
			// And the one after that is a duplicate, never a second run.
			if _, err := e.g.Execute(ctx, call("p1", 100), run); err == nil || ran != 1 {
				t.Fatalf("third attempt = %v (ran %d times), want a duplicate refusal", err, ran)
			}

			// A grant that expired is not used: the attempt asks again.
			_, err = e.g.Execute(ctx, call("p2", 100), run)
			if !errors.As(err, &req) {
				t.Fatalf("p2 first attempt = %v", err)
			}
			if _, err := e.g.Approve(t.Context(), req.ApprovalID, "alice"); err != nil {
				t.Fatal(err)
			}
			e.clock.Add(25 * time.Hour)
			var again *latch.ApprovalRequiredError
			if _, err := e.g.Execute(ctx, call("p2", 100), run); !errors.As(err, &again) || again.ApprovalID == req.ApprovalID {
				t.Fatalf("attempt after the grant expired = %v, want a new request", err)
			}
			if ran != 1 {
				t.Fatalf("ran %d times, want 1", ran)
			}
		})
	}
}

// TestGrantedApprovalOnAnotherStateNotTaken: a grant bound to a state of the target is taken by
// the next attempt only while the target is still in that state. Otherwise the attempt asks a
// person again, about the state now, instead of being refused precondition_changed on the stale
// grant until it expires.
func TestGrantedApprovalOnAnotherStateNotTaken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nestedPolicy)
	ctx := agent(t.Context())
	var status atomic.Value
	status.Store("open")
	read := func(context.Context, latch.PreconditionRequest) (any, error) {
		return map[string]any{"status": status.Load()}, nil
	}
	call := &latch.Call{Action: "payout.send", Arguments: json.RawMessage(`{"id":"s1","amount":5}`),
		Options: &latch.Options{Precondition: read}}
	ran := 0
	run := func(context.Context, json.RawMessage) (any, error) { ran++; return nil, nil }
	_, err := e.g.Execute(ctx, call, run)
	var first *latch.ApprovalRequiredError
	if !errors.As(err, &first) {
		t.Fatalf("first attempt = %v", err)
	}
	if _, err := e.g.Approve(t.Context(), first.ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	status.Store("closed")
	_, err = e.g.Execute(ctx, call, run)
	var second *latch.ApprovalRequiredError
	if !errors.As(err, &second) || second.ApprovalID == first.ApprovalID {
		t.Fatalf("attempt after the state changed = %v, want a new request about the state now", err)
	}
	if _, err := e.g.Approve(t.Context(), second.ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	rc, err := e.g.Execute(ctx, call, run)
	if err != nil || ran != 1 || rc.ApprovalID != second.ApprovalID {
		t.Fatalf("attempt on the second grant = %v, ran %d; want it to run once on %s", err, ran, second.ApprovalID)
	}
}
