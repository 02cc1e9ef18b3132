// Package examples_test builds each example program and runs it as a user would, checking its
// exit status and the counts it prints.
package examples_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func build(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	pkg := "./without-an-agent/" + name
	if _, err := os.Stat(name); err == nil {
		pkg = "./" + name // an example of its own directory (webhook)
	}
	// go test puts its own GOROOT/bin first in $PATH, so "go" is the toolchain running the test.
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", name, err, out)
	}
	return bin
}

func TestExamples(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		want []string
	}{
		{"retried-task", []string{"effect record: charge:inv_88 ambiguous", "processor charges: 1", "latch resolve charge:inv_88"}},
		{"redelivered-webhook", []string{"bank transfers: 1", "refused: latch: effect payout:po_412 already committed"}},
		{"lost-merge", []string{"remote merges: 1", "remote force pushes: 0", "denied: unknown_action"}},
		{"webhook", []string{"warehouse shipments: o_1=1 o_2=1 o_3=1 o_4=0", "evt_1 → 200 (replayed from the stored result)",
			"evt_2 → 500", "evt_3 → 503", `"effect_key":"ship:evt_3"`, "evt_4 → 401"}},
	}
	pg := os.Getenv("LATCH_TEST_POSTGRES_URL")
	if pg == "" && os.Getenv("LATCH_REQUIRE_POSTGRES") == "1" {
		t.Fatal("LATCH_REQUIRE_POSTGRES=1 but LATCH_TEST_POSTGRES_URL is unset")
	}
	for _, tc := range cases {
		t.Run(tc.name+"/postgres", func(t *testing.T) {
			if pg == "" {
				t.Skip("LATCH_TEST_POSTGRES_URL is unset (scripts/test.sh sets it)")
			}
			t.Parallel()
			bin := build(t, tc.name)
			for run := 1; run <= 2; run++ {
				cmd := exec.Command(bin)
				cmd.Dir = t.TempDir()
				cmd.Env = append(os.Environ(), "LATCH_STORE="+pg)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("run %d of %s on postgres: %v\n%s", run, tc.name, err, out)
				}
				for _, w := range tc.want {
					if !strings.Contains(string(out), w) {
						t.Errorf("run %d of %s on postgres: output lacks %q:\n%s", run, tc.name, w, out)
					}
				}
			}
		})
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bin := build(t, tc.name)
			dir := t.TempDir()
			for run := 1; run <= 2; run++ { // repeatable: each run resets its own store
				cmd := exec.Command(bin)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "LATCH_STORE=")
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("run %d of %s: %v\n%s", run, tc.name, err, out)
				}
				for _, w := range tc.want {
					if !strings.Contains(string(out), w) {
						t.Errorf("run %d of %s: output lacks %q:\n%s", run, tc.name, w, out)
					}
				}
			}
			if _, err := os.Stat(filepath.Join(dir, ".latch", "examples", tc.name, "state.db")); err != nil {
				t.Errorf("store not under .latch/examples/%s: %v", tc.name, err)
			}

			// Without latch in the way, the refusals do not happen: the example must say so
			// and exit 1, so a passing run above means something.
			cmd := exec.Command(bin)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "LATCH_EXAMPLE_UNGUARDED=1")
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Errorf("unguarded %s: err = %v, want exit status 1\n%s", tc.name, err, out)
			}
		})
	}
}
