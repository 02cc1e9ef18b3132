package latchasynq_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/latchkit/latch"
	latchasynq "github.com/latchkit/latch/integrations/asynq"
	"github.com/latchkit/latch/internal/remotetest"
	"github.com/latchkit/latch/store"
)

// taskPolicy lets billing-worker charge only as part of an asynq task.
const taskPolicy = testPolicy + `authority:
  grants:
    - id: asynq-tasks
      subject: { agent: billing-worker }
      actions: [billing.charge]
      tasks: ["asynq:task:*"]
`

// TestAsynqTask: with TaskFromTask, a task's call carries "asynq:task:<id>", which a task-bound
// grant admits, and the receipt records it; without it the call carries no task, the grant
// refuses it no_authority on tasks, and the task is archived without running.
func TestAsynqTask(t *testing.T) {
	t.Parallel()
	for _, fromTask := range []bool{true, false} {
		f := setupPolicy(t, taskPolicy, func(*remotetest.Server) *latch.Options { return nil }, fromTask)
		invoice := "inv_task"
		id := f.enqueue(t, "charge:invoice", charge{InvoiceID: invoice, Amount: 100})
		info := f.settle(t, id)
		task, found := receiptTask(t, f.guard, "charge:"+invoice)
		if fromTask {
			if info.State != asynq.TaskStateCompleted || f.remote.Acts(invoice) != 1 {
				t.Fatalf("TaskFromTask: task = %s (%s), remote acts %d; want completed, 1", info.State, info.LastErr, f.remote.Acts(invoice))
			}
			if want := latchasynq.TaskOf(id); !found || task != want || want != "asynq:task:"+id {
				t.Errorf("TaskFromTask: receipt task = %q (found %v), want %q", task, found, want)
			}
			continue
		}
		if info.State != asynq.TaskStateArchived || f.remote.Acts(invoice) != 0 ||
			!strings.Contains(info.LastErr, "no_authority") || !strings.Contains(info.LastErr, "tasks") {
			t.Errorf("without TaskFromTask: task = %s (%q), remote acts %d; want archived, no_authority on tasks, 0", info.State, info.LastErr, f.remote.Acts(invoice))
		}
		if !found || task != "" {
			t.Errorf("without TaskFromTask: receipt task = %q (found %v), want a receipt without one", task, found)
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
