package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

const governedV1 = `schema: latch.policy/v1
approvers:
  roles:
    policy-owners: [olga, omar, oscar]
  policy_change: {roles: [policy-owners], required: 2, verified: true}
actions:
  notes.write:
    decision: allow
`

const governedV2 = `schema: latch.policy/v1
approvers:
  roles:
    policy-owners: [olga, omar, oscar]
  policy_change: {required: 1}
actions:
  notes.write:
    decision: allow
  notes.delete:
    decision: allow
`

func mustPolicy(t *testing.T, doc string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRequireApprovedPolicy: with RequireApprovedPolicy, every call is refused policy_unapproved
// (Execute writes its denied receipt, Evaluate reports it) until a proposal of the policy in
// force is granted by the policy_change approvers of the policy in force; the next call then
// runs, without reopening the guard. SetPolicy refuses an unapproved policy and swaps an
// approved one in.
func TestRequireApprovedPolicy(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			url := testdb.URL(t, backend, "latch_polapprove")
			g, err := latch.Open(ctx, &latch.Config{Policy: mustPolicy(t, governedV1), StoreURL: url, RequireApprovedPolicy: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })
			agent := latch.WithPrincipal(ctx, latch.Principal{Agent: "bot"})
			call := &latch.Call{Action: "notes.write", Arguments: json.RawMessage(`{"n":1}`)}
			ran := 0
			run := func(context.Context, json.RawMessage) (any, error) { ran++; return nil, nil }

			rc, err := g.Execute(agent, call, run)
			if r := latch.RefusalOf(err); r == nil || r.Reason != latch.ReasonPolicyUnapproved || r.Kind != latch.KindDenied {
				t.Fatalf("unapproved: err = %v, want policy_unapproved", err)
			}
			if rc == nil || rc.DecisionReason != "policy_unapproved" || ran != 0 {
				t.Fatalf("unapproved: receipt %+v, ran %d", rc, ran)
			}
			ev, err := g.Evaluate(agent, call)
			if err != nil || ev.Decision != policy.Deny || ev.Reason != "policy_unapproved" {
				t.Fatalf("Evaluate = %+v, %v", ev, err)
			}

			// The reserved action cannot be called directly.
			if _, err := g.Execute(agent, &latch.Call{Action: policy.PolicyChangeAction, Arguments: json.RawMessage(`{}`)}, run); err == nil {
				t.Fatal("the reserved action ran as an ordinary call")
			}

			proposer := latch.WithPrincipal(ctx, latch.Principal{Agent: "cli", User: "olga"})
			a, err := g.ProposePolicy(proposer, g.Policy(), "+ the first policy\n", nil)
			if err != nil {
				t.Fatal(err)
			}
			if a.ActionName != policy.PolicyChangeAction || a.Status != store.Pending {
				t.Fatalf("proposal %+v", a)
			}
			// The proposer does not approve their own proposal; an unverified answer and a
			// person outside policy-owners do not count.
			for _, bad := range []struct {
				who      string
				verified bool
				reason   string
			}{{"olga", true, "self_approval"}, {"omar", false, store.ReasonNotVerified}, {"mallory", true, store.ReasonNotEntitled}} {
				_, err := g.Answer(ctx, &store.AnswerRequest{ID: a.ID, Grant: true, Approver: bad.who, Method: store.MethodSession, Verified: bad.verified})
				var ae *store.AnswerError
				if !errors.As(err, &ae) || ae.Reason != bad.reason {
					t.Fatalf("answer by %s: %v, want %s", bad.who, err, bad.reason)
				}
			}
			if _, err := g.Answer(ctx, &store.AnswerRequest{ID: a.ID, Grant: true, Approver: "omar", Method: store.MethodSession, Verified: true}); err != nil {
				t.Fatal(err)
			}
			// One of the two required grants: still refused, and the refusal was not cached.
			if _, err := g.Execute(agent, call, run); latch.ReasonOf(err) != string(latch.ReasonPolicyUnapproved) {
				t.Fatalf("one of two grants: %v", err)
			}
			if _, err := g.Answer(ctx, &store.AnswerRequest{ID: a.ID, Grant: true, Approver: "oscar", Method: store.MethodToken, Verified: true}); err != nil {
				t.Fatal(err)
			}
			// Approved: the next call runs, on the same guard.
			if _, err := g.Execute(agent, call, run); err != nil || ran != 1 {
				t.Fatalf("approved policy: err %v, ran %d", err, ran)
			}
			eff, err := g.Store().Effect(ctx, latch.PolicyEffectKey(g.Policy().Hash))
			if err != nil || eff.State != store.Committed {
				t.Fatalf("policy effect: %+v, %v", eff, err)
			}

			// A new policy: refused until approved, by the approvers of the policy in force —
			// v2's own policy_change rule (anyone) does not let mallory approve it.
			v2 := mustPolicy(t, governedV2)
			if err := g.SetPolicy(ctx, v2); latch.ReasonOf(err) != string(latch.ReasonPolicyUnapproved) {
				t.Fatalf("SetPolicy unapproved: %v", err)
			}
			if g.Policy().Hash == v2.Hash {
				t.Fatal("an unapproved policy was put in force")
			}
			a2, err := g.ProposePolicy(proposer, v2, "+  notes.delete:\n", json.RawMessage(`{"changed":0}`))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := g.Answer(ctx, &store.AnswerRequest{ID: a2.ID, Grant: true, Approver: "mallory", Method: store.MethodSession, Verified: true}); err == nil {
				t.Fatal("the proposal chose its own approvers")
			}
			for _, who := range []string{"omar", "oscar"} {
				if _, err := g.Answer(ctx, &store.AnswerRequest{ID: a2.ID, Grant: true, Approver: who, Method: store.MethodSession, Verified: true}); err != nil {
					t.Fatal(err)
				}
			}
			if err := g.SetPolicy(ctx, v2); err != nil {
				t.Fatal(err)
			}
			if _, err := g.Execute(agent, &latch.Call{Action: "notes.delete"}, run); err != nil || ran != 2 {
				t.Fatalf("under v2: %v, ran %d", err, ran)
			}
			// An approved policy is not proposed again.
			if _, err := g.ProposePolicy(proposer, v2, "", nil); latch.ReasonOf(err) != string(latch.ReasonCommitted) {
				t.Fatalf("proposing an approved policy: %v", err)
			}
		})
	}
}
