package latchasynq_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/latchkit/latch"
	latchasynq "github.com/latchkit/latch/integrations/asynq"
	"github.com/latchkit/latch/internal/remotetest"
	"github.com/latchkit/latch/store"
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

// TestAsynqApprovalGrantedBetweenRetries: a task refused approval_required is retried by asynq
// while its request waits for a person, each retry handed the same request; the error asynq
// records names the request and the effect. A person grants it, and asynq's next retry runs the
// handler on the grant, once; the same task enqueued again is a duplicate. Before the guard
// found a granted request by itself, every retry asked anew and the grant was never spent. A
// denial archives the task, naming the denied request.
func TestAsynqApprovalGrantedBetweenRetries(t *testing.T) {
	t.Parallel()
	f := setupPolicy(t, approvalPolicy, func(*remotetest.Server) *latch.Options { return nil }, false)
	enqueue := func(invoice string) string {
		payload, _ := json.Marshal(charge{InvoiceID: invoice, Amount: 100})
		info, err := f.client.Enqueue(asynq.NewTask("charge:invoice", payload), asynq.Queue(f.queue), asynq.MaxRetry(10000), asynq.Retention(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return info.ID
	}
	// retried waits until the task was retried at least twice for its approval.
	retried := func(id string) *asynq.TaskInfo {
		deadline := time.Now().Add(30 * time.Second)
		for {
			info, err := f.inspector.GetTaskInfo(f.queue, id)
			if err != nil {
				t.Fatal(err)
			}
			if info.Retried >= 2 && strings.Contains(info.LastErr, "waits for approval") {
				return info
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s not retried for approval after 30s: %s (%s)", id, info.State, info.LastErr)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	t.Run("granted", func(t *testing.T) {
		id := enqueue("ap_1")
		info := retried(id)
		req := f.pending(t, "ap_1")
		if !strings.Contains(info.LastErr, req.ID) || !strings.Contains(info.LastErr, `"charge:ap_1"`) {
			t.Fatalf("task error = %q, want it to name approval %s and effect charge:ap_1", info.LastErr, req.ID)
		}
		if _, err := f.guard.Approve(t.Context(), req.ID, "alice"); err != nil {
			t.Fatal(err)
		}
		if info := f.settle(t, id); info.State != asynq.TaskStateCompleted {
			t.Fatalf("task after the grant = %s (%s), want completed", info.State, info.LastErr)
		}
		if n := f.remote.Acts("ap_1"); n != 1 {
			t.Fatalf("remote acted %d times for ap_1, want 1", n)
		}
		a, err := f.guard.Store().Approval(t.Context(), req.ID)
		if err != nil || a.Status != store.Consumed {
			t.Fatalf("approval %s = %+v, %v; want consumed", req.ID, a, err)
		}
		if dup := f.settle(t, enqueue("ap_1")); dup.State != asynq.TaskStateCompleted || dup.Retried != 0 {
			t.Fatalf("duplicate task = %s after %d retries (%s), want completed without running", dup.State, dup.Retried, dup.LastErr)
		}
		if n := f.remote.Acts("ap_1"); n != 1 {
			t.Fatalf("remote acted %d times for ap_1 after the duplicate, want 1", n)
		}
	})

	t.Run("denied", func(t *testing.T) {
		id := enqueue("ap_2")
		retried(id)
		req := f.pending(t, "ap_2")
		if _, err := f.guard.Deny(t.Context(), req.ID, "bob"); err != nil {
			t.Fatal(err)
		}
		info := f.settle(t, id)
		if info.State != asynq.TaskStateArchived {
			t.Fatalf("task after the denial = %s (%s), want archived", info.State, info.LastErr)
		}
		if !strings.Contains(info.LastErr, "approval_denied") || !strings.Contains(info.LastErr, req.ID) || !strings.Contains(info.LastErr, `"charge:ap_2"`) {
			t.Fatalf("task error = %q, want approval_denied naming %s and effect charge:ap_2", info.LastErr, req.ID)
		}
		if n := f.remote.Acts("ap_2"); n != 0 {
			t.Fatalf("remote acted %d times for ap_2, want 0", n)
		}
	})
}

// TestTaskErrorApproval: the TaskError of a task waiting for approval names the request and the
// effect and lets asynq retry; on the last retry, and after a denial, it is archived.
func TestTaskErrorApproval(t *testing.T) {
	t.Parallel()
	req := &latch.ApprovalRequiredError{ApprovalID: "apr_1", EffectKey: "charge:inv_9"}
	waiting := &latchasynq.TaskError{TaskID: "t1", Type: "charge:invoice", Key: "charge:inv_9", Reason: "approval_required", ApprovalID: "apr_1", Err: req, Waiting: true}
	if errors.Is(waiting, asynq.SkipRetry) {
		t.Error("a task waiting for approval skips its retries")
	}
	if msg := waiting.Error(); !strings.Contains(msg, "apr_1") || !strings.Contains(msg, `"charge:inv_9"`) {
		t.Errorf("Error() = %q, want the request and the effect", msg)
	}
	last := *waiting
	last.Waiting = false
	if !errors.Is(&last, asynq.SkipRetry) || !strings.Contains(last.Error(), "approval_required") || !strings.Contains(last.Error(), "apr_1") {
		t.Errorf("last retry: Error() = %q, SkipRetry %v; want approval_required naming apr_1, archived", last.Error(), errors.Is(&last, asynq.SkipRetry))
	}
}
