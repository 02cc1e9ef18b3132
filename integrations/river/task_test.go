package latchriver_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch"
	latchriver "github.com/latchkit/latch/integrations/river"
	"github.com/latchkit/latch/internal/remotetest"
	"github.com/latchkit/latch/store"
	"github.com/riverqueue/river/rivertype"
)

// taskPolicy lets billing-worker charge only as part of a River job.
const taskPolicy = testPolicy + `authority:
  grants:
    - id: river-jobs
      subject: { agent: billing-worker }
      actions: [billing.charge]
      tasks: ["river:job:*"]
`

// TestRiverTask: with TaskFromJob, a job's call carries "river:job:<id>", which a task-bound
// grant admits, and the receipt records it; without it the call carries no task, the grant
// refuses it no_authority on tasks, and the job is cancelled without running.
func TestRiverTask(t *testing.T) {
	t.Parallel()
	for _, fromJob := range []bool{true, false} {
		f := setupPolicy(t, taskPolicy, func(*remotetest.Server) *latchriver.Config {
			return &latchriver.Config{Principal: latch.Principal{Agent: "billing-worker"}, InProgressSnooze: 100 * time.Millisecond, TaskFromJob: fromJob}
		})
		invoice := "inv_task"
		id := f.insert(t, ChargeArgs{InvoiceID: invoice, Amount: 100})
		row := f.settle(t, id)
		task, found := receiptTask(t, f.guard, "charge:"+invoice)
		if fromJob {
			if row.State != rivertype.JobStateCompleted || f.remote.Acts(invoice) != 1 {
				t.Fatalf("TaskFromJob: job = %s (%s), remote acts %d; want completed, 1", row.State, lastError(row), f.remote.Acts(invoice))
			}
			if want := latchriver.JobTask(id); !found || task != want || want != "river:job:"+strconv.FormatInt(id, 10) {
				t.Errorf("TaskFromJob: receipt task = %q (found %v), want %q", task, found, want)
			}
			continue
		}
		if row.State != rivertype.JobStateCancelled || f.remote.Acts(invoice) != 0 ||
			!strings.Contains(lastError(row), "no_authority") || !strings.Contains(lastError(row), "tasks") {
			t.Errorf("without TaskFromJob: job = %s (%q), remote acts %d; want cancelled, no_authority on tasks, 0", row.State, lastError(row), f.remote.Acts(invoice))
		}
		if !found || task != "" {
			t.Errorf("without TaskFromJob: receipt task = %q (found %v), want a receipt without one", task, found)
		}
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
