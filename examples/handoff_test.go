package examples_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestHandoff runs examples/agents/handoff, whose planner and billing agent are two OS
// processes sharing one store, on Postgres and on a SQLite file, and asserts from its output
// that: a widening hop was refused at creation; the billing process (another pid) ran the
// refund the hop covers and its receipt names the hop; the refund beyond the hop was refused
// although billing's own grant allows it; the chain holds one record on each side naming the
// same hop; the processor saw one refund. Unguarded (billing not presenting the hop), the
// example must exit 1.
func TestHandoff(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "handoff")
	if out, err := exec.Command("go", "build", "-o", bin, "./agents/handoff").CombinedOutput(); err != nil {
		t.Fatalf("go build ./agents/handoff: %v\n%s", err, out)
	}
	pg := os.Getenv("LATCH_TEST_POSTGRES_URL")
	if pg == "" && os.Getenv("LATCH_REQUIRE_POSTGRES") == "1" {
		t.Fatal("LATCH_REQUIRE_POSTGRES=1 but LATCH_TEST_POSTGRES_URL is unset")
	}
	pids := regexp.MustCompile(`planner \(pid (\d+)\): hop (dlg_[0-9a-f]{32}) hands billing`)
	billingPid := regexp.MustCompile(`billing \(pid (\d+)\): handed hop (dlg_[0-9a-f]{32})`)
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			store := ""
			if backend == "postgres" {
				if pg == "" {
					t.Skip("LATCH_TEST_POSTGRES_URL is unset (scripts/test.sh sets it)")
				}
				store = pg
			}
			dir := t.TempDir()
			run := func(env ...string) ([]byte, error) {
				cmd := exec.Command(bin)
				cmd.Dir = dir
				cmd.Env = append(append(os.Environ(), "LATCH_STORE="+store), env...)
				return cmd.CombinedOutput()
			}
			out, err := run()
			if err != nil {
				t.Fatalf("handoff on %s: %v\n%s", backend, err, out)
			}
			p, b := pids.FindSubmatch(out), billingPid.FindSubmatch(out)
			if p == nil || b == nil {
				t.Fatalf("output names no planner or billing process:\n%s", out)
			}
			if string(p[1]) == string(b[1]) {
				t.Errorf("planner and billing ran in one process (pid %s)", p[1])
			}
			hop := string(p[2])
			if string(b[2]) != hop {
				t.Errorf("billing was handed %s, the planner created %s", b[2], hop)
			}
			for _, w := range []string{
				"planner: a hop of refunds up to 500000 is refused: authority_escalation on constraints.amount_lte",
				"billing: refund rf_1001 of 4200 presenting the hop: committed, receipt ",
				"names delegation " + hop,
				"billing: refund rf_1002 of 9000 without the hop would be allow by its own grant billing-own",
				"billing: refund rf_1002 of 9000 presenting the hop: refused authority_constraint on constraints.amount_lte",
				"chain: 1 record of the hop's creation (planner), 1 committed call under it (billing), both naming " + hop,
				"processor refunds: 1 (rf_1001)",
			} {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}

			// Billing acting on its own grant instead of the hop: the refund beyond the hop
			// runs, the example notices and exits 1.
			out, err = run("LATCH_EXAMPLE_UNGUARDED=1")
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "processor refunds: 2") {
				t.Errorf("unguarded handoff: err = %v, want exit status 1 after two refunds\n%s", err, out)
			}
		})
	}
}
