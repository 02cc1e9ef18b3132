package latch_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/latchkit/latch"
)

// TestTaskVerdictOf holds the mapping the queue integrations share: a committed key completes
// without running, a live one waits, nothing-happened retries, and ambiguity, a reused key and
// every refusal stop the task with the effect and reason named.
func TestTaskVerdictOf(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		err     error
		verdict latch.TaskVerdict
		reason  string
		key     string
	}{
		{"committed", nil, latch.TaskDone, "refused", ""},
		{"duplicate", fmt.Errorf("run: %w", &latch.EffectError{Key: "k1", State: latch.StateCommitted, Reason: "committed"}), latch.TaskDuplicate, "committed", "k1"},
		{"in progress", &latch.EffectError{Key: "k2", State: latch.StateExecuting, Reason: "in_progress"}, latch.TaskInProgress, "in_progress", "k2"},
		{"key conflict", &latch.EffectError{Key: "k3", State: latch.StateCommitted, Reason: "key_conflict"}, latch.TaskStop, "key_conflict", "k3"},
		{"ambiguous", &latch.AmbiguousError{Key: "k4", Err: errors.New("reset")}, latch.TaskStop, "outcome_unknown", "k4"},
		{"attempts exhausted", &latch.EffectError{Key: "k5", Reason: "attempts_exhausted"}, latch.TaskStop, "attempts_exhausted", "k5"},
		{"approval required", fmt.Errorf("call: %w", latch.ErrApprovalRequired), latch.TaskStop, "approval_required", ""},
		{"approval required, its effect named", fmt.Errorf("call: %w", &latch.ApprovalRequiredError{ApprovalID: "apr_1", EffectKey: "k6"}), latch.TaskStop, "approval_required", "k6"},
		{"denied", fmt.Errorf("call: %w", latch.ErrDenied), latch.TaskStop, "denied", ""},
		{"not executed", latch.NotExecuted(errors.New("refused")), latch.TaskRetry, "refused", ""},
		{"store unreachable", errors.New("dial tcp: connection refused"), latch.TaskRetry, "refused", ""},
	}
	for _, c := range cases {
		if got := latch.TaskVerdictOf(c.err); got != c.verdict {
			t.Errorf("%s: TaskVerdictOf = %v, want %v", c.name, got, c.verdict)
		}
		if c.verdict == latch.TaskStop || c.verdict == latch.TaskDuplicate || c.verdict == latch.TaskInProgress {
			if got := latch.TaskReason(c.err); got != c.reason {
				t.Errorf("%s: TaskReason = %q, want %q", c.name, got, c.reason)
			}
		}
		if got := latch.EffectKeyOf(c.err); got != c.key {
			t.Errorf("%s: EffectKeyOf = %q, want %q", c.name, got, c.key)
		}
	}
}
