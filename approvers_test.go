package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

const approversDoc = `
schema: latch.policy/v1
approvers:
  roles:
    payments-leads: [alice, bob, carol, Ana]
    auditors: []
actions:
  billing.refund:
    effect: "refund:{id}"
    decision: approve
    approvers: { roles: [payments-leads], required: 2 }
  billing.payout:
    effect: "payout:{id}"
    decision: approve
    approvers: { roles: [payments-leads], verified: true }
  billing.audit:
    effect: "audit:{id}"
    decision: approve
    approvers: { roles: [auditors] }
  billing.note:
    effect: "note:{id}"
    decision: approve
`

// accountRoles is a real store with the roles the console's approver accounts would give
// (store.RoleLookup), so that the guard's entitlement check is exercised through its lookup.
type accountRoles struct {
	store.Store
	roles map[string][]string
}

func (a *accountRoles) ApproverRoles(_ context.Context, name string) ([]string, error) {
	for n, r := range a.roles {
		if store.SameName(n, name) {
			return r, nil
		}
	}
	return nil, nil
}

// approversEnv opens a guard on backend with approversDoc; the store also answers roles.
func approversEnv(t *testing.T, backend string) *latch.Guard {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(approversDoc))
	if err != nil {
		t.Fatal(err)
	}
	st, err := latch.OpenStore(t.Context(), testdb.URL(t, backend, "latch_approvers"), nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p,
		Store: &accountRoles{Store: st, roles: map[string][]string{"dave": {"auditors"}, "erin": {"undefined-role", "payments-leads-x"}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// ask makes a call that needs approval, as the agent ana-bot acting for the user ana, and
// returns the request's id.
func ask(t *testing.T, g *latch.Guard, action, id string) string {
	t.Helper()
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "ana-bot", User: "ana"})
	_, err := g.Execute(ctx, &latch.Call{Action: action, Arguments: json.RawMessage(fmt.Sprintf(`{"id":%q}`, id))},
		func(context.Context, json.RawMessage) (any, error) { return "done", nil })
	var req *latch.ApprovalRequiredError
	if !errors.As(err, &req) {
		t.Fatalf("Execute(%s) = %v, want ApprovalRequiredError", action, err)
	}
	return req.ApprovalID
}

// present runs the approved call again with its approval.
func present(t *testing.T, g *latch.Guard, action, id, approval string) (int, error) {
	t.Helper()
	ctx := latch.WithApproval(latch.WithPrincipal(t.Context(), latch.Principal{Agent: "ana-bot", User: "ana"}), approval)
	ran := 0
	_, err := g.Execute(ctx, &latch.Call{Action: action, Arguments: json.RawMessage(fmt.Sprintf(`{"id":%q}`, id))},
		func(context.Context, json.RawMessage) (any, error) { ran++; return "done", nil })
	return ran, err
}

func wantReason(t *testing.T, what string, err error, reason string) {
	t.Helper()
	var ae *store.AnswerError
	if !errors.As(err, &ae) || ae.Reason != reason || !errors.Is(err, store.ErrAnswerRefused) {
		t.Errorf("%s = %v, want refused %s", what, err, reason)
	}
}

func TestApprovers(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			t.Run("TwoOfN", func(t *testing.T) {
				t.Parallel()
				g := approversEnv(t, backend)
				id := ask(t, g, "billing.refund", "r1")
				a, err := g.Answer(t.Context(), &store.AnswerRequest{ID: id, Grant: true, Approver: "alice", Method: store.MethodSession, Verified: true})
				if err != nil {
					t.Fatalf("alice: %v", err)
				}
				if a.Status != store.Pending || store.Progress(a, 0) != "1 of 2" {
					t.Fatalf("after alice: %s, %s; want pending, 1 of 2", a.Status, store.Progress(a, 0))
				}
				if ran, err := present(t, g, "billing.refund", "r1", id); ran != 0 || !errors.Is(err, latch.ErrApprovalMismatch) {
					t.Errorf("presenting 1 of 2 = ran %d, %v; want refused, not run", ran, err)
				}
				// alice again, under another spelling and method: counts once.
				_, err = g.Answer(t.Context(), &store.AnswerRequest{ID: id, Grant: true, Approver: "ALICE", Method: store.MethodToken, Verified: true})
				wantReason(t, "alice again", err, store.ReasonAlreadyAnswered)
				a, err = g.Approve(t.Context(), id, "Bob")
				if err != nil || a.Status != store.Granted || len(a.Answers) != 2 {
					t.Fatalf("Bob = %+v, %v; want granted with 2 answers", a, err)
				}
				if a.Answers[1].Method != store.MethodCLI || a.Answers[1].Verified || a.Answers[1].String() != "cli:Bob" {
					t.Errorf("Bob's answer = %+v (%s), want cli:Bob unverified", a.Answers[1], a.Answers[1])
				}
				if ran, err := present(t, g, "billing.refund", "r1", id); ran != 1 || err != nil {
					t.Errorf("presenting 2 of 2 = ran %d, %v; want it run once", ran, err)
				}
			})
			t.Run("NotEntitled", func(t *testing.T) {
				t.Parallel()
				g := approversEnv(t, backend)
				id := ask(t, g, "billing.refund", "r2")
				before, err := g.Store().Approval(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				evs, _ := g.Store().Events(t.Context(), store.EventFilter{ApprovalID: id})
				for _, who := range []string{"mallory", "аlice" /* Cyrillic а */, "dave" /* an account, other role */, "erin" /* roles the policy lacks */} {
					for _, grant := range []bool{true, false} {
						_, err := g.Answer(t.Context(), &store.AnswerRequest{ID: id, Grant: grant, Approver: who, Method: store.MethodSession, Verified: true})
						wantReason(t, "answer by "+who, err, store.ReasonNotEntitled)
					}
				}
				after, err := g.Store().Approval(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				evs2, _ := g.Store().Events(t.Context(), store.EventFilter{ApprovalID: id})
				if after.Status != store.Pending || len(after.Answers) != 0 || len(evs2) != len(evs) || !before.ExpiresAt.Equal(after.ExpiresAt) {
					t.Errorf("after unentitled answers: %s, %d answers, %d events (was %d); want nothing written", after.Status, len(after.Answers), len(evs2), len(evs))
				}
			})
			t.Run("AccountRole", func(t *testing.T) {
				t.Parallel()
				g := approversEnv(t, backend)
				id := ask(t, g, "billing.audit", "a1")
				_, err := g.Approve(t.Context(), id, "alice") // listed, but in another role
				wantReason(t, "alice on an auditors action", err, store.ReasonNotEntitled)
				a, err := g.Answer(t.Context(), &store.AnswerRequest{ID: id, Grant: true, Approver: "Dave", Method: store.MethodSession, Verified: true})
				if err != nil || a.Status != store.Granted {
					t.Errorf("dave (an auditors account) = %v, %v; want granted", a, err)
				}
			})
			t.Run("RequesterCannotApprove", func(t *testing.T) {
				t.Parallel()
				g := approversEnv(t, backend)
				id := ask(t, g, "billing.refund", "r3")
				// ana is in payments-leads, and asked: she may never count, however spelt.
				for _, who := range []string{"ana", "ANA", " Ana ", "ａｎａ", "Ana-Bot", "ana-bot"} {
					_, err := g.Answer(t.Context(), &store.AnswerRequest{ID: id, Grant: true, Approver: who, Method: store.MethodSession, Verified: true})
					reason := store.ReasonSelfApproval
					if store.SameName(who, "ana-bot") {
						reason = store.ReasonNotEntitled // the agent is in no role: refused before it could count
					}
					wantReason(t, "answer by "+who, err, reason)
				}
				a, err := g.Store().Approval(t.Context(), id)
				if err != nil || len(a.Answers) != 0 {
					t.Errorf("answers after the requester's attempts = %v, %v; want none", a, err)
				}
			})
			t.Run("VerifiedRequired", func(t *testing.T) {
				t.Parallel()
				g := approversEnv(t, backend)
				id := ask(t, g, "billing.payout", "p1")
				_, err := g.Approve(t.Context(), id, "alice")
				wantReason(t, "a CLI answer to a verified action", err, store.ReasonNotVerified)
				a, err := g.Answer(t.Context(), &store.AnswerRequest{ID: id, Grant: true, Approver: "alice", Method: store.MethodJWT, Verified: true})
				if err != nil || a.Status != store.Granted {
					t.Errorf("a verified answer = %v, %v; want granted", a, err)
				}
			})
			t.Run("DecidedRefusesAndWritesNothing", func(t *testing.T) {
				t.Parallel()
				g := approversEnv(t, backend)
				id := ask(t, g, "billing.refund", "r4")
				if _, err := g.Deny(t.Context(), id, "carol"); err != nil {
					t.Fatal(err)
				}
				before, _ := g.Store().Approval(t.Context(), id)
				_, err := g.Approve(t.Context(), id, "alice")
				wantReason(t, "a grant after a deny", err, "already_denied")
				after, _ := g.Store().Approval(t.Context(), id)
				if len(after.Answers) != len(before.Answers) || after.Status != store.Denied {
					t.Errorf("after answering a denied request: %s, %d answers; want denied, %d", after.Status, len(after.Answers), len(before.Answers))
				}
			})
			t.Run("NoApproversAnyoneButTheRequester", func(t *testing.T) {
				t.Parallel()
				g := approversEnv(t, backend)
				id := ask(t, g, "billing.note", "n1")
				_, err := g.Approve(t.Context(), id, "ANA")
				wantReason(t, "the requester", err, store.ReasonSelfApproval)
				if a, err := g.Approve(t.Context(), id, "zed"); err != nil || a.Status != store.Granted {
					t.Errorf("anyone = %v, %v; want granted", a, err)
				}
			})
		})
	}
}

// TestApprovalReadsOneSnapshot: a request and its answers are read in one snapshot. While
// requests needing two grants are answered, every read — one request, or the list — shows the
// status its answers imply: pending with fewer than two grants, granted with two, never one
// without the other (a read of the row, then of the answers after a grant committed, would).
func TestApprovalReadsOneSnapshot(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			g := approversEnv(t, backend)
			var ids []string
			for i := range 25 {
				ids = append(ids, ask(t, g, "billing.refund", fmt.Sprintf("snap_%d", i)))
			}
			done := make(chan error, 1)
			go func() {
				for _, id := range ids {
					for _, who := range []string{"alice", "bob"} {
						if _, err := g.Approve(context.Background(), id, who); err != nil {
							done <- err
							return
						}
					}
				}
				done <- nil
			}()
			check := func(a *store.Approval) {
				grants := 0
				for _, an := range a.Answers {
					if an.Grant {
						grants++
					}
				}
				if (a.Status == store.Granted) != (grants >= 2) || a.Status != store.Granted && a.Status != store.Pending {
					t.Errorf("request %s read %s with %d grants", a.ID, a.Status, grants)
				}
			}
			reads := 0
			for finished := false; !finished; {
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
					finished = true
				default:
				}
				for _, id := range ids[:5] {
					a, err := g.Store().Approval(t.Context(), id)
					if err != nil {
						t.Fatal(err)
					}
					check(a)
				}
				list, err := g.Store().Approvals(t.Context(), store.ApprovalFilter{})
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range list {
					check(a)
				}
				reads++
			}
			if reads < 2 {
				t.Errorf("only %d rounds of reads while answering", reads)
			}
		})
	}
}
