package latchtemporal_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCookbookActivityRetry builds examples/activity-retry and runs it as a user would: it
// exits 0 only if each invoice was charged once (the lost reply ended the activity as
// ambiguous instead of a retry). Without the interceptor (LATCH_EXAMPLE_UNGUARDED=1) Temporal
// retries the charge and the program must exit 1.
func TestCookbookActivityRetry(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "activity-retry")
	// go test puts its own GOROOT/bin first in $PATH, so "go" is the toolchain running the test.
	if out, err := exec.Command("go", "build", "-o", bin, "./examples/activity-retry").CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/activity-retry: %v\n%s", err, out)
	}
	run := func(unguarded bool) (string, error) {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir(), "LATCH_EXAMPLE_UNGUARDED=")
		if unguarded {
			cmd.Env = append(cmd.Env, "LATCH_EXAMPLE_UNGUARDED=1")
		}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run(false)
	if err != nil {
		t.Fatalf("activity-retry: %v\n%s", err, out)
	}
	for _, want := range []string{
		"workflow charging inv_2: LatchAmbiguous (outcome_unknown, charge:inv_2), retryable false",
		"workflow charging inv_2: LatchAmbiguous (ambiguous, charge:inv_2), retryable false",
		"processor charges: inv_1=1 inv_2=1",
		"activity-retry: every check held",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("activity-retry output lacks %q:\n%s", want, out)
		}
	}
	out, err = run(true)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out, "check failed") {
		t.Errorf("unguarded activity-retry: %v, want exit status 1 with a failed check\n%s", err, out)
	}
}
