// Command suspended-execution has a deploy executor stop mid-call to ask a question, and be
// resumed once with the answer.
//
// The executor starts a production deploy, finds two healthy regions to roll to, and
// suspends: "which region first?". The call keeps its effect key while suspended, so a second
// deploy of the same release started meanwhile is refused in_progress. The operator's answer
// resumes the call with the token the suspension handed out; the deploy runs on with the
// answer and commits, one receipt. Replaying the same resume (the operator's tool retried its
// request) is refused suspension_resumed, and the deploy is not started again.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/examples/cookbook/internal/recipe"
)

const policyYAML = `
schema: latch.policy/v1
actions:
  deploy.rollout:
    effect: "rollout:{service}:{release}"
    resource: "service:{service}"
    arguments:
      service: { type: string }
      release: { type: string }
    decision: allow
`

func main() {
	recipe.Run("suspended-execution", policyYAML, func(ctx context.Context, k *recipe.Kitchen) error {
		rollouts := []string{} // what the deploy system rolled out, in order
		deploy := func(ctx context.Context, args json.RawMessage) (any, error) {
			r := latch.ResumedFrom(ctx)
			if r == nil {
				return nil, latch.Suspend(map[string]any{"message": "Which region first?", "choices": []string{"eu-west-1", "us-east-1"}})
			}
			var region string
			if err := json.Unmarshal(r.Input["region"], &region); err != nil {
				return nil, latch.NotExecuted(err)
			}
			rollouts = append(rollouts, region)
			return "rolled out to " + region + " first", nil
		}
		ctx = latch.WithPrincipal(ctx, latch.Principal{Agent: "deploy-agent"})
		args := json.RawMessage(`{"release":"v2.14.0","service":"checkout"}`)
		call := &latch.Call{Action: "deploy.rollout", Arguments: args}

		_, err := k.Guard.Execute(ctx, call, deploy)
		var s *latch.SuspendedError
		if !errors.As(err, &s) {
			return fmt.Errorf("the deploy = %v, want it suspended", err)
		}
		k.Say("deploy checkout v2.14.0: suspended, round %d, asking %s", s.Round, s.Request)

		_, err = k.Guard.Execute(ctx, call, deploy)
		k.Say("a second deploy of v2.14.0 meanwhile: %s", recipe.Word(err, "ran"))
		k.Expect(recipe.Reason(err) == string(latch.ReasonInProgress), "the second deploy = %q, want in_progress", recipe.Reason(err))

		answer := &latch.ResumeRequest{ActionID: s.ActionID, Token: s.Token, Arguments: args,
			Input: map[string]json.RawMessage{"region": json.RawMessage(`"eu-west-1"`)}}
		rc, err := k.Guard.Resume(ctx, answer, deploy)
		if err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		k.Say("operator answers eu-west-1: %s, %v", rc.Result, rc.Value)

		_, err = k.Guard.Resume(ctx, answer, deploy)
		k.Say("the operator's tool replays the answer: %s", recipe.Word(err, "ran again"))
		k.Expect(recipe.Reason(err) == string(latch.ReasonSuspensionResumed), "the replayed resume = %q, want suspension_resumed", recipe.Reason(err))
		k.Say("rollouts: %v", rollouts)
		k.Expect(len(rollouts) == 1 && rollouts[0] == "eu-west-1", "rollouts %v, want one, to eu-west-1", rollouts)
		return nil
	})
}
