// Package recipe is the kitchen every cookbook program shares: a guard on a real SQLite store in
// a fresh temporary directory, a way to tell the story, and the checks that decide the exit
// status. A recipe exits 0 only when every check held — that is, when latch refused what it
// had to — and 1 otherwise, printing what did not hold.
package recipe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
)

// UnguardedEnv, set to 1, makes the recipes that honour it call their provider directly,
// without latch: their checks must then fail (exit 1), which shows that a passing run is latch's
// doing and not the fake provider's.
const UnguardedEnv = "LATCH_EXAMPLE_UNGUARDED"

// Kitchen is one run of a recipe: its guard, its working directory and its checks.
type Kitchen struct {
	Name  string
	Guard *latch.Guard
	// Dir is the run's temporary directory; the store is Dir/state.db.
	Dir string
	// StoreURL is the store's URL, for a second guard (another agent, another process).
	StoreURL string
	// Unguarded is set when $LATCH_EXAMPLE_UNGUARDED=1: the recipe bypasses latch.
	Unguarded bool
	failed    []string
}

// Run parses policyYAML, opens a guard on a new SQLite store in a temporary directory, runs
// cook and exits: 0 when cook returned nil and every Expect held, 1 otherwise. It never
// returns.
func Run(name, policyYAML string, cook func(ctx context.Context, k *Kitchen) error) {
	os.Exit(run(name, policyYAML, cook))
}

func run(name, policyYAML string, cook func(ctx context.Context, k *Kitchen) error) (code int) {
	defer func() {
		// A recipe whose guard let through what it should not may meet a nil where a refusal
		// was expected: that is a failed check too, reported as one, not a crash.
		if v := recover(); v != nil {
			fmt.Fprintf(os.Stderr, "%s: check failed: panic: %v\n", name, v)
			code = 1
		}
	}()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "latch-cookbook-"+name+"-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	defer os.RemoveAll(dir)
	k := &Kitchen{Name: name, Dir: dir, StoreURL: "sqlite:" + filepath.Join(dir, "state.db"), Unguarded: os.Getenv(UnguardedEnv) == "1"}
	g, err := k.Open(ctx, policyYAML, nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	k.Guard = g
	if k.Unguarded {
		fmt.Printf("(%s=1: the provider is called without latch)\n", UnguardedEnv)
	}
	err = cook(ctx, k)
	if cerr := g.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	if len(k.failed) > 0 {
		for _, f := range k.failed {
			fmt.Fprintf(os.Stderr, "%s: check failed: %s\n", name, f)
		}
		return 1
	}
	fmt.Printf("%s: every check held\n", name)
	return 0
}

// Open opens another guard on the kitchen's store with policyYAML and cfg (nil for defaults):
// a second agent or service sharing the store. The caller closes it.
func (k *Kitchen) Open(ctx context.Context, policyYAML string, cfg *latch.Config) (*latch.Guard, error) {
	pol, err := policy.Parse("latch.yaml", []byte(policyYAML))
	if err != nil {
		return nil, err
	}
	c := latch.Config{}
	if cfg != nil {
		c = *cfg
	}
	c.Policy, c.StoreURL = pol, k.StoreURL
	return latch.Open(ctx, &c)
}

// Say tells one line of the story.
func (k *Kitchen) Say(format string, args ...any) {
	fmt.Printf(format+"\n", args...)
}

// Expect records a check: when ok is false the recipe exits 1, naming what did not hold.
func (k *Kitchen) Expect(ok bool, format string, args ...any) {
	if !ok {
		k.failed = append(k.failed, fmt.Sprintf(format, args...))
	}
}

// Reason is the refusal word of err ("" for nil), for the story and the checks.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	return latch.ReasonOf(err)
}

// Word says how a call ended, for the story: ok when err is nil, else the refusal's reason
// word, else whether this call's own outcome is unknown (recorded ambiguous) or a failure.
func Word(err error, ok string) string {
	switch {
	case err == nil:
		return ok
	case latch.ReasonOf(err) != "":
		return latch.ReasonOf(err)
	case errors.Is(err, latch.ErrAmbiguous):
		return "outcome unknown, recorded ambiguous (" + err.Error() + ")"
	default:
		return "failed (" + err.Error() + ")"
	}
}
