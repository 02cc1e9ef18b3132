package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/latchkit/latch"
)

// gatePolicy is the base policy: small refunds run, larger ones need a person, deletes are denied.
const gatePolicy = `schema: latch.policy/v1
actions:
  refund.issue:
    effect: "refund:{id}"
    arguments:
      id: { type: string }
      amount: { type: integer, min: 1 }
    rules:
      - when: { amount_lte: 1000 }
        decision: allow
      - decision: approve
  repo.delete:
    effect: "repo:{name}"
    arguments:
      name: { type: string }
    decision: deny
  report.export:
    effect: "export:{name}"
    arguments:
      name: { type: string }
    decision: allow
`

// recordChain records, under the base policy, a chain with a call of each decision: an
// allowed refund, an approved one made again with its approval, and a denied delete; nothing
// calls report.export.
func recordChain(t *testing.T, dir, policyPath string) string {
	t.Helper()
	db := filepath.Join(dir, "recorded.db")
	g, err := latch.Open(t.Context(), &latch.Config{PolicyPath: policyPath, StoreURL: "sqlite:" + db})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "refunder"})
	call := func(ctx context.Context, action, args string) error {
		_, err := g.Execute(ctx, &latch.Call{Action: action, Arguments: json.RawMessage(args)},
			func(context.Context, json.RawMessage) (any, error) { return "done", nil })
		return err
	}
	if err := call(ctx, "refund.issue", `{"id":"o1","amount":500}`); err != nil {
		t.Fatal(err)
	}
	var ar *latch.ApprovalRequiredError
	if err := call(ctx, "refund.issue", `{"id":"o2","amount":5000}`); !errors.As(err, &ar) {
		t.Fatalf("refund o2 = %v, want approval required", err)
	}
	if _, err := g.Approve(t.Context(), ar.ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := call(latch.WithApproval(ctx, ar.ApprovalID), "refund.issue", `{"id":"o2","amount":5000}`); err != nil {
		t.Fatal(err)
	}
	if err := call(ctx, "repo.delete", `{"name":"prod"}`); !errors.Is(err, latch.ErrDenied) {
		t.Fatalf("repo.delete = %v, want denied", err)
	}
	return db
}

// TestCIGate runs scripts/ci-gate.sh — the script the GitHub Action in action.yml runs — for
// real, with a latch binary built from this module: on the base policy it passes, writes the
// verify badge and the Markdown summary, and names the rule the recorded chain never exercised;
// on a policy that widens refund.issue (approve becomes allow) it fails, naming the recorded
// call decided less strictly; and a scan asked for is skipped, saying so, when the binary has
// no scan command.
func TestCIGate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds latch and runs latch verify twice")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatalf("the gate script needs bash: %v", err)
	}
	if _, err := exec.LookPath("jq"); err != nil {
		t.Fatalf("the gate script's replay comparison needs jq: %v", err)
	}
	dir := t.TempDir()
	steps := actionSteps(t)
	// The action's own install step builds latch (from this checkout, as the action does
	// without latch-version) and puts it on the job's PATH.
	githubPath := filepath.Join(dir, "github_path")
	install := exec.Command("bash", "-c", steps["Install latch"])
	install.Env = append(os.Environ(), "LATCH_VERSION=", "ACTION_PATH="+repoRoot(t), "RUNNER_TEMP="+dir, "GITHUB_PATH="+githubPath)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("action.yml's install step: %v\n%s", err, out)
	}
	binDir, err := os.ReadFile(githubPath)
	if err != nil {
		t.Fatalf("the install step added nothing to $GITHUB_PATH: %v", err)
	}
	bin := filepath.Join(strings.TrimSpace(string(binDir)), "latch")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the install step put no latch in %s: %v", binDir, err)
	}
	base := filepath.Join(dir, "base.yaml")
	if err := os.WriteFile(base, []byte(gatePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	wide := filepath.Join(dir, "wide.yaml")
	widened := strings.Replace(gatePolicy, "      - decision: approve", "      - decision: allow", 1)
	if widened == gatePolicy {
		t.Fatal("the widened policy is the base policy")
	}
	if err := os.WriteFile(wide, []byte(widened), 0o600); err != nil {
		t.Fatal(err)
	}
	chain := recordChain(t, dir, base)
	script := filepath.Join(repoRoot(t), "scripts", "ci-gate.sh")

	gate := func(name string, args ...string) (int, string, string) {
		t.Helper()
		summary := filepath.Join(dir, name+".md")
		cmd := exec.Command("bash", append([]string{script, "--latch", bin}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GITHUB_STEP_SUMMARY="+summary)
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := os.ReadFile(summary)
		if err != nil {
			t.Fatalf("%s: no summary at $GITHUB_STEP_SUMMARY: %v\n%s", name, err, out)
		}
		return code, string(out), string(b)
	}

	t.Run("original passes", func(t *testing.T) {
		badge := filepath.Join(dir, "badge.svg")
		code, out, summary := gate("original", "--policy", base, "--base", base, "--chain", chain, "--badge", badge)
		if code != 0 {
			t.Fatalf("the gate on the base policy = exit %d, want 0\n%s", code, out)
		}
		for _, want := range []string{
			"| latch check --strict | pass |",
			"| latch policy replay | pass: 3 recorded calls, none decided less strictly |",
			"| latch scan | off |",
			"| recorded chain coverage | never exercised, so a weakening there cannot show: `report.export` decision (line 17) |",
			"**The gate passes.**",
		} {
			if !strings.Contains(summary, want) {
				t.Errorf("summary lacks %q:\n%s", want, summary)
			}
		}
		svg, err := os.ReadFile(badge)
		if err != nil {
			t.Fatalf("no badge written: %v", err)
		}
		verdict := strings.Fields(summary[strings.Index(summary, "| latch verify | pass (")+len("| latch verify | pass ("):])[0]
		verdict = strings.TrimSuffix(verdict, ")")
		if n := strings.Split(verdict, "/"); len(n) != 2 || n[0] != n[1] || n[0] == "0" {
			t.Errorf("latch verify's verdict in the summary = %q, want N/N", verdict)
		}
		if !strings.Contains(string(svg), `aria-label="latch verify: `+verdict+`"`) || !strings.Contains(string(svg), "#2e7d32") {
			t.Errorf("the badge does not say latch verify: %s in green:\n%s", verdict, svg)
		}
	})

	t.Run("widened action fails", func(t *testing.T) {
		code, out, summary := gate("widened", "--policy", wide, "--base", base, "--chain", chain, "--badge", filepath.Join(dir, "wide.svg"))
		if code != 1 {
			t.Fatalf("the gate on a widened policy = exit %d, want 1\n%s", code, out)
		}
		for _, want := range []string{
			"| latch policy replay | **FAIL**: 1 of 3 recorded calls decided less strictly |",
			"| 3 | `refund.issue` | `refunder` | `refund:o2` | approve | allow | `rule[1]` |",
			"**The gate fails.**",
		} {
			if !strings.Contains(summary, want) {
				t.Errorf("summary lacks %q:\n%s", want, summary)
			}
		}
		if !strings.Contains(out, "ci-gate: weakened: seq 3 refund.issue: approve -> allow") {
			t.Errorf("the gate's output does not name the weakened call:\n%s", out)
		}
	})

	t.Run("no base compares with the recorded decisions", func(t *testing.T) {
		code, out, _ := gate("recorded", "--policy", wide, "--chain", chain)
		if code != 1 || !strings.Contains(out, "weakened: seq 3 refund.issue: approve -> allow") {
			t.Errorf("the gate on a widened policy without --base = exit %d, want 1 naming seq 3\n%s", code, out)
		}
	})

	t.Run("scan", func(t *testing.T) {
		hasScan := exec.Command(bin, "scan", "--help").Run() == nil
		code, out, summary := gate("scan", "--policy", base, "--scan", "on", "--scan-dir", dir)
		if hasScan {
			// This build has the scan command: the gate ran it (its own tests grade it).
			if !strings.Contains(summary, "| latch scan | pass |") && !strings.Contains(summary, "| latch scan | **FAIL** |") {
				t.Errorf("the scan did not run:\n%s", summary)
			}
			return
		}
		if code != 0 || !strings.Contains(summary, "| latch scan | skipped: this latch has no scan command |") {
			t.Errorf("the gate with --scan on and no scan command = exit %d, want 0 and the scan skipped, saying so\n%s\n%s", code, out, summary)
		}
	})

	t.Run("action step", func(t *testing.T) {
		// The action's gate step, its inputs in the environment as the runner passes them.
		for _, c := range []struct {
			policy string
			want   int
		}{{base, 0}, {wide, 1}} {
			summary := filepath.Join(dir, "action-"+filepath.Base(c.policy)+".md")
			cmd := exec.Command("bash", "-c", steps["Run the gate"])
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
				"GATE_POLICY="+c.policy, "GATE_BASE="+base, "GATE_CHAIN="+chain, "GATE_SCAN=off", "GATE_SCAN_DIR=.",
				"GATE_BADGE=action-badge.svg", "ACTION_PATH="+repoRoot(t), "GITHUB_STEP_SUMMARY="+summary)
			out, err := cmd.CombinedOutput()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
			if code != c.want {
				t.Errorf("action.yml's gate step on %s = exit %d (%v), want %d\n%s", filepath.Base(c.policy), code, err, c.want, out)
			}
			if _, err := os.Stat(filepath.Join(dir, "action-badge.svg")); err != nil {
				t.Errorf("action.yml's gate step wrote no badge: %v", err)
			}
			if b, _ := os.ReadFile(summary); !strings.Contains(string(b), "## latch CI gate") {
				t.Errorf("action.yml's gate step wrote no summary to $GITHUB_STEP_SUMMARY")
			}
		}
	})

	t.Run("usage", func(t *testing.T) {
		cmd := exec.Command("bash", script, "--latch", bin, "--policy", base, "--scan", "maybe")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "--scan maybe: want on or off") {
			t.Errorf("--scan maybe = %v, want exit 2 naming it\n%s", err, out)
		}
	})
}

// repoRoot is the repository's root: action.yml and scripts/ are there.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// actionSteps reads action.yml: the shell of each of its steps, by name.
func actionSteps(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs struct {
			Using string `yaml:"using"`
			Steps []struct {
				Name  string `yaml:"name"`
				Shell string `yaml:"shell"`
				Run   string `yaml:"run"`
			} `yaml:"steps"`
		} `yaml:"runs"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("action.yml: %v", err)
	}
	if doc.Runs.Using != "composite" {
		t.Fatalf("action.yml runs using %q, want composite", doc.Runs.Using)
	}
	out := map[string]string{}
	for _, s := range doc.Runs.Steps {
		if s.Shell != "bash" {
			t.Fatalf("action.yml step %q runs in %q, want bash", s.Name, s.Shell)
		}
		out[s.Name] = s.Run
	}
	if out["Install latch"] == "" || out["Run the gate"] == "" {
		t.Fatalf("action.yml has no Install latch and Run the gate steps: %v", out)
	}
	return out
}
