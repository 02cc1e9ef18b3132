package latchgenkit_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/firebase/genkit/go/ai"
	"github.com/latchkit/latch"
	"github.com/latchkit/latch/interrupt"
	"github.com/latchkit/latch/store"
)

// answering is an Interrupter standing for a program's own pause in which a person answers: it
// grants (or denies) the request it is handed, then resumes with where the wait stands.
type answering struct {
	g     *latch.Guard
	deny  bool
	calls atomic.Int32
}

func (a *answering) Interrupt(ctx context.Context, r *latch.Refusal) (interrupt.Answer, error) {
	a.calls.Add(1)
	answer := a.g.Approve
	if a.deny {
		answer = a.g.Deny
	}
	if _, err := answer(ctx, r.ApprovalID, "alice"); err != nil {
		return interrupt.Answer{}, err
	}
	return interrupt.Check(ctx, a.g, r)
}

// With Config.Interrupter, a refund the policy sends to a person waits on it inside the tool,
// not in Genkit's interrupt: granted, the generation finishes without interrupting, the refund
// ran once and the model read its output; denied, the model read approval_denied and nothing
// ran.
func TestApprovalThroughInterrupter(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			for _, deny := range []bool{false, true} {
				var itr *answering
				f := setupWith(t, backend, func(g *latch.Guard) interrupt.Interrupter[context.Context] {
					itr = &answering{g: g, deny: deny}
					return itr
				})
				in := RefundInput{RefundID: "rf_big", Amount: 9000}
				resp, err := f.generate(t, in)
				if err != nil {
					t.Fatalf("deny=%t: generate: %v", deny, err)
				}
				if resp.FinishReason == ai.FinishReasonInterrupted || len(resp.Interrupts()) != 0 {
					t.Errorf("deny=%t: the generation interrupted (%q), want the wait inside the tool", deny, resp.FinishReason)
				}
				r := f.readResult(t)
				if n := itr.calls.Load(); n != 1 {
					t.Errorf("deny=%t: interrupted %d times, want 1", deny, n)
				}
				if !deny {
					if r.Refusal != nil || r.Output == nil || r.Output.ID != "re_rf_big" || r.Output.Amount != 9000 {
						t.Errorf("granted refund: the model read %+v, want the refund's output", r)
					}
					if n := f.payments.count("rf_big"); n != 1 {
						t.Errorf("granted refund ran %d times, want 1", n)
					}
					if as, err := f.guard.Store().Approvals(t.Context(), store.ApprovalFilter{Status: store.Consumed}); err != nil || len(as) != 1 {
						t.Errorf("consumed requests = %d (%v), want 1: the grant spent", len(as), err)
					}
					continue
				}
				if r.Output != nil || r.Refusal == nil || r.Refusal.Reason != string(latch.ReasonApprovalDenied) || r.Refusal.ApprovalID == "" {
					t.Errorf("denied refund: the model read %+v, want approval_denied naming the request", r)
				}
				if n := f.payments.count("rf_big"); n != 0 {
					t.Errorf("denied refund ran %d times, want 0", n)
				}
			}
		})
	}
}
