package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/latchkit/latch"
)

// childEnv names the environment variable that makes a re-executed test binary a campaign
// driver. Its value is the JSON of a childSpec.
const childEnv = "LATCH_CAMPAIGN_CHILD"

// Child roles.
const (
	roleCrash = "crash" // one call on Key, SIGKILLed at Step
	roleRetry = "retry" // after a crash: the same calls again, no kill
	roleLoop  = "loop"  // calls on Prefix-0, Prefix-1, … until killed from outside
	roleSoak  = "soak"  // mixed load with injected faults until Until
)

// childSpec is what one driver process is told.
type childSpec struct {
	Role   string   `json:"role"`
	URL    string   `json:"url"`
	Dir    string   `json:"dir"` // holds the ledgers
	Step   Step     `json:"step,omitempty"`
	Keys   []string `json:"keys,omitempty"`
	Prefix string   `json:"prefix,omitempty"`
	// Gate, for a loop driver: once its store is open it waits for this file to appear in Dir
	// before its first call, so that several drivers start on Prefix-0 together.
	Gate string   `json:"gate,omitempty"`
	Soak *soakRun `json:"soak,omitempty"`
}

// Files in a campaign directory.
const (
	executionsFile = "executions.jsonl" // one line per real execution (fsynced)
	injectionsFile = "injections.jsonl" // one line per injected fault or observed store error
)

// Child must be the first call in TestMain of the campaign's tests. When the test binary was
// re-executed as a driver (an environment variable says so), it performs that role and exits the
// process; otherwise it returns at once.
func Child() {
	raw, ok := os.LookupEnv(childEnv)
	if !ok {
		return
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "campaign child: %s: %v\n", childEnv, err)
		os.Exit(2)
	}
	if err := spec.run(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "campaign child %s: %v\n", spec.Role, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func (c *childSpec) run(ctx context.Context) error {
	switch c.Role {
	case roleCrash, roleRetry, roleLoop:
		return c.crash(ctx)
	case roleSoak:
		return c.soak(ctx)
	}
	return fmt.Errorf("unknown role %q", c.Role)
}

func (c *childSpec) path(name string) string { return filepath.Join(c.Dir, name) }

// Outcome names what a call ended in, as the caller saw it.
func Outcome(err error) string {
	var ee *latch.EffectError
	var am *latch.ApprovalMismatchError
	switch {
	case err == nil:
		return "committed"
	case errors.As(err, &ee):
		return "refused_" + ee.Reason
	case errors.As(err, &am):
		return "approval_" + am.Reason
	case errors.Is(err, latch.ErrAmbiguous):
		return "ambiguous"
	case errors.Is(err, latch.ErrNotExecuted):
		return "not_executed"
	case errors.Is(err, latch.ErrApprovalRequired):
		return "approval_required"
	case errors.Is(err, latch.ErrDenied):
		return "denied"
	}
	return "error"
}
