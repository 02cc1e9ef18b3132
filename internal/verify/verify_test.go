package verify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/verify"
	"github.com/latchkit/latch/policy"
)

func TestMain(m *testing.M) {
	verify.Child()           // G4 re-executes this binary as its racers
	goleak.VerifyTestMain(m) // guards, stores and racer processes all end with their run
}

// fullPolicy has approvals, effects, rules whose earlier entries the argument search must steer
// around, and an authority section with a delegable grant; budgets (the delegable grant's, and
// an action's own per agent) and a grant bound to tasks.
const fullPolicy = `
schema: latch.policy/v1
version: "verify-test"
approvers:
  roles:
    leads: [alice, bob]
    ops: []
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    resource: "invoice:{invoice_id}"
    max_attempts: 3
    rules:
      - when: { amount_gte: 0, amount_lte: 50000, currency_in: ["EUR", "USD"] }
        decision: allow
      - when: { amount_gte: 0, amount_lte: 500000 }
        decision: approve
      - decision: deny
    approvers: { roles: [leads, ops], required: 2, verified: true }
  billing.refund:
    effect: "refund:{refund_id}"
    lease: 2m
    rules:
      - when: { reason_prefix: "fraud:" }
        decision: deny
      - when: { amount_gt: 100 }
        decision: approve
      - decision: allow
    budgets:
      - { metric: amount, limit: 300, window: P1D, per: agent }
  report.read:
    decision: allow
  report.export:
    effect: "export:{report_id}"
    decision: allow
authority:
  grants:
    - id: billing-worker
      subject: { agent: "latch-verify" }
      actions: ["billing.*"]
      expires_at: "2030-01-01T00:00:00Z"
      delegable: true
      budgets:
        - { metric: count, limit: 12, window: PT24H }
    - id: exports
      subject: { agent: "latch-verify" }
      actions: ["report.*"]
      tasks: ["ticket:*"]
`

// readOnlyPolicy has no effect templates and no authority.
const readOnlyPolicy = `
schema: latch.policy/v1
actions:
  report.read:
    decision: allow
  report.export:
    rules:
      - when: { rows_lte: 1000 }
        decision: allow
      - decision: approve
  admin.wipe:
    decision: deny
`

// effectsPolicy is a small policy with approvals and effects and no authority, for the fault
// runs.
const effectsPolicy = `
schema: latch.policy/v1
approvers:
  roles:
    maintainers: [ana, ben, cy]
actions:
  git.merge:
    effect: "merge:{repo}:{number}"
    rules:
      - when: { repo_prefix: "acme/" }
        decision: allow
      - decision: approve
    approvers: { roles: [maintainers], required: 2 }
`

// failOpenPolicy denies on an argument before it allows: were an absent argument to make the
// deny's condition merely false, misspelling it would let the call run (L5's fault).
const failOpenPolicy = `
schema: latch.policy/v1
actions:
  pay.out:
    effect: "payout:{payout_id}"
    rules:
      - when: { country_in: [XX] }
        decision: deny
      - decision: allow
`

func parse(t *testing.T, doc string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

func run(t *testing.T, cfg *verify.Config) *verify.Report {
	t.Helper()
	rep, err := verify.Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return rep
}

func byID(rep *verify.Report) map[string]verify.Result {
	m := map[string]verify.Result{}
	for _, r := range rep.Results {
		m[r.ID] = r
	}
	return m
}

func text(t *testing.T, rep *verify.Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatalf("WriteText: %v", err)
	}
	return b.String()
}

// operatorStore creates a store with a few receipts, as an operator's would be, and returns its
// URL and its directory.
func operatorStore(t *testing.T) (string, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), ".latch")
	u := "sqlite:" + filepath.Join(dir, "state.db")
	g, err := latch.Open(t.Context(), &latch.Config{Policy: parse(t, readOnlyPolicy), StoreURL: u})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "operator"})
	for range 3 {
		_, err := g.Execute(ctx, &latch.Call{Action: "report.read"}, func(context.Context, json.RawMessage) (any, error) { return "ok", nil })
		if err != nil {
			t.Fatalf("Execute: %v", err)
		}
	}
	if err := g.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return u, dir
}

// fileState is every file under dir with its bytes, mode and modification time.
func fileState(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		s := info.Mode().String() + " " + info.ModTime().Format(time.RFC3339Nano)
		if !d.IsDir() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			s += " " + string(b)
		}
		m[path] = s
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return m
}

// TestFullPolicy runs the whole catalogue on a policy with approvals, effects and a delegable
// grant, with the operator's store configured: every guarantee passes, the operator's store is
// byte-identical afterwards, and the JUnit report says so.
func TestFullPolicy(t *testing.T) {
	t.Parallel()
	u, dir := operatorStore(t)
	before := fileState(t, dir)

	rep := run(t, &verify.Config{Policy: parse(t, fullPolicy), StoreURL: u, LatchHTTP: true})
	t.Logf("\n%s", text(t, rep))
	allPass(t, rep)
	// G22 fills both kinds of budget: the grant's count, and billing.refund's own amount with
	// calls the allow rule decides (100, the most it permits; amount is passed as an integer).
	got := byID(rep)
	for _, want := range []string{"charged against billing-worker count ≤ 12 per P1D (1 a call): k = 12",
		"action:billing.refund:agent:latch-verify amount ≤ 300 per P1D (100 a call): k = 3"} {
		if !strings.Contains(got["G22"].Detail, want) {
			t.Errorf("G22 detail lacks %q: %s", want, got["G22"].Detail)
		}
	}
	// G31's older receipts are of calls before budgets: their ledger rows go with them, or the
	// ledger check would name them.
	if d := got["G31"].Detail; !strings.Contains(d, "(6 rows; 2 ledger rows of their calls removed, as before budgets)") {
		t.Errorf("G31 detail: %s", d)
	}
	for _, want := range []string{"widened budgets: refused authority_escalation on budgets", "omitting budgets: refused authority_escalation on budgets"} {
		if !strings.Contains(got["G9"].Detail, want) {
			t.Errorf("G9 detail lacks %q: %s", want, got["G9"].Detail)
		}
	}
	if got := verify.ExitCode(rep, nil); got != verify.ExitPass {
		t.Errorf("ExitCode = %d, want %d", got, verify.ExitPass)
	}
	if diff := cmp.Diff(before, fileState(t, dir)); diff != "" {
		t.Errorf("operator's store changed (-before +after):\n%s", diff)
	}

	var junit bytes.Buffer
	if err := rep.WriteJUnit(&junit); err != nil {
		t.Fatalf("WriteJUnit: %v", err)
	}
	n := len(verify.IDs())
	checkJUnit(t, junit.Bytes(), n, 0, 2) // G13, N/A on SQLite; G27, no pin
}

// allPass checks that every guarantee of the catalogue ran and passed, but G13, N/A on SQLite
// (one clock: the host's).
func allPass(t *testing.T, rep *verify.Report) {
	t.Helper()
	na := 1 // G13
	for _, r := range rep.Results {
		if r.ID == "G13" && rep.Backend == "sqlite" {
			if r.Status != verify.NotApplicable || !strings.HasPrefix(r.Reason, "the sqlite backend has no clock of its own") {
				t.Errorf("G13 on SQLite = %s %q, want N/A", r.Status, r.Reason)
			}
			continue
		}
		if r.ID == "G27" {
			// The policies run whole here pin no upstream: TestG27PinnedUpstream grades it.
			if r.Status != verify.NotApplicable || r.Reason != naNoPin {
				t.Errorf("G27 = %s %q, want N/A %q", r.Status, r.Reason, naNoPin)
			}
			continue
		}
		if r.Status != verify.Pass || r.Reason != "" {
			t.Errorf("%s = %s %q (%s), want PASS", r.ID, r.Status, r.Reason, r.Detail)
		}
	}
	na++ // G27
	n := len(verify.IDs()) - na
	if len(rep.Results) != n+na || rep.Passed != n || rep.Applicable != n || rep.NotApplicable != na || rep.Failed != 0 {
		t.Errorf("counts: %d results, %d passed, %d applicable, %d N/A, %d failed; want %d, %d, %[7]d, %d, 0",
			len(rep.Results), rep.Passed, rep.Applicable, rep.NotApplicable, rep.Failed, n+na, n, na)
	}
}

// naNoPin is G27's N/A for a policy that pins no gateway tool.
const naNoPin = "no gateway tool (mcp.<alias>.<tool>) that the policy can allow is pinned by its upstream's pin.tool_schema_sha256, from its arguments alone"

// naSQLiteClock is G13's N/A on SQLite.
const naSQLiteClock = "the sqlite backend has no clock of its own: the store reads the host's clock only, so there is no second clock to disagree with"

// paymentsEpoch is when the payments example is verified: its grants expire (alice's on
// 2027-01-01), so the scenario clock is pinned rather than read from the wall.
var paymentsEpoch = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// TestPaymentsExample runs the catalogue on examples/authority/payments.yaml: a human's
// delegable grant with constraints and environments, a grant for agents by pattern, approvals
// and effects. Every scenario proposes as a principal a grant names (alice, through the verify
// agent), with arguments that satisfy the grant's constraints; G8 runs at alice's expires_at, G9
// probes every dimension her grant constrains. Every guarantee passes but G22 and G24: the
// example declares no budget and no grant bound to tasks.
func TestPaymentsExample(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "examples", "authority", "payments.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rep := run(t, &verify.Config{Policy: parse(t, string(doc)), Now: paymentsEpoch, LatchHTTP: true})
	t.Logf("\n%s", text(t, rep))
	got := byID(rep)
	// The example declares no budget and no task-bound grant.
	for id, reason := range map[string]string{"G22": "no grant and no action declares a budget", "G24": "no grant names a task", "G13": naSQLiteClock, "G27": naNoPin} {
		if r := got[id]; r.Status != verify.NotApplicable || r.Reason != reason {
			t.Errorf("%s = %s %q, want N/A %q", id, r.Status, r.Reason, reason)
		}
	}
	for _, r := range rep.Results {
		if r.ID != "G22" && r.ID != "G24" && r.ID != "G13" && r.ID != "G27" && r.Status != verify.Pass {
			t.Errorf("%s = %s %q (%s), want PASS", r.ID, r.Status, r.Reason, r.Detail)
		}
	}
	if n := len(verify.IDs()); rep.Passed != n-4 || rep.Failed != 0 {
		t.Errorf("counts: %d passed, %d failed; want %d, 0", rep.Passed, rep.Failed, n-4)
	}
	for _, want := range []string{"constraints.amount_lte", "constraints.currency_in", "environments", "expires_at", "actions"} {
		if d := got["G9"].Detail; !strings.Contains(d, "widened "+want+": refused authority_escalation on "+want) {
			t.Errorf("G9 did not probe widened %s: %s", want, d)
		}
	}
	for _, want := range []string{"constraints.amount_lte", "constraints.currency_in", "environments", "expires_at"} {
		if d := got["G9"].Detail; !strings.Contains(d, "omitting "+want+": refused authority_escalation on "+want) {
			t.Errorf("G9 did not probe omitting %s: %s", want, d)
		}
	}
	if d := got["G8"].Detail; !strings.Contains(d, "grant alice-payments, expires_at 2027-01-01T00:00:00Z, as latch-verify/alice") {
		t.Errorf("G8 detail: %s", d)
	}
}

// TestNoEffectsNoAuthority: the guarantees that need an effect template, an authority section,
// roles, M-of-N or a budget are N/A with reasons, and the summary counts only the rest (G1, G2,
// G6, G7, G10, G11, G16, G18, G20, G21, G23, G28–G32, L5), which pass.
func TestNoEffectsNoAuthority(t *testing.T) {
	t.Parallel()
	rep := run(t, &verify.Config{Policy: parse(t, readOnlyPolicy)})
	out := text(t, rep)
	t.Logf("\n%s", out)
	na := map[string]string{
		"G3": "no action with an effect template can decide allow", "G4": "no action with an effect template can decide allow",
		"G5": "no action with an effect template can decide allow", "L1": "no action with an effect template can decide allow",
		"G8": "policy has no authority section", "G9": "policy has no authority section",
		"G17": "no action that can decide approve names roles in its approvers (anyone but the requester may answer it: nobody is outside)",
		"G19": "no action that can decide approve requires two or more grants (approvers.required): one grant decides every request",
		"G14": "no action with an effect template can decide allow",
		"G15": "no action with an effect template that can decide allow sets max_attempts: renewals have no ceiling to refuse past",
		"L6":  "policy has no authority section",
		"L2":  "no action with an effect template can decide allow", "L3": "no action with an effect template can decide allow",
		"L4":  "no action with an effect template can run (none can decide allow or approve)",
		"G12": "no transport-level caller is configured: pass --latchhttp (Config.LatchHTTP) when your executors call their remotes through latchhttp",
		"G22": "no grant and no action declares a budget", "G24": "policy has no authority section",
		"G25": "policy has no authority section", "G26": "policy has no authority section",
		"G13": naSQLiteClock, "G27": naNoPin,
	}
	for _, r := range rep.Results {
		if reason, ok := na[r.ID]; ok {
			if r.Status != verify.NotApplicable || r.Reason != reason {
				t.Errorf("%s = %s %q, want N/A %q", r.ID, r.Status, r.Reason, reason)
			}
			continue
		}
		if r.Status != verify.Pass {
			t.Errorf("%s = %s %q (%s), want PASS", r.ID, r.Status, r.Reason, r.Detail)
		}
	}
	if rep.Passed != 17 || rep.Applicable != 17 || rep.NotApplicable != 21 || rep.Failed != 0 {
		t.Errorf("counts: %d passed, %d applicable, %d N/A, %d failed; want 17, 17, 21, 0", rep.Passed, rep.Applicable, rep.NotApplicable, rep.Failed)
	}
	if !strings.Contains(out, "17/17 declared guarantees pass. 21 not applicable: G3 (no action with an effect template can decide allow), G4 (") {
		t.Errorf("summary missing or wrong:\n%s", out)
	}
	if !strings.Contains(out, "G3   duplicate effect refused               N/A   no action with an effect template can decide allow\n") {
		t.Errorf("G3 line missing or misaligned:\n%s", out)
	}
}

// TestFaults shows every guarantee able to fail: each fault makes the guarantees it targets FAIL.
func TestFaults(t *testing.T) {
	t.Parallel()
	faults := verify.Faults()
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range faults {
			if !yield(k) {
				return
			}
		}
	})
	covered := map[string]bool{}
	for _, name := range names {
		for _, id := range faults[name] {
			covered[id] = true
		}
	}
	for _, id := range verify.IDs() {
		if !covered[id] {
			t.Errorf("no fault makes %s fail", id)
		}
	}
	// The authority faults need a policy with an authority section; the others run on the
	// small effects policy.
	policyFor := map[string]string{
		verify.FaultExpiryOffByOne:      fullPolicy,
		verify.FaultDelegationUnchecked: fullPolicy,
		verify.FaultAttemptsUnbounded:   fullPolicy, // billing.charge has max_attempts: 3
		verify.FaultRefuseAll:           fullPolicy,
		verify.FaultArgumentsOptional:   failOpenPolicy,
		verify.FaultRevocationIgnored:   fullPolicy,
		verify.FaultBudgetUnchecked:     fullPolicy,
		verify.FaultTasksIgnored:        fullPolicy,
		verify.FaultHopUnchecked:        fullPolicy,
		verify.FaultHopFallback:         fullPolicy,
		verify.FaultHopReceiptUnnamed:   fullPolicy,
		verify.FaultPinIgnored:          pinnedPolicy,
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			targets := faults[name]
			doc := effectsPolicy
			if d, ok := policyFor[name]; ok {
				doc = d
			}
			storeURL := ""
			if name == verify.FaultSkewThresholdUnit {
				// G13 is graded on a backend with a clock of its own only.
				if storeURL = os.Getenv("LATCH_TEST_POSTGRES_URL"); storeURL == "" {
					if os.Getenv("LATCH_REQUIRE_POSTGRES") == "1" {
						t.Fatal("LATCH_TEST_POSTGRES_URL is unset and LATCH_REQUIRE_POSTGRES=1")
					}
					t.Skip("LATCH_TEST_POSTGRES_URL is unset: G13 needs Postgres")
				}
			}
			rep := run(t, verify.WithFaults(&verify.Config{Policy: parse(t, doc), Only: targets, LatchHTTP: true, StoreURL: storeURL}, name))
			got := byID(rep)
			for _, id := range targets {
				r, ok := got[id]
				if !ok {
					t.Fatalf("%s missing from the report", id)
				}
				if r.Status != verify.Fail {
					t.Errorf("%s with %s = %s %q (%s), want FAIL", id, name, r.Status, r.Reason, r.Detail)
					continue
				}
				if control := r.Reason == "control failed"; control != (name == verify.FaultRefuseAll) {
					t.Errorf("%s with %s failed with reason %q (%s)", id, name, r.Reason, r.Detail)
				}
				t.Logf("%s with %s: FAIL %s", id, name, r.Reason)
			}
			if verify.ExitCode(rep, nil) != verify.ExitFail {
				t.Errorf("ExitCode = %d, want %d", verify.ExitCode(rep, nil), verify.ExitFail)
			}
			if out := text(t, rep); !strings.Contains(out, "failed: "+targets[0]+" (") {
				t.Errorf("text report does not name the failure:\n%s", out)
			}
		})
	}
}

// TestUsage: configurations verify refuses, as *UsageError (exit 2).
func TestUsage(t *testing.T) {
	t.Parallel()
	observe := parse(t, "schema: latch.policy/v1\nmode: observe\nactions:\n  a.b:\n    decision: allow\n")
	tests := []struct {
		name string
		cfg  *verify.Config
		want string
	}{
		{"nil config", nil, "no policy"},
		{"observe mode", &verify.Config{Policy: observe}, "observe mode"},
		{"unknown guarantee", &verify.Config{Policy: parse(t, readOnlyPolicy), Only: []string{"G1", "G99"}}, `unknown guarantee "G99"`},
		{"unknown fault", verify.WithFaults(&verify.Config{Policy: parse(t, readOnlyPolicy)}, "nope"), `unknown fault "nope"`},
		{"bad store", &verify.Config{Policy: parse(t, readOnlyPolicy), StoreURL: "mysql://x"}, "unsupported store URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := verify.Run(t.Context(), tc.cfg)
			var ue *verify.UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, %v; want a *UsageError containing %q", rep, err, tc.want)
			}
			if got := verify.ExitCode(rep, err); got != verify.ExitUsage {
				t.Errorf("ExitCode = %d, want %d", got, verify.ExitUsage)
			}
		})
	}
}

// TestOnly runs a selection, in catalogue order, whatever the order and case given.
func TestOnly(t *testing.T) {
	t.Parallel()
	rep := run(t, &verify.Config{Policy: parse(t, effectsPolicy), Only: []string{"g11, G3", "G6"}})
	var ids []string
	for _, r := range rep.Results {
		ids = append(ids, r.ID)
	}
	if want := []string{"G3", "G6", "G11"}; !slices.Equal(ids, want) {
		t.Errorf("ran %v, want %v", ids, want)
	}
	if rep.Passed != 3 {
		t.Errorf("passed %d, want 3:\n%s", rep.Passed, text(t, rep))
	}
}

// TestNothingApplicable: when every selected guarantee is N/A the exit status is 2, not 0.
func TestNothingApplicable(t *testing.T) {
	t.Parallel()
	rep := run(t, &verify.Config{Policy: parse(t, readOnlyPolicy), Only: []string{"G8", "G9", "L1"}})
	if rep.Applicable != 0 || rep.NotApplicable != 3 {
		t.Fatalf("applicable %d, N/A %d; want 0, 3", rep.Applicable, rep.NotApplicable)
	}
	if got := verify.ExitCode(rep, nil); got != verify.ExitUsage {
		t.Errorf("ExitCode = %d, want %d", got, verify.ExitUsage)
	}
	if out := text(t, rep); !strings.Contains(out, "0/0 declared guarantees pass. 3 not applicable: G8 (policy has no authority section)") {
		t.Errorf("summary:\n%s", out)
	}
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rep  *verify.Report
		err  error
		want int
	}{
		{"all pass", &verify.Report{Passed: 2, Applicable: 2, NotApplicable: 1}, nil, 0},
		{"one fails", &verify.Report{Passed: 1, Failed: 1, Applicable: 2}, nil, 1},
		{"nothing applicable", &verify.Report{NotApplicable: 3}, nil, 2},
		{"usage", nil, &verify.UsageError{Msg: "x"}, 2},
		{"internal", nil, errors.New("scratch store"), 3},
	}
	for _, tc := range tests {
		if got := verify.ExitCode(tc.rep, tc.err); got != tc.want {
			t.Errorf("%s: ExitCode = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// sampleReport has one result of each status.
func sampleReport() *verify.Report {
	return &verify.Report{
		Results: []verify.Result{
			{ID: "G3", Title: "duplicate effect refused", Status: verify.Pass, Action: "billing.charge", Detail: "ok", Duration: 12 * time.Millisecond},
			{ID: "G5", Title: "ambiguous blocks a blind retry", Status: verify.Fail, Action: "billing.charge", Reason: "the blind retry executed", Detail: "a <b> & c", Duration: time.Millisecond},
			{ID: "G8", Title: "expired authority refused", Status: verify.NotApplicable, Reason: "policy has no authority section"},
		},
		Passed: 1, Failed: 1, NotApplicable: 1, Applicable: 2, PolicyHash: "sha256:00", Backend: "sqlite",
	}
}

type junitDoc struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Skipped  int      `xml:"skipped,attr"`
	Suites   []struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Skipped  int `xml:"skipped,attr"`
		Cases    []struct {
			Name    string `xml:"name,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// checkJUnit parses a JUnit report and checks its counts, attributes and elements agree.
func checkJUnit(t *testing.T, b []byte, tests, failures, skipped int) junitDoc {
	t.Helper()
	var doc junitDoc
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("JUnit does not parse: %v\n%s", err, b)
	}
	if len(doc.Suites) != 1 {
		t.Fatalf("%d testsuites, want 1", len(doc.Suites))
	}
	s := doc.Suites[0]
	var f, sk int
	for _, c := range s.Cases {
		if c.Failure != nil {
			f++
		}
		if c.Skipped != nil {
			sk++
			if c.Skipped.Message == "" {
				t.Errorf("testcase %s skipped without a reason", c.Name)
			}
		}
	}
	got := []int{doc.Tests, doc.Failures, doc.Skipped, s.Tests, s.Failures, s.Skipped, len(s.Cases), f, sk}
	want := []int{tests, failures, skipped, tests, failures, skipped, tests, failures, skipped}
	if !slices.Equal(got, want) {
		t.Errorf("JUnit counts (suites tests/failures/skipped, suite tests/failures/skipped, cases, <failure>, <skipped>) = %v, want %v\n%s", got, want, b)
	}
	return doc
}

func TestJUnit(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := sampleReport().WriteJUnit(&b); err != nil {
		t.Fatalf("WriteJUnit: %v", err)
	}
	doc := checkJUnit(t, b.Bytes(), 3, 1, 1)
	cases := doc.Suites[0].Cases
	if cases[1].Name != "G5 ambiguous blocks a blind retry" || cases[1].Failure.Message != "the blind retry executed" || cases[1].Failure.Text != "a <b> & c" {
		t.Errorf("failure case = %+v", cases[1])
	}
	if cases[2].Skipped.Message != "policy has no authority section" {
		t.Errorf("skipped case = %+v", cases[2])
	}
}

func TestJSON(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := sampleReport().WriteJSON(&b); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	if n := bytes.Count(b.Bytes(), []byte("\n")); n != 1 {
		t.Errorf("JSON report is %d lines, want 1", n)
	}
	var got map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("JSON does not parse: %v", err)
	}
	want := map[string]any{
		"schema": "latch.verify/v1", "ok": false, "policy_hash": "sha256:00", "backend": "sqlite",
		"passed": 1.0, "failed": 1.0, "not_applicable": 1.0, "applicable": 2.0,
		"results": []any{
			map[string]any{"id": "G3", "title": "duplicate effect refused", "status": "PASS", "action": "billing.charge", "reason": "", "detail": "ok", "duration_ms": 12.0},
			map[string]any{"id": "G5", "title": "ambiguous blocks a blind retry", "status": "FAIL", "action": "billing.charge", "reason": "the blind retry executed", "detail": "a <b> & c", "duration_ms": 1.0},
			map[string]any{"id": "G8", "title": "expired authority refused", "status": "N/A", "action": "", "reason": "policy has no authority section", "detail": "", "duration_ms": 0.0},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSON report (-want +got):\n%s", diff)
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	want := `G3  duplicate effect refused        PASS  billing.charge
G5  ambiguous blocks a blind retry  FAIL  billing.charge: the blind retry executed
      a <b> & c
G8  expired authority refused       N/A   policy has no authority section
1/2 declared guarantees pass. 1 failed: G5 (the blind retry executed). 1 not applicable: G8 (policy has no authority section).
`
	if got := text(t, sampleReport()); got != want {
		t.Errorf("WriteText:\n%s\nwant:\n%s", got, want)
	}
}

// TestKeysThePolicyCannotVary: a constant effect key, and a key rendered from an explicit
// resource, still get the distinct keys the scenarios need (G4's control needs eight).
func TestKeysThePolicyCannotVary(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, actions string }{
		{"constant", "  deploy.prod:\n    effect: \"deploy:prod\"\n    decision: allow\n"},
		{"resource", "  doc.delete:\n    effect: \"delete:{resource}\"\n    decision: allow\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			only := []string{"G3", "G5", "G10", "L1"}
			if tc.name == "constant" {
				only = append(only, "G4")
			}
			rep := run(t, &verify.Config{Policy: parse(t, "schema: latch.policy/v1\nactions:\n"+tc.actions), Only: only})
			if rep.Passed != len(only) {
				t.Errorf("passed %d of %d:\n%s", rep.Passed, len(only), text(t, rep))
			}
		})
	}
}

// TestCancelled: a cancelled run is an internal error (exit 3), never a verdict.
func TestCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	rep, err := verify.Run(ctx, &verify.Config{Policy: parse(t, effectsPolicy), Only: []string{"G3"}})
	if !errors.Is(err, context.Canceled) || verify.ExitCode(rep, err) != verify.ExitInternal {
		t.Errorf("Run on a cancelled context = %v, %v; want context.Canceled, exit 3", rep, err)
	}
}

// TestAuthorityShapes: how the scenarios find a principal, arguments and a resource a grant
// allows, and what is N/A when the authority section leaves nothing to exercise.
func TestAuthorityShapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		doc    string
		status map[string]verify.Status // guarantees not listed must PASS
		reason map[string]string        // prefix of the N/A reason
		detail map[string][]string      // substrings of the detail
	}{
		{
			name: "agent for users, resources, constraints",
			doc: `
schema: latch.policy/v1
actions:
  ops.run:
    effect: "run:{id}"
    resource: "host:{host}"
    rules:
      - when: { n_gte: 0 }
        decision: allow
      - decision: approve
authority:
  grants:
    - id: bots
      subject: { agent: "bot-*", user: "team:*" }
      actions: ["ops.*"]
      resources: ["host:*"]
      constraints: { n_lte: 5, zone_in: [a, b] }
      expires_at: "2030-01-01T00:00:00Z"
      delegable: true
`,
			status: map[string]verify.Status{"G1": verify.Pass, "G2": verify.Pass},
			detail: map[string][]string{
				"G3": {`"zone":"a"`},
				"G7": {"control with principal bot-verify/team:verify"},
				"G9": {"widened subject: refused authority_escalation on subject", "omitting subject: refused authority_escalation on subject",
					"widened resources: refused authority_escalation on resources", "omitting resources: refused authority_escalation on resources",
					"widened constraints.zone_in: refused", "as latch-verify-delegate/team:verify through it: ran"},
			},
		},
		{
			name: "an explicit resource when the action has no template",
			doc: `
schema: latch.policy/v1
actions:
  doc.delete:
    effect: "delete:{id}"
    decision: allow
authority:
  grants:
    - id: docs
      subject: { agent: "*" }
      actions: ["doc.delete"]
      resources: ["doc:**"]
`,
			status: map[string]verify.Status{"G1": verify.NotApplicable, "G2": verify.NotApplicable, "G8": verify.NotApplicable, "G9": verify.NotApplicable},
			reason: map[string]string{"G8": "no grant has an expires_at", "G9": "no grant is delegable"},
			detail: map[string][]string{
				// literal action patterns only: no grant can cover an unlisted name
				"G6": {"the authority section is left out of this scenario"},
				"G7": {"control with principal latch-verify:"},
			},
		},
		{
			name: "no grant covers what can run",
			doc: `
schema: latch.policy/v1
actions:
  pay.out:
    effect: "payout:{id}"
    decision: allow
authority:
  grants:
    - id: reports
      subject: { agent: "ops-*" }
      actions: ["reports.**"]
      expires_at: "2030-01-01T00:00:00Z"
      delegable: true
`,
			status: map[string]verify.Status{
				"G1": verify.NotApplicable, "G2": verify.NotApplicable, "G3": verify.NotApplicable, "G4": verify.NotApplicable,
				"G5": verify.NotApplicable, "G7": verify.NotApplicable, "G8": verify.NotApplicable, "G9": verify.NotApplicable,
				"G10": verify.NotApplicable, "L1": verify.NotApplicable,
			},
			reason: map[string]string{
				"G3": "no grant allows what the scenario needs: pay.out can decide allow, but no grant",
				"G7": "no grant allows what the scenario needs",
				"G8": "no grant with an expires_at allows an action the policy can run",
				"G9": "no delegable grant allows an action the policy can run",
			},
			detail: map[string][]string{"G6": {"unlisted reports.verify-unlisted-0 (as ops-verify"}},
		},
		{
			name: "an expired grant",
			doc: `
schema: latch.policy/v1
actions:
  pay.out:
    effect: "payout:{id}"
    decision: allow
authority:
  grants:
    - id: old
      subject: { agent: "latch-verify" }
      actions: ["pay.*"]
      expires_at: "2020-01-01T00:00:00Z"
      delegable: true
`,
			// The scenarios run at the wall clock, when the grant has expired; G8 moves the clock
			// to its expires_at, G9 to two days before it.
			status: map[string]verify.Status{
				"G1": verify.NotApplicable, "G2": verify.NotApplicable, "G3": verify.NotApplicable, "G4": verify.NotApplicable,
				"G5": verify.NotApplicable, "G7": verify.NotApplicable, "G10": verify.NotApplicable, "L1": verify.NotApplicable,
			},
			reason: map[string]string{"G3": "no grant allows what the scenario needs"},
			detail: map[string][]string{"G8": {"expires_at 2020-01-01T00:00:00Z"}, "G9": {"through it: ran"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep := run(t, &verify.Config{Policy: parse(t, tc.doc), Only: []string{"G1", "G2", "G3", "G5", "G6", "G7", "G8", "G9", "G10", "G11", "L1"}})
			t.Logf("\n%s", text(t, rep))
			for _, r := range rep.Results {
				want, ok := tc.status[r.ID]
				if !ok {
					want = verify.Pass
				}
				if r.Status != want {
					t.Errorf("%s = %s %q (%s), want %s", r.ID, r.Status, r.Reason, r.Detail, want)
				}
				if p, ok := tc.reason[r.ID]; ok && !strings.HasPrefix(r.Reason, p) {
					t.Errorf("%s reason = %q, want it to begin %q", r.ID, r.Reason, p)
				}
				for _, d := range tc.detail[r.ID] {
					if !strings.Contains(r.Detail, d) {
						t.Errorf("%s detail lacks %q: %s", r.ID, d, r.Detail)
					}
				}
			}
		})
	}
}

// TestList: the catalogue with its applicability agrees with what Run finds — the same
// guarantees N/A with the same reasons — without creating any scratch store; --only selects.
func TestList(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{readOnlyPolicy, fullPolicy} {
		pol := parse(t, doc)
		cat, err := verify.List(t.Context(), &verify.Config{Policy: pol, LatchHTTP: true})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		var b bytes.Buffer
		if err := cat.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		t.Logf("\n%s", b.String())
		if len(cat.Entries) != len(verify.IDs()) || cat.Applicable+cat.NotApplicable != len(cat.Entries) {
			t.Fatalf("%d entries (%d applicable, %d N/A), want %d", len(cat.Entries), cat.Applicable, cat.NotApplicable, len(verify.IDs()))
		}
		listed := map[string]string{}
		for i, e := range cat.Entries {
			if e.ID != verify.IDs()[i] {
				t.Errorf("entry %d is %s, want %s", i, e.ID, verify.IDs()[i])
			}
			if want := map[bool]string{true: verify.NumberingLatch, false: verify.NumberingShared}[strings.HasPrefix(e.ID, "L")]; e.Numbering != want {
				t.Errorf("%s numbering %q, want %q", e.ID, e.Numbering, want)
			}
			if !e.Applicable {
				listed[e.ID] = e.Reason
			}
		}
		if doc == fullPolicy {
			if len(listed) != 2 || listed["G13"] != naSQLiteClock || listed["G27"] != naNoPin {
				t.Errorf("full policy: N/A %v, want G13 (SQLite) and G27 (no pin) alone", listed)
			}
			continue
		}
		rep := run(t, &verify.Config{Policy: pol, LatchHTTP: true})
		ran := map[string]string{}
		for _, r := range rep.Results {
			if r.Status == verify.NotApplicable {
				ran[r.ID] = r.Reason
			}
		}
		if len(ran) == 0 {
			t.Fatal("the read-only policy left nothing N/A")
		}
		if diff := cmp.Diff(ran, listed); diff != "" {
			t.Errorf("List and Run disagree on N/A (-run +list):\n%s", diff)
		}
	}
	cat, err := verify.List(t.Context(), &verify.Config{Policy: parse(t, readOnlyPolicy), Only: []string{"l1,G3"}})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var b bytes.Buffer
	if err := cat.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Schema     string `json:"schema"`
		Guarantees []struct {
			ID         string `json:"id"`
			Numbering  string `json:"numbering"`
			Applicable bool   `json:"applicable"`
			Reason     string `json:"reason"`
		} `json:"guarantees"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("JSON: %v\n%s", err, b.String())
	}
	if got.Schema != verify.ListSchema || len(got.Guarantees) != 2 || got.Guarantees[0].ID != "G3" || got.Guarantees[1].ID != "L1" ||
		got.Guarantees[1].Numbering != "latch" || got.Guarantees[0].Applicable || got.Guarantees[0].Reason == "" {
		t.Errorf("JSON catalogue: %s", b.String())
	}
	_, err = verify.List(t.Context(), &verify.Config{Policy: parse(t, readOnlyPolicy), Only: []string{"G99"}})
	var ue *verify.UsageError
	if !errors.As(err, &ue) {
		t.Errorf("List --only G99 = %v, want a *UsageError", err)
	}
	// docs/verify.md's listing of the payments example without --latchhttp: every guarantee
	// applicable but G12, G22 and G24, with the reasons it prints.
	doc, err := os.ReadFile(filepath.Join("..", "..", "examples", "authority", "payments.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cat, err = verify.List(t.Context(), &verify.Config{Policy: parse(t, string(doc)), Now: paymentsEpoch})
	if err != nil {
		t.Fatalf("List payments: %v", err)
	}
	b.Reset()
	if err := cat.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"G12  byte written is ambiguous              N/A         no transport-level caller is configured: pass --latchhttp (Config.LatchHTTP) when your executors call their remotes through latchhttp\n",
		"L5   misspelt argument fails closed         applicable\n",
		"G22  held budget refuses next reserve       N/A         no grant and no action declares a budget\n",
		"G23  a failing scope provider refuses       applicable\n",
		"G24  grant refused off its task             N/A         no grant names a task\n",
		"G25  a hop narrows or it is refused         applicable\n",
		"G26  both receipts name one hop             applicable\n",
		"G27  a swapped upstream is denied           N/A         " + naNoPin + "\n",
		"38 guarantees: 33 applicable to this policy, 5 not applicable.\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("payments listing lacks %q:\n%s", want, b.String())
		}
	}
	// List refuses what Run refuses (checkConfig): no policy, a policy in observe mode.
	observe := parse(t, "schema: latch.policy/v1\nmode: observe\nactions:\n  a.b:\n    decision: allow\n")
	for name, cfg := range map[string]*verify.Config{"no policy": {}, "observe mode": {Policy: observe}} {
		if _, err := verify.List(t.Context(), cfg); !errors.As(err, &ue) {
			t.Errorf("List with %s = %v, want a *UsageError", name, err)
		}
	}
}

// TestNewGuaranteesHold runs the guarantees added with the reference numbering on the small
// policies the fault tests use, without faults: each passes where its fault makes it fail.
func TestNewGuaranteesHold(t *testing.T) {
	t.Parallel()
	tests := []struct {
		doc  string
		only []string
	}{
		{effectsPolicy, []string{"G12", "G14", "G16", "G20", "G21", "G28", "G31", "L2", "L3", "L4", "L5"}},
		{fullPolicy, []string{"G15", "L6"}},
		{failOpenPolicy, []string{"L5"}},
	}
	for _, tc := range tests {
		rep := run(t, &verify.Config{Policy: parse(t, tc.doc), Only: tc.only, LatchHTTP: true})
		if rep.Passed != len(tc.only) {
			t.Errorf("%v: passed %d of %d:\n%s", tc.only, rep.Passed, len(tc.only), text(t, rep))
		}
	}
}

// gatewayPolicy forwards the tools of one upstream, whose command does not exist: G12 must
// reach its own server instead, never the operator's upstream.
const gatewayPolicy = `
schema: latch.policy/v1
gateway:
  upstreams:
    pay:
      command: ["/nonexistent/latch-verify-payments-server"]
actions:
  mcp.pay.refund:
    effect: "refund:{order_id}"
    max_attempts: 3
    decision: allow
`

// TestG12Gateway: with the MCP gateway as the only transport-level caller, G12 calls a gateway
// tool through the gateway against an upstream of its own that drops the tools/call unanswered
// — ambiguous, and the re-sent call refused without reaching it — and passes; with the store
// recording ambiguous outcomes as failed it fails (not its control), and without a gateway it
// is N/A.
func TestG12Gateway(t *testing.T) {
	t.Parallel()
	rep := run(t, &verify.Config{Policy: parse(t, gatewayPolicy), Only: []string{"G12"}})
	r := byID(rep)["G12"]
	if r.Status != verify.Pass || r.Action != "mcp.pay.refund" || !strings.Contains(r.Detail, "dropped 1") ||
		!strings.Contains(r.Detail, "(record ambiguous)") {
		t.Fatalf("G12 through the gateway = %s %q (%s), want PASS on mcp.pay.refund", r.Status, r.Reason, r.Detail)
	}
	rep = run(t, verify.WithFaults(&verify.Config{Policy: parse(t, gatewayPolicy), Only: []string{"G12"}}, verify.FaultAmbiguousAsFailed))
	if r := byID(rep)["G12"]; r.Status != verify.Fail || r.Reason == "control failed" {
		t.Errorf("G12 through the gateway with %s = %s %q (%s), want FAIL", verify.FaultAmbiguousAsFailed, r.Status, r.Reason, r.Detail)
	}
	// The gateway example verifies whole: no guarantee fails, G12 passes through the gateway
	// (its upstream, `go run ./payments`, is never started).
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "gateway", "latch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rep = run(t, &verify.Config{Policy: parse(t, string(b))})
	if code := verify.ExitCode(rep, nil); code != verify.ExitPass || byID(rep)["G12"].Status != verify.Pass {
		t.Errorf("verify on examples/gateway/latch.yaml: exit %d, G12 %s:\n%s", code, byID(rep)["G12"].Status, text(t, rep))
	}
	rep = run(t, &verify.Config{Policy: parse(t, strings.Replace(gatewayPolicy, "mcp.pay.refund", "pay.refund", 1)), Only: []string{"G12"}})
	if r := byID(rep)["G12"]; r.Status != verify.NotApplicable || !strings.Contains(r.Reason, "gateway tool") {
		t.Errorf("G12 with no gateway tool's action = %s %q, want N/A", r.Status, r.Reason)
	}
}

// pinnedPolicy pins the send tool of a mail upstream (whose URL G27 replaces with its own
// server, never reaching this one) and allows it.
const pinnedPolicy = `
schema: latch.policy/v1
gateway:
  upstreams:
    mail:
      url: https://mail.invalid/mcp
      pin:
        tool_schema_sha256:
          send: "sha256:0000000000000000000000000000000000000000000000000000000000000000"
        tls_cert_sha256: ["sha256:1111111111111111111111111111111111111111111111111111111111111111"]
actions:
  mcp.mail.send:
    effect: "send:{message_id}"
    decision: allow
`

// TestG27PinnedUpstream: G27 calls a pinned gateway tool through the gateway against a server of
// its own, redefines the tool there, and passes when the call is then refused upstream_mismatch
// without reaching it; with the tool's pin dropped (pin_ignored) the swapped tool is called and
// it fails (not its control); without a pin it is N/A, in the list too.
func TestG27PinnedUpstream(t *testing.T) {
	t.Parallel()
	rep := run(t, &verify.Config{Policy: parse(t, pinnedPolicy), Only: []string{"G27"}})
	r := byID(rep)["G27"]
	if r.Status != verify.Pass || r.Action != "mcp.mail.send" || !strings.Contains(r.Detail, `reason "upstream_mismatch"`) ||
		!strings.Contains(r.Detail, "reaching the upstream 0 time(s)") {
		t.Fatalf("G27 = %s %q (%s), want PASS on mcp.mail.send", r.Status, r.Reason, r.Detail)
	}
	rep = run(t, verify.WithFaults(&verify.Config{Policy: parse(t, pinnedPolicy), Only: []string{"G27"}}, verify.FaultPinIgnored))
	if r := byID(rep)["G27"]; r.Status != verify.Fail || r.Reason != "the swapped upstream was called" {
		t.Errorf("G27 with %s = %s %q (%s), want FAIL: the swapped upstream was called", verify.FaultPinIgnored, r.Status, r.Reason, r.Detail)
	}
	unpinned := parse(t, gatewayPolicy)
	rep = run(t, &verify.Config{Policy: unpinned, Only: []string{"G27"}})
	if r := byID(rep)["G27"]; r.Status != verify.NotApplicable || !strings.Contains(r.Reason, "pin.tool_schema_sha256") {
		t.Errorf("G27 without a pin = %s %q, want N/A", r.Status, r.Reason)
	}
	for doc, want := range map[string]string{pinnedPolicy: "G27  a swapped upstream is denied", gatewayPolicy: "N/A"} {
		cat, err := verify.List(t.Context(), &verify.Config{Policy: parse(t, doc), Only: []string{"G27"}})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := cat.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), want) || (doc == pinnedPolicy) != (cat.Applicable == 1) {
			t.Errorf("List of G27 = %q, want %q", b.String(), want)
		}
	}
}

// TestG31EverySchema: G31's chain holds documents of every receipt schema — two v1, one v2,
// one v3, the rest current — and verifies whole; a verifier that knows only the current schema fails it,
// under the fault's name and under its earlier name.
func TestG31EverySchema(t *testing.T) {
	t.Parallel()
	rep := run(t, &verify.Config{Policy: parse(t, effectsPolicy), Only: []string{"G31"}})
	r := byID(rep)["G31"]
	if r.Status != verify.Pass || !strings.Contains(r.Detail, "2 latch.receipt/v1 + 1 latch.receipt/v2 + 1 latch.receipt/v3 + ") ||
		!strings.Contains(r.Detail, "(0 unparsable, 0 not the version written): ok true") {
		t.Errorf("G31 = %s %q (%s), want PASS over v1, v2, v3 and v4 documents", r.Status, r.Reason, r.Detail)
	}
	for _, fault := range []string{verify.FaultSchemaCurrentOnly, verify.FaultSchemaV2Only} {
		rep := run(t, verify.WithFaults(&verify.Config{Policy: parse(t, effectsPolicy), Only: []string{"G31"}}, fault))
		if r := byID(rep)["G31"]; r.Status != verify.Fail || r.Reason == "control failed" {
			t.Errorf("G31 with %s = %s %q (%s), want FAIL", fault, r.Status, r.Reason, r.Detail)
		}
	}
}

// envelopePolicy uses budgets (a grant's on an argument, an action's own per principal) and a
// grant bound to tasks, and no scopes section (G23 makes its own provider).
func envelopePolicy(t *testing.T) *policy.Policy {
	t.Helper()
	p, err := policy.Load(filepath.Join("testdata", "envelope.yaml"))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return p
}

// envelopeIDs are the guarantees of the envelope.
var envelopeIDs = []string{"G22", "G23", "G24"}

// TestEnvelope runs G22–G24 on the envelope policy: all three pass, G22 exhausting the grant's
// budget (amounts of 20000, the most the allow rule permits, five calls) and the action's own
// (five calls, per principal), each refused from another process while the fifth is ambiguous
// and admitted once it is resolved failed.
func TestEnvelope(t *testing.T) {
	t.Parallel()
	rep := run(t, &verify.Config{Policy: envelopePolicy(t), Only: envelopeIDs})
	t.Logf("\n%s", text(t, rep))
	got := byID(rep)
	for _, id := range envelopeIDs {
		if r := got[id]; r.Status != verify.Pass {
			t.Errorf("%s = %s %q (%s), want PASS", id, r.Status, r.Reason, r.Detail)
		}
	}
	for id, want := range map[string][]string{
		"G22": {"grant payouts's budget amount ≤ 100000 per P1D", "payouts amount ≤ 100000 per P1D (20000 a call)", "k = 5",
			"racers: 1 refused budget_exhausted", "ledger of payouts: 100000 held, 0 released",
			"action deploy.release's own budget count ≤ 5 per P1D per principal", "action:deploy.release:principal:ci-verify/verify",
			"ledger of payouts: 100000 held, 20000 released"},
		"G23": {"the provider errors (asked 1): refused scope_unavailable, executions: 0, record absent",
			"the provider panics (asked 1): refused scope_unavailable", "the provider never answers (asked 1): refused scope_unavailable",
			"on resource latch-verify:scope as ci-verify/verify", "control, the provider answering a scope holding latch-verify:scope: ran, executions: 1, receipt scope_hash \"sha256:"},
		"G24": {"grant releases names tasks release:*", "on task latch-verify-off-task, which it does not name: denied no_authority on tasks, executions: 0",
			"with no task: denied no_authority on tasks, executions: 0", "control on task release:verify, which it names: ran (receipt task \"release:verify\")"},
	} {
		for _, w := range want {
			if !strings.Contains(got[id].Detail, w) {
				t.Errorf("%s detail lacks %q:\n%s", id, w, got[id].Detail)
			}
		}
	}
}

// TestEnvelopeFaults: each envelope fault makes exactly its guarantee fail — not its control —
// and leaves the other two passing.
func TestEnvelopeFaults(t *testing.T) {
	t.Parallel()
	for fault, target := range map[string]string{
		verify.FaultBudgetUnchecked: "G22",
		verify.FaultScopeFailsOpen:  "G23",
		verify.FaultTasksIgnored:    "G24",
	} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			rep := run(t, verify.WithFaults(&verify.Config{Policy: envelopePolicy(t), Only: envelopeIDs}, fault))
			for _, r := range rep.Results {
				switch {
				case r.ID == target && (r.Status != verify.Fail || r.Reason == "control failed"):
					t.Errorf("%s with %s = %s %q (%s), want FAIL", r.ID, fault, r.Status, r.Reason, r.Detail)
				case r.ID != target && r.Status != verify.Pass:
					t.Errorf("%s with %s = %s %q (%s), want PASS", r.ID, fault, r.Status, r.Reason, r.Detail)
				}
			}
		})
	}
}

// TestG22Shapes: G22 on an action that only decides approve (each call's approval granted while
// the budget has room; the refused call spends nothing, so its approval is presented again once
// the budget is released), and the budgets it cannot exhaust, N/A with the reason.
func TestG22Shapes(t *testing.T) {
	t.Parallel()
	const head = "schema: latch.policy/v1\nactions:\n  wire.send:\n    effect: \"wire:{wire_id}\"\n"
	tests := []struct {
		name, doc string
		status    verify.Status
		want      string // in the detail (PASS) or the reason (N/A)
	}{
		{"approve", head + "    budgets: [{ metric: count, limit: 2, window: PT1H, per: agent }]\n    decision: approve\n",
			verify.Pass, "k = 2; call 1 committed; call 2 (wire:verify-1): executor acted then errored: ambiguous"},
		{"limit 0", head + "    budgets: [{ metric: count, limit: 0, window: PT1H, per: agent }]\n    decision: allow\n",
			verify.NotApplicable, "no budget can be exhausted by calls the policy can run: action wire.send's own budget count ≤ 0 per PT1H per agent: its limit is 0"},
		{"too many calls", head + "    budgets: [{ metric: count, limit: 65, window: PT1H, per: agent }]\n    decision: allow\n",
			verify.NotApplicable, "filling it takes more than 64 calls of wire.send"},
		{"denied", head + "    budgets: [{ metric: count, limit: 2, window: PT1H, per: agent }]\n    decision: deny\n",
			verify.NotApplicable, "the action cannot run (allow or approve)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep := run(t, &verify.Config{Policy: parse(t, tc.doc), Only: []string{"G22"}})
			r := byID(rep)["G22"]
			got := r.Detail
			if tc.status == verify.NotApplicable {
				got = r.Reason
			}
			if r.Status != tc.status || !strings.Contains(got, tc.want) {
				t.Errorf("G22 = %s %q (%s), want %s with %q", r.Status, r.Reason, r.Detail, tc.status, tc.want)
			}
			if tc.status != verify.Pass {
				return
			}
			rep = run(t, verify.WithFaults(&verify.Config{Policy: parse(t, tc.doc), Only: []string{"G22"}}, verify.FaultBudgetUnchecked))
			if r := byID(rep)["G22"]; r.Status != verify.Fail || r.Reason != "the call past the held budget executed" {
				t.Errorf("G22 with %s = %s %q (%s), want FAIL", verify.FaultBudgetUnchecked, r.Status, r.Reason, r.Detail)
			}
		})
	}
}

// TestRetentionSection: a policy with a retention section verifies; the scenario policy keeps
// the section (it stopped every run with "the scenario policy differs" before).
func TestRetentionSection(t *testing.T) {
	t.Parallel()
	doc := "schema: latch.policy/v1\nretention:\n  settled_effects: 90d\nactions:\n  a.b:\n    effect: \"a:{id}\"\n    decision: allow\n"
	rep := run(t, &verify.Config{Policy: parse(t, doc), Only: []string{"G3", "G29"}})
	if rep.Passed != 2 {
		t.Errorf("passed %d of 2:\n%s", rep.Passed, text(t, rep))
	}
}

// TestRedactedAndEditableArguments: a policy whose arguments say redact: or editable: verifies;
// the scenario policy keeps both (every run stopped with "the scenario policy differs", exit 3,
// before: the re-encoded arguments lost them).
func TestRedactedAndEditableArguments(t *testing.T) {
	t.Parallel()
	doc := `schema: latch.policy/v1
actions:
  pay.out:
    effect: "payout:{id}"
    arguments:
      id: { type: string }
      amount: { type: integer, min: 1, editable: { decrease: true, min: 100 } }
      iban: { type: string, redact: last4 }
      note: { type: string, redact: true }
      ref: { type: string, redact: hash }
      payee_token: { type: string, redact: false }
    rules:
      - when: { amount_lte: 1000 }
        decision: allow
      - decision: approve
`
	rep := run(t, &verify.Config{Policy: parse(t, doc), Only: []string{"G1", "G3"}})
	if rep.Passed != 2 {
		t.Errorf("passed %d of 2:\n%s", rep.Passed, text(t, rep))
	}
}
