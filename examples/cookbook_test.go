package examples_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// recipes are the cookbook's programs and a line each must print; unguarded are those whose
// checks must fail, exit 1, when $LATCH_EXAMPLE_UNGUARDED=1 takes latch out of their way.
var recipes = []struct {
	name      string
	want      string
	unguarded bool
}{
	{"agent-hop", "billing refunds rf_2 (120.00) presenting the token: authority_constraint", false},
	{"break-glass", "carol revokes the opening; ops-bot refunds rf_3 (10.00): authority_revoked", false},
	{"budgeted-agent", "o5 for ml (250.00): budget_exhausted", true},
	{"db-migration", "orders-db: migration 42 applied 1 time(s), 43 applied 0 time(s)", true},
	{"email-send", "emails to ana@example.com: 1, to bo@example.com: 0", true},
	{"github-merge", "remote merges: 1, force pushes: 0", true},
	{"mcp-tool", "upstream refunds: 1, deletions: 0", false},
	{"precondition-fingerprint", ": precondition_changed (captured sha256:", true},
	{"reconcile-hook", "retry inv_1: committed (charge ch_inv_1_1)", true},
	{"redact-secret", "receipt chain: 3 records, 0 holding the card number or the CVC", false},
	{"refund-approval-edit", "agent spends the approval again: approval_consumed", false},
	{"s3-delete", "object store deletes: 2, backup still there: true", true},
	{"standing-approval", "2 of 2 uses, exhausted", false},
	{"stripe-charge", "processor charges made: 1", true},
	{"suspended-execution", "the operator's tool replays the answer: suspension_resumed", false},
	{"webhook-fanout", "downstream: shipments 1, receipt emails 1, ledger posts 1", true},
}

// TestCookbook builds every program under cookbook/ with one go build and runs each as its
// own OS process: each must exit 0 (its own checks that latch refused what it had to all
// held) and print its story. Run unguarded, the recipes that can bypass latch must exit 1:
// their checks then fail, so a passing run is latch's doing, not the fakes'.
func TestCookbook(t *testing.T) {
	t.Parallel()
	dirs, err := os.ReadDir("cookbook")
	if err != nil {
		t.Fatal(err)
	}
	var onDisk []string
	for _, d := range dirs {
		if d.IsDir() && d.Name() != "internal" {
			onDisk = append(onDisk, d.Name())
		}
	}
	var listed []string
	for _, r := range recipes {
		listed = append(listed, r.name)
	}
	if !slices.Equal(onDisk, listed) {
		t.Fatalf("recipes on disk %v, listed in the test %v: list each (in order) with the line it prints", onDisk, listed)
	}
	if len(recipes) < 15 {
		t.Errorf("the cookbook has %d recipes, want at least 15", len(recipes))
	}

	bin := t.TempDir()
	start := time.Now()
	// One go build for all of them: it links each main package into bin, named for its
	// directory. Without symbol tables and DWARF the sixteen links take a quarter less CPU.
	if out, err := exec.Command("go", "build", "-ldflags=-s -w", "-o", bin+string(filepath.Separator), "./cookbook/...").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cookbook/...: %v\n%s", err, out)
	}
	t.Logf("go build ./cookbook/... took %s", time.Since(start).Round(time.Millisecond))

	unguardedInSource := regexp.MustCompile(`\bk\.Unguarded\b`)
	for _, r := range recipes {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(filepath.Join("cookbook", r.name, "main.go"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(src, []byte("// Command "+r.name+" ")) {
				t.Errorf("cookbook/%s/main.go does not begin with its doc comment %q", r.name, "// Command "+r.name)
			}
			if got := unguardedInSource.Match(src); got != r.unguarded {
				t.Errorf("cookbook/%s reads k.Unguarded: %v, the test says %v", r.name, got, r.unguarded)
			}

			stdout, stderr, code := runRecipe(t, filepath.Join(bin, r.name), "")
			if code != 0 {
				t.Fatalf("%s exited %d\nstdout:\n%s\nstderr:\n%s", r.name, code, stdout, stderr)
			}
			if !strings.Contains(stdout, r.want) || !strings.HasSuffix(stdout, r.name+": every check held\n") {
				t.Errorf("%s printed no %q, or not every check held:\n%s", r.name, r.want, stdout)
			}
			if !r.unguarded {
				return
			}
			stdout, stderr, code = runRecipe(t, filepath.Join(bin, r.name), "1")
			if code != 1 || !strings.Contains(stderr, r.name+": check failed: ") {
				t.Errorf("unguarded %s exited %d, want 1 with a failed check\nstdout:\n%s\nstderr:\n%s", r.name, code, stdout, stderr)
			}
		})
	}
}

// runRecipe runs a recipe with $LATCH_EXAMPLE_UNGUARDED set to unguarded ("" unsets it) and
// returns its output and exit code.
func runRecipe(t *testing.T, path, unguarded string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path)
	cmd.Dir = t.TempDir()
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LATCH_") {
			env = append(env, kv)
		}
	}
	if unguarded != "" {
		env = append(env, "LATCH_EXAMPLE_UNGUARDED="+unguarded)
	}
	cmd.Env = append(env, "TMPDIR="+t.TempDir())
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("run %s: %v", path, err)
	}
	return out.String(), errOut.String(), code
}
