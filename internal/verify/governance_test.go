package verify

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// governancePolicies are the shapes the governance guarantees are graded on: an allowed action
// with an effect, an action that only ever asks for approval (with an authority section, so the
// scenario's principal is a grant's), and a policy that can run nothing.
var governancePolicies = map[string]string{
	"allow": `
schema: latch.policy/v1
actions:
  deploy.release:
    effect: "release:{service}:{version}"
    decision: allow
`,
	"approve": `
schema: latch.policy/v1
approvers:
  roles:
    leads: [alice, bob]
  policy_change: { roles: [leads], required: 2 }
actions:
  payments.payout:
    effect: "payout:{payout_id}"
    decision: approve
    approvers: { roles: [leads], required: 2 }
authority:
  grants:
    - id: payouts
      subject: { agent: "payout-bot-*", user: "*" }
      actions: ["payments.*"]
`,
	// A precondition entry naming a state service that is not there: verify never asks it.
	"precondition": `
schema: latch.policy/v1
approvers:
  roles:
    leads: [alice, bob]
actions:
  invoices.void:
    effect: "void:{invoice_id}"
    precondition: { url: "http://127.0.0.1:1/latch-verify-never-asked", recheck: always }
    rules:
      - when: { amount_lte: 100 }
        decision: allow
      - decision: approve
    approvers: { roles: [leads] }
`,
	"deny": `
schema: latch.policy/v1
actions:
  admin.wipe:
    decision: deny
`,
}

// governanceBackends are the store URLs the governance guarantees are graded on: SQLite, and
// the test server's Postgres when there is one.
func governanceBackends(t *testing.T) map[string]string {
	t.Helper()
	backends := map[string]string{"sqlite": ""}
	if os.Getenv("LATCH_TEST_POSTGRES_URL") != "" || os.Getenv("LATCH_REQUIRE_POSTGRES") == "1" {
		backends["postgres"] = postgresURL(t)
	} else {
		t.Log("LATCH_TEST_POSTGRES_URL is unset: graded on SQLite only")
	}
	return backends
}

// runGoverned runs the guarantees only on the policy named, with the faults given.
func runGoverned(t *testing.T, storeURL, policyName string, only []string, faults ...string) map[string]Result {
	t.Helper()
	rep, err := Run(t.Context(), &Config{Policy: parsePolicy(t, governancePolicies[policyName]), StoreURL: storeURL, Only: only, faults: faults})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var b bytes.Buffer
	rep.WriteText(&b)
	t.Logf("%s with faults %v:\n%s", policyName, faults, b.String())
	out := map[string]Result{}
	for _, r := range rep.Results {
		out[r.ID] = r
	}
	return out
}

// TestG20RevocationFeed: on both backends, for an allowed and an approved action, a token whose
// jti the feed lists is refused credential_revoked a day before its exp, executing and writing
// nothing, while the token before the revocation and an unrevoked one run; a verifier behind a
// token cache (credential_cached) lets the revoked token run, and G20 fails on the guarantee,
// not its control. A policy that can run nothing is N/A.
func TestG20RevocationFeed(t *testing.T) {
	t.Parallel()
	for backend, u := range governanceBackends(t) {
		for _, pol := range []string{"allow", "approve"} {
			t.Run(backend+"/"+pol, func(t *testing.T) {
				t.Parallel()
				r := runGoverned(t, u, pol, []string{"G20"})["G20"]
				if r.Status != Pass {
					t.Fatalf("G20 = %s %q (%s), want PASS", r.Status, r.Reason, r.Detail)
				}
				for _, want := range []string{"verify's own issuer and feed, not yours", ": refused credential_revoked, executions: 0", "24h0m0s before its exp"} {
					if !strings.Contains(r.Detail, want) {
						t.Errorf("G20 detail lacks %q: %s", want, r.Detail)
					}
				}
				r = runGoverned(t, u, pol, []string{"G20"}, faultCredentialCached)["G20"]
				if r.Status != Fail || r.Reason != "the call with the revoked credential executed" {
					t.Errorf("G20 with %s = %s %q (%s), want FAIL on the revoked call", faultCredentialCached, r.Status, r.Reason, r.Detail)
				}
			})
		}
	}
	r := runGoverned(t, "", "deny", []string{"G20"})["G20"]
	if r.Status != NotApplicable || r.Reason != naNoRunnable {
		t.Errorf("G20 on a policy that runs nothing = %s %q, want N/A %q", r.Status, r.Reason, naNoRunnable)
	}
}

// TestG13ClockSkew: on Postgres, a host clock 5s ahead at open and one 5s behind when a lease
// lapses are each named by one clock_skew_detected event, while agreeing clocks record none and
// the lapse is decided as without skew; a threshold in the wrong unit (5m) misses both, and G13
// fails on the guarantee, not its control. On SQLite, one clock: N/A.
func TestG13ClockSkew(t *testing.T) {
	t.Parallel()
	r := runGoverned(t, "", "deny", []string{"G13"})["G13"]
	want := "the sqlite backend has no clock of its own: the store reads the host's clock only, so there is no second clock to disagree with"
	if r.Status != NotApplicable || r.Reason != want {
		t.Errorf("G13 on SQLite = %s %q, want N/A %q", r.Status, r.Reason, want)
	}
	u := postgresURL(t)
	// Graded on every policy, the one that runs nothing included: the store is what is graded.
	for _, pol := range []string{"deny", "allow"} {
		r := runGoverned(t, u, pol, []string{"G13"})["G13"]
		if r.Status != Pass {
			t.Fatalf("G13 on Postgres (%s) = %s %q (%s), want PASS", pol, r.Status, r.Reason, r.Detail)
		}
		for _, want := range []string{"clock_skew_detected where open, skew_ms ", "clock_skew_detected where lease, skew_ms -", "clocks agreeing: no clock_skew_detected event at open"} {
			if !strings.Contains(r.Detail, want) {
				t.Errorf("G13 detail lacks %q: %s", want, r.Detail)
			}
		}
	}
	r = runGoverned(t, u, "deny", []string{"G13"}, faultSkewThresholdUnit)["G13"]
	if r.Status != Fail || r.Reason == controlFailedReason {
		t.Errorf("G13 with %s = %s %q (%s), want FAIL on the guarantee", faultSkewThresholdUnit, r.Status, r.Reason, r.Detail)
	}
	cat, err := List(t.Context(), &Config{Policy: parsePolicy(t, governancePolicies["deny"]), StoreURL: u, Only: []string{"G13"}})
	if err != nil || len(cat.Entries) != 1 || !cat.Entries[0].Applicable {
		t.Errorf("List on Postgres: %+v, %v; want G13 applicable", cat, err)
	}
	cat, err = List(t.Context(), &Config{Policy: parsePolicy(t, governancePolicies["deny"]), Only: []string{"G13"}})
	if err != nil || len(cat.Entries) != 1 || cat.Entries[0].Applicable || cat.Entries[0].Reason != want {
		t.Errorf("List on SQLite: %+v, %v; want G13 N/A %q", cat, err, want)
	}
}

// TestG16Precondition: on both backends, an approval granted on a state that then moves is
// refused precondition_changed with nothing executed or reserved and the approval left granted,
// and spent once the state is back; the unchanged control commits. A provider answering from
// its first read (precondition_cached) lets the moved call run, and G16 fails on the guarantee.
// A policy where nothing reaches approve is N/A.
func TestG16Precondition(t *testing.T) {
	t.Parallel()
	for backend, u := range governanceBackends(t) {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			r := runGoverned(t, u, "approve", []string{"G16"})["G16"]
			if r.Status != Pass {
				t.Fatalf("G16 = %s %q (%s), want PASS", r.Status, r.Reason, r.Detail)
			}
			for _, want := range []string{"presented: refused precondition_changed (captured sha256:", "(provider asked again: true), executions: 0, record absent, approval granted", "presented again: ran, executions: 1"} {
				if !strings.Contains(r.Detail, want) {
					t.Errorf("G16 detail lacks %q: %s", want, r.Detail)
				}
			}
			r = runGoverned(t, u, "approve", []string{"G16"}, faultPreconditionCached)["G16"]
			if r.Status != Fail || r.Reason != "the call whose precondition moved executed" {
				t.Errorf("G16 with %s = %s %q (%s), want FAIL on the moved call", faultPreconditionCached, r.Status, r.Reason, r.Detail)
			}
		})
	}
	r := runGoverned(t, "", "allow", []string{"G16"})["G16"]
	if r.Status != NotApplicable || r.Reason != naNoApprove {
		t.Errorf("G16 on a policy without approve = %s %q, want N/A %q", r.Status, r.Reason, naNoApprove)
	}
}

// TestPreconditionEntryNeverAsked: a policy whose action declares a precondition service runs
// the catalogue's scenarios without asking it (the scenario policy leaves the entry out; G16
// gives its calls a provider of its own): the service's port is closed, so a scenario that
// asked it would be refused precondition_unavailable and fail its control.
func TestPreconditionEntryNeverAsked(t *testing.T) {
	t.Parallel()
	only := []string{"G1", "G2", "G3", "G7", "G16", "L1"}
	got := runGoverned(t, "", "precondition", only)
	for _, id := range only {
		if r := got[id]; r.Status != Pass {
			t.Errorf("%s = %s %q (%s), want PASS", id, r.Status, r.Reason, r.Detail)
		}
	}
}

// TestG21ApprovedPolicy: on both backends and every policy shape (one that runs nothing
// included), a guard requiring an approved policy refuses the call policy_unapproved with
// nothing executed, reserved or asked, and, once the proposal is granted (two leads, where the
// policy_change rule says so), the same running guard decides the call under the policy. A guard
// opened without the requirement (policy_approval_unrequired) lets the first call decide, and
// G21 fails on the guarantee.
func TestG21ApprovedPolicy(t *testing.T) {
	t.Parallel()
	for backend, u := range governanceBackends(t) {
		for _, pol := range []string{"allow", "approve", "deny"} {
			t.Run(backend+"/"+pol, func(t *testing.T) {
				t.Parallel()
				r := runGoverned(t, u, pol, []string{"G21"})["G21"]
				if r.Status != Pass {
					t.Fatalf("G21 = %s %q (%s), want PASS", r.Status, r.Reason, r.Detail)
				}
				want := map[string]string{"allow": "then {", "approve": "then {", "deny": "refused unknown_action, executions: 0"}[pol]
				granted := map[string]string{"allow": "granted by 1 approver(s)", "approve": "granted by 2 approver(s)", "deny": "granted by 1 approver(s)"}[pol]
				for _, w := range []string{": refused policy_unapproved, executions: 0", want, granted} {
					if !strings.Contains(r.Detail, w) {
						t.Errorf("G21 detail lacks %q: %s", w, r.Detail)
					}
				}
				r = runGoverned(t, u, pol, []string{"G21"}, faultPolicyApprovalUnrequired)["G21"]
				if r.Status != Fail || r.Reason == controlFailedReason {
					t.Errorf("G21 with %s = %s %q (%s), want FAIL on the guarantee", faultPolicyApprovalUnrequired, r.Status, r.Reason, r.Detail)
				}
			})
		}
	}
}
