package latchriver_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch"
	latchriver "github.com/latchkit/latch/integrations/river"
	"github.com/latchkit/latch/internal/remotetest"
	"github.com/latchkit/latch/store"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

const approvalPolicy = `
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    decision: approve
`

// pending waits for the one pending approval request of the charge of invoice and returns it.
// (An attempt that was deciding while a person granted the previous request of another
// invoice may have stored a request of its own meanwhile: only this invoice's are counted.)
func (f *fixture) pending(t *testing.T, invoice string) *store.Approval {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		all, err := f.guard.Store().Approvals(t.Context(), store.ApprovalFilter{Status: store.Pending})
		if err != nil {
			t.Fatal(err)
		}
		var as []*store.Approval
		for _, a := range all {
			if strings.Contains(string(a.Action), `"invoice_id":"`+invoice+`"`) {
				as = append(as, a)
			}
		}
		if len(as) == 1 {
			return as[0]
		}
		if len(as) > 1 || time.Now().After(deadline) {
			t.Fatalf("pending approval requests for %s = %d, want 1", invoice, len(as))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRiverApprovalGrantedBetweenAttempts: a job refused approval_required is retried by River
// while its request waits for a person, each retry handed the same request; the error River
// records names the request and the effect. A person grants it, and River's next attempt runs
// the job on the grant, once; a further retry of the job is a duplicate. Before the guard found a
// granted request by itself, every retry asked anew and the grant was never spent. A denial
// cancels the job, naming the denied request.
func TestRiverApprovalGrantedBetweenAttempts(t *testing.T) {
	t.Parallel()
	f := setupPolicy(t, approvalPolicy, func(*remotetest.Server) *latchriver.Config {
		return &latchriver.Config{Principal: latch.Principal{Agent: "billing-worker"}}
	})
	insert := func(invoice string) int64 {
		res, err := f.client.Insert(t.Context(), ChargeArgs{InvoiceID: invoice, Amount: 100}, &river.InsertOpts{MaxAttempts: 10000})
		if err != nil {
			t.Fatal(err)
		}
		return res.Job.ID
	}
	waiting := func(row *rivertype.JobRow) bool {
		return row.Attempt >= 2 && strings.Contains(lastError(row), "waits for approval")
	}

	t.Run("granted", func(t *testing.T) {
		id := insert("ap_1")
		f.until(t, id, "retried while waiting for approval", waiting)
		req := f.pending(t, "ap_1")
		row, err := f.client.JobGet(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if msg := lastError(row); !strings.Contains(msg, req.ID) || !strings.Contains(msg, `"charge:ap_1"`) {
			t.Fatalf("job error = %q, want it to name approval %s and effect charge:ap_1", msg, req.ID)
		}
		if _, err := f.guard.Approve(t.Context(), req.ID, "alice"); err != nil {
			t.Fatal(err)
		}
		row = f.settle(t, id)
		if row.State != rivertype.JobStateCompleted {
			t.Fatalf("job after the grant = %s (%s), want completed", row.State, lastError(row))
		}
		if n := f.remote.Acts("ap_1"); n != 1 {
			t.Fatalf("remote acted %d times for ap_1, want 1", n)
		}
		a, err := f.guard.Store().Approval(t.Context(), req.ID)
		if err != nil || a.Status != store.Consumed {
			t.Fatalf("approval %s = %+v, %v; want consumed", req.ID, a, err)
		}
		// A further retry of the job, and the same charge enqueued again, are duplicates.
		f.retry(t, id)
		if again := f.settle(t, id); again.State != rivertype.JobStateCompleted {
			t.Fatalf("retried job = %s (%s), want completed without running", again.State, lastError(again))
		}
		if dup := f.settle(t, insert("ap_1")); dup.State != rivertype.JobStateCompleted {
			t.Fatalf("duplicate job = %s (%s), want completed without running", dup.State, lastError(dup))
		}
		if n := f.remote.Acts("ap_1"); n != 1 {
			t.Fatalf("remote acted %d times for ap_1 after the duplicates, want 1", n)
		}
	})

	t.Run("denied", func(t *testing.T) {
		id := insert("ap_2")
		f.until(t, id, "retried while waiting for approval", waiting)
		req := f.pending(t, "ap_2")
		if _, err := f.guard.Deny(t.Context(), req.ID, "bob"); err != nil {
			t.Fatal(err)
		}
		row := f.settle(t, id)
		if row.State != rivertype.JobStateCancelled {
			t.Fatalf("job after the denial = %s (%s), want cancelled", row.State, lastError(row))
		}
		if msg := lastError(row); !strings.Contains(msg, "approval_denied") || !strings.Contains(msg, req.ID) || !strings.Contains(msg, `"charge:ap_2"`) {
			t.Fatalf("job error = %q, want approval_denied naming %s and effect charge:ap_2", msg, req.ID)
		}
		if n := f.remote.Acts("ap_2"); n != 0 {
			t.Fatalf("remote acted %d times for ap_2, want 0", n)
		}
	})
}

// TestJobErrorApproval: the JobError of a job waiting for approval names the request and the
// effect; a denial's names the denied request and the one asked again.
func TestJobErrorApproval(t *testing.T) {
	t.Parallel()
	req := &latch.ApprovalRequiredError{ApprovalID: "apr_1", EffectKey: "charge:inv_9"}
	waiting := &latchriver.JobError{JobID: 7, Kind: "charge_invoice", Key: "charge:inv_9", Reason: "approval_required", ApprovalID: "apr_1", Waiting: true, Err: req}
	if msg := waiting.Error(); !strings.Contains(msg, "waits for approval apr_1") || !strings.Contains(msg, `"charge:inv_9"`) {
		t.Errorf("waiting: Error() = %q, want the request and the effect", msg)
	}
	if !errors.Is(waiting, latch.ErrApprovalRequired) {
		t.Error("a waiting JobError does not match latch.ErrApprovalRequired")
	}
	denied := &latchriver.JobError{JobID: 7, Kind: "charge_invoice", Key: "charge:inv_9", Reason: "approval_denied", ApprovalID: "apr_1", Pending: "apr_2", Err: req}
	if msg := denied.Error(); !strings.Contains(msg, "approval_denied") || !strings.Contains(msg, "apr_1") || !strings.Contains(msg, "latch approve apr_2") {
		t.Errorf("denied: Error() = %q, want the denied request and the pending one to grant", msg)
	}
}
