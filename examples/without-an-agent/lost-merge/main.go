// Command lost-merge shows a merge job whose reply is lost reaching for a force-push.
//
// The merge of acme/checkout#4471 lands on the remote and the connection resets before the reply
// arrives. The job's retry is refused: the merge is ambiguous, not failed. The job then tries to
// "fix" things with git.force_push, which the policy does not list, and is denied.
//
// Run it with: go run ./examples/without-an-agent/lost-merge
package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/examples/internal/examplestore"
	"github.com/latchkit/latch/policy"
)

//go:embed latch.yaml
var policyYAML []byte

// unguardedEnv makes the example call the remote directly, without latch, so a test can show
// that its checks fail (exit 1) when nothing refuses the retry and the force-push.
const unguardedEnv = "LATCH_EXAMPLE_UNGUARDED"

// PR names a pull request.
type PR struct {
	Repo   string `json:"repo"`
	Number int64  `json:"number"`
}

// remote stands in for the git host.
type remote struct{ merges, forcePushes int }

func (r *remote) merge(ctx context.Context, pr PR) (string, error) {
	r.merges++ // the merge landed
	return "", fmt.Errorf("PUT /repos/%s/pulls/%d/merge: read: %w", pr.Repo, pr.Number, syscall.ECONNRESET)
}

func (r *remote) forcePush(ctx context.Context, pr PR) (string, error) {
	r.forcePushes++
	return "forced", nil
}

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "lost-merge:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	storeURL, err := examplestore.Reset(ctx, "lost-merge")
	if err != nil {
		return err
	}
	pol, err := policy.Parse("latch.yaml", policyYAML)
	if err != nil {
		return err
	}
	g, err := latch.Open(ctx, &latch.Config{Policy: pol, StoreURL: storeURL})
	if err != nil {
		return err
	}
	defer g.Close()

	rem := &remote{}
	merge := latch.Protect(g, "git.merge", rem.merge, nil)
	forcePush := latch.Protect(g, "git.force_push", rem.forcePush, nil)
	if os.Getenv(unguardedEnv) == "1" {
		merge, forcePush = rem.merge, rem.forcePush // without latch: the checks below must fail
	}
	ctx = latch.WithPrincipal(ctx, latch.Principal{Agent: "merge-bot"})
	pr := PR{Repo: "acme/checkout", Number: 4471}

	_, err1 := merge(ctx, pr)
	fmt.Printf("merge: %v\n", err1)
	_, err2 := merge(ctx, pr)
	fmt.Printf("merge retry: %v\n", err2)
	_, err3 := forcePush(ctx, pr)
	fmt.Printf("force push: %v\n", err3)

	fmt.Printf("\nremote merges: %d\n", rem.merges)
	fmt.Printf("remote force pushes: %d\n", rem.forcePushes)

	var denied *latch.DeniedError
	switch {
	case !errors.Is(err1, latch.ErrAmbiguous) || !errors.Is(err1, syscall.ECONNRESET):
		return fmt.Errorf("the lost reply should be ambiguous, got %v", err1)
	case !errors.Is(err2, latch.ErrAmbiguousEffect):
		return fmt.Errorf("the retry should be refused as ambiguous, got %v", err2)
	case !errors.As(err3, &denied) || denied.Reason != "unknown_action":
		return fmt.Errorf("the force push should be denied unknown_action, got %v", err3)
	case rem.merges != 1 || rem.forcePushes != 0:
		return fmt.Errorf("remote saw %d merges and %d force pushes", rem.merges, rem.forcePushes)
	}
	return nil
}
