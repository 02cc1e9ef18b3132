package latchtemporal_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/latchkit/latch"
	latchtemporal "github.com/latchkit/latch/integrations/temporal"
	"github.com/latchkit/latch/latchtest"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// KitInput is the input of the conformance kit's activities: its arguments.
type KitInput struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
	Mode   string `json:"mode"`
}

// KitWorkflow runs the activity named action once: the kit's next step is its retry.
func KitWorkflow(ctx workflow.Context, action string, in KitInput) (json.RawMessage, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var out json.RawMessage
	err := workflow.ExecuteActivity(ctx, action, in).Get(ctx, &out)
	return out, err
}

// TestConformance runs latch's adapter conformance kit against the interceptor: each call is a
// workflow running the activity named for the action, and its outcome is what a workflow sees —
// the activity's result, or its application error's Details.
func TestConformance(t *testing.T) {
	t.Parallel()
	latchtest.Run(t, latchtest.Harness{Start: func(t testing.TB, g *latch.Guard, h latchtest.Handler) latchtest.Invoke {
		var suite testsuite.WorkflowTestSuite
		return func(_ context.Context, a latchtest.Args) latchtest.Outcome {
			env := suite.NewTestWorkflowEnvironment()
			env.SetWorkerOptions(worker.Options{
				DeadlockDetectionTimeout: time.Minute,
				Interceptors: []interceptor.WorkerInterceptor{
					latchtemporal.NewInterceptor(g, &latchtemporal.Config{Principal: latchtest.Principal()}),
				},
			})
			env.RegisterWorkflow(KitWorkflow)
			env.RegisterActivityWithOptions(func(ctx context.Context, in KitInput) (json.RawMessage, error) {
				return h(ctx, latchtest.Args{Action: a.Action, ID: in.ID, Amount: in.Amount, Mode: in.Mode})
			}, activity.RegisterOptions{Name: a.Action})
			env.ExecuteWorkflow(KitWorkflow, a.Action, KitInput{ID: a.ID, Amount: a.Amount, Mode: a.Mode})
			err := env.GetWorkflowError()
			if err == nil {
				var out json.RawMessage
				if err := env.GetWorkflowResult(&out); err != nil {
					return latchtest.Outcome{Err: err}
				}
				return latchtest.Outcome{Result: out}
			}
			if d, _, ok := latchtemporal.DetailsOf(err); ok {
				return latchtest.Outcome{Refusal: d.Refusal()}
			}
			return latchtest.Outcome{Err: err}
		}
	}})
}
