package verify

import (
	"errors"
	"testing"
	"time"

	"github.com/latchkit/latch/authority"
	"github.com/latchkit/latch/policy"
)

// TestProbesAreRefused: every probe G9 builds, for a parent constraining every dimension with
// every operator, is refused by authority.CheckDelegation naming the dimension it changed, and
// the narrowed base child is accepted — so a G9 PASS depends on the pipeline, not on the probes.
func TestProbesAreRefused(t *testing.T) {
	t.Parallel()
	p := parsePolicy(t, `
schema: latch.policy/v1
actions:
  ops.run:
    decision: allow
authority:
  grants:
    - id: parent
      subject: { agent: "bot-*", user: "team:*" }
      actions: ["ops.*"]
      resources: ["host:*"]
      constraints:
        a_lte: 10
        b_lt: 10
        c_gte: 1
        d_gt: 1
        e_eq: "x"
        f_eq: 3
        g_eq: true
        h_neq: "y"
        i_in: [EUR, USD]
        j_in: [1, 2]
        k_not_in: [blocked, banned]
        l_not_in: [7]
        m_prefix: "acme/"
        n_suffix: "-svc"
      environments: [production]
      expires_at: "2030-01-01T00:00:00Z"
      delegable: true
`)
	parent := p.Authority.Grants[0]
	now := time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)
	base := policy.Grant{
		Subject:      policy.Subject{Agent: delegateAgent, User: "team:verify"},
		Actions:      []string{"ops.run"},
		Resources:    []string{"host:verify"},
		Constraints:  parent.Constraints,
		Environments: parent.Environments,
		ExpiresAt:    now.Add(24 * time.Hour),
	}
	creator := authority.Request{Agent: "bot-verify", User: "team:verify", Now: now}
	if err := authority.CheckDelegation(p.Authority, nil, "parent", &base, creator); err != nil {
		t.Fatalf("the narrowed base child is refused: %v", err)
	}
	probes, skipped := probesFor(parent, base)
	if len(skipped) != 0 {
		t.Errorf("not probed: %v", skipped)
	}
	// subject ×2, actions, resources ×2, 14 constraints ×2, environments ×2, expires_at ×2
	if want := 2 + 1 + 2 + 28 + 2 + 2; len(probes) != want {
		t.Errorf("%d probes, want %d", len(probes), want)
	}
	for _, pb := range probes {
		err := authority.CheckDelegation(p.Authority, nil, "parent", &pb.grant, creator)
		var ae *authority.Error
		if !errors.As(err, &ae) || ae.Reason != authority.ReasonEscalation || ae.Dimension != pb.dim {
			t.Errorf("%s child on %s: CheckDelegation = %v, want authority_escalation on %s", pb.kind, pb.dim, err, pb.dim)
		}
	}
}
