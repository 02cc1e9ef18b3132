package latchtemporal_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/latchkit/latch"
	latchtemporal "github.com/latchkit/latch/integrations/temporal"
	"github.com/latchkit/latch/store"
)

// taskPolicy lets billing-worker charge only inside a refund workflow.
const taskPolicy = testPolicy + `authority:
  grants:
    - id: refund-workflows
      subject: { agent: billing-worker }
      actions: [billing.charge]
      tasks: ["temporal:workflow:refund-*"]
`

// TestTemporalTask: with TaskFromWorkflow, an activity's call carries
// "temporal:workflow:<workflow id>", which a task-bound grant admits when the pattern matches
// the workflow, and the receipt records it; another workflow, or no TaskFromWorkflow, is refused
// no_authority on tasks, non-retryable, without running the activity.
func TestTemporalTask(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		fromWorkflow bool
		workflowID   string
		allowed      bool
	}{
		{"its workflow", true, "refund-42", true},
		{"another workflow", true, "payout-42", false},
		{"no task", false, "refund-43", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setupPolicy(t, taskPolicy)
			f.fromWorkflow, f.workflowID = tt.fromWorkflow, tt.workflowID
			out, err := f.runWorkflow(t, ChargeInput{InvoiceID: "inv_t", Amount: 100})
			task, found := receiptTask(t, f.guard, "charge:inv_t")
			if tt.allowed {
				if err != nil || out != "done:inv_t" || f.acts.remote.Acts("inv_t") != 1 {
					t.Fatalf("workflow = %q, %v, remote acts %d; want done:inv_t, 1", out, err, f.acts.remote.Acts("inv_t"))
				}
				if want := latchtemporal.WorkflowTask(tt.workflowID); !found || task != want || want != "temporal:workflow:"+tt.workflowID {
					t.Errorf("receipt task = %q (found %v), want %q", task, found, want)
				}
				return
			}
			ae := appError(t, err)
			if ae.Type() != latchtemporal.ErrTypeRefused || !ae.NonRetryable() || !strings.Contains(ae.Error(), "no_authority") ||
				!strings.Contains(ae.Error(), "tasks") {
				t.Errorf("workflow error = %v (type %q), want a non-retryable %s, no_authority on tasks", ae, ae.Type(), latchtemporal.ErrTypeRefused)
			}
			if n := f.acts.remote.Acts("inv_t"); n != 0 {
				t.Errorf("remote acted %d times, want 0", n)
			}
			want := ""
			if tt.fromWorkflow {
				want = latchtemporal.WorkflowTask(tt.workflowID)
			}
			if !found || task != want {
				t.Errorf("refusal receipt task = %q (found %v), want %q", task, found, want)
			}
		})
	}
}

// receiptTask is the task of the first receipt of effect key, and whether there is one.
func receiptTask(t *testing.T, g *latch.Guard, key string) (string, bool) {
	t.Helper()
	for r, err := range g.Store().Receipts(t.Context(), store.ReceiptFilter{EffectKey: key}) {
		if err != nil {
			t.Fatal(err)
		}
		var doc struct{ Task *string }
		if err := json.Unmarshal(r.Doc, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Task == nil {
			return "", true
		}
		return *doc.Task, true
	}
	return "", false
}
