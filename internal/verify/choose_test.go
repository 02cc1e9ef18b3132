package verify

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/latchkit/latch/policy"
)

func parsePolicy(t *testing.T, doc string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

// TestChoose: the argument search finds, for each kind of condition, arguments that make the
// intended rule fire (not an earlier one), that render the templates, and distinct keys.
func TestChoose(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		actions    string // the actions: section
		want       policy.Decision
		needEffect bool
		n          int
		action     string // "" when no pick is expected
		reason     string
		overrides  int // variants that needed an explicit effect template
	}{
		{
			name: "range behind an earlier range",
			actions: `
  billing.charge:
    effect: "charge:{invoice_id}"
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - when: { amount_lte: 500000 }
        decision: approve`,
			want: policy.Approve, n: 3, action: "billing.charge", reason: "rule[1]",
		},
		{
			name: "in behind an earlier eq",
			actions: `
  deploy.run:
    effect: "deploy:{region}:{build}"
    rules:
      - when: { region_eq: "eu" }
        decision: deny
      - when: { region_in: ["eu", "us"] }
        decision: allow`,
			want: policy.Allow, needEffect: true, n: 9, action: "deploy.run", reason: "rule[1]",
		},
		{
			name: "prefix and suffix",
			actions: `
  git.merge:
    effect: "merge:{repo}"
    rules:
      - when: { repo_prefix: "acme/", repo_suffix: "-svc" }
        decision: allow`,
			want: policy.Allow, needEffect: true, n: 9, action: "git.merge", reason: "rule[0]",
		},
		{
			name: "neq and not_in",
			actions: `
  job.run:
    effect: "job:{id}"
    rules:
      - when: { env_neq: "prod", id_not_in: [0, 1, 2], dry_eq: false }
        decision: allow`,
			want: policy.Allow, needEffect: true, n: 4, action: "job.run", reason: "rule[0]",
		},
		{
			name: "narrow window pads with explicit keys",
			actions: `
  seat.book:
    effect: "seat:{n}"
    rules:
      - when: { n_gt: 10, n_lt: 13 }
        decision: allow`,
			want: policy.Allow, needEffect: true, n: 4, action: "seat.book", reason: "rule[0]", overrides: 2,
		},
		{
			name: "constant effect key",
			actions: `
  deploy.prod:
    effect: "deploy:prod"
    decision: allow`,
			want: policy.Allow, needEffect: true, n: 3, action: "deploy.prod", reason: "decision", overrides: 2,
		},
		{
			name: "effect from the resource, no resource template",
			actions: `
  doc.delete:
    effect: "delete:{resource}"
    decision: allow`,
			want: policy.Allow, needEffect: true, n: 3, action: "doc.delete", reason: "decision",
		},
		{
			name: "first action by name",
			actions: `
  b.second:
    effect: "b:{id}"
    decision: allow
  a.first:
    effect: "a:{id}"
    decision: allow`,
			want: policy.Allow, needEffect: true, n: 1, action: "a.first", reason: "decision",
		},
		{
			name: "object equality",
			actions: `
  cfg.set:
    rules:
      - when: { value_eq: { mode: "fast", level: 3 } }
        decision: approve`,
			want: policy.Approve, n: 1, action: "cfg.set", reason: "rule[0]",
		},
		{
			name: "unsatisfiable range",
			actions: `
  x.y:
    effect: "x:{n}"
    rules:
      - when: { n_gt: 5, n_lt: 3 }
        decision: allow`,
			want: policy.Allow, needEffect: true, n: 1,
		},
		{
			name: "placeholder that cannot render",
			actions: `
  x.y:
    effect: "x:{flag}"
    rules:
      - when: { flag_eq: true }
        decision: allow`,
			want: policy.Allow, needEffect: true, n: 1,
		},
		{
			name: "shadowed rule",
			actions: `
  x.y:
    effect: "x:{id}"
    rules:
      - decision: deny
      - decision: allow`,
			want: policy.Allow, needEffect: true, n: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := parsePolicy(t, "schema: latch.policy/v1\nactions:"+tc.actions+"\n")
			pk, why := choose(p, tc.want, chooseOpts{needEffect: tc.needEffect, n: tc.n})
			if tc.action == "" {
				if pk != nil {
					t.Fatalf("choose = %s %s %v, want none", pk.Action, pk.Reason, pk.variants[0].Args)
				}
				if !strings.Contains(why, "no arguments found within the search bound") {
					t.Errorf("choose note = %q", why)
				}
				return
			}
			if pk == nil {
				t.Fatalf("choose = nil (%s), want %s", why, tc.action)
			}
			if pk.Action != tc.action || pk.Reason != tc.reason {
				t.Fatalf("choose = %s %s, want %s %s", pk.Action, pk.Reason, tc.action, tc.reason)
			}
			if len(pk.variants) < tc.n {
				t.Fatalf("%d variants, want %d", len(pk.variants), tc.n)
			}
			keys := map[string]bool{}
			overrides := 0
			for _, v := range pk.variants {
				ev := p.Evaluate(pk.Action, v.Args)
				if ev.Decision != tc.want || ev.Reason != tc.reason {
					t.Errorf("variant %v evaluates %s %s, want %s %s", v.Args, ev.Decision, ev.Reason, tc.want, tc.reason)
				}
				if v.Effect != "" {
					overrides++
				}
				if pk.act.Effect != nil {
					if v.Key == "" || keys[v.Key] {
						t.Errorf("variant %v has key %q, not distinct", v.Args, v.Key)
					}
					keys[v.Key] = true
				}
				if _, err := json.Marshal(v.Args); err != nil {
					t.Errorf("variant %v does not encode: %v", v.Args, err)
				}
			}
			if overrides != tc.overrides {
				t.Errorf("%d variants with an explicit effect template, want %d", overrides, tc.overrides)
			}
		})
	}
}

// TestMutate: the mutation G1 presents an approval for still needs approval, and differs.
func TestMutate(t *testing.T) {
	t.Parallel()
	p := parsePolicy(t, `
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - when: { amount_lte: 500000 }
        decision: approve
  fixed.thing:
    rules:
      - when: { kind_eq: "only" }
        decision: approve
`)
	for name, rule := range map[string]int{"billing.charge": 1, "fixed.thing": 0} {
		pk := synthesize(p, name, rule, 1)
		if pk == nil {
			t.Fatalf("synthesize %s = nil", name)
		}
		base := pk.variants[0]
		m, desc, ok := pk.mutate(p, base)
		if !ok {
			t.Fatalf("mutate %s: none", name)
		}
		a, _ := json.Marshal(base.Args)
		b, _ := json.Marshal(m.Args)
		if string(a) == string(b) {
			t.Errorf("mutate %s: %s unchanged (%s)", name, a, desc)
		}
		if ev := p.Evaluate(name, m.Args); ev.Decision != policy.Approve {
			t.Errorf("mutate %s: %s decides %s, want approve", name, b, ev.Decision)
		}
		t.Logf("%s: %s → %s (%s)", name, a, b, desc)
	}
}

// TestScenarioPolicy: the re-serialized policy the scenarios and the racers load is the
// operator's, authority section included (or left out on request), in enforce mode.
func TestScenarioPolicy(t *testing.T) {
	t.Parallel()
	p := parsePolicy(t, `
schema: latch.policy/v1
environment: staging
version: "7"
actions:
  a.b:
    effect: "a:{{literal}}:{id}"
    resource: "thing:{id}"
    lease: 90s
    approval_ttl: 1h30m
    max_attempts: 2
    rules:
      - when: { id_prefix: "x<&>", n_in: [1, "1", true, null], o_eq: { k: [1, { z: "é\"\\" }] } }
        decision: approve
      - when: { n_not_in: [3], s_neq: "q" }
        decision: allow
      - decision: deny
  c.d:
    decision: deny
authority:
  max_delegation_depth: 2
  grants:
    - id: g1
      subject: { agent: "w" }
      actions: ["a.*"]
    - id: g2
      subject: { agent: "x-*", user: "u:*" }
      actions: ["a.b", "c.**"]
      resources: ["thing:*"]
      constraints: { n_lte: 5, s_in: ["q", 1, true], t_prefix: "p" }
      environments: [prod, staging]
      tasks: ["ticket:*", "river:job:**"]
      expires_at: "2030-01-01T01:00:00.5+01:00"
      delegable: true
      budgets: [{ metric: count, limit: 5, window: P1D }, { metric: n, limit: 50, window: PT1H }]
  break_glass:
    - id: sev1
      subject: { agent: "oncall-*" }
      actions: ["a.**"]
      resources: ["thing:*"]
      max_ttl: 90m
`)
	sp, err := newScenarioPolicy(p, nil, true)
	if err != nil {
		t.Fatalf("newScenarioPolicy: %v", err)
	}
	if sp.pol.Authority == nil || len(sp.pol.Authority.Grants) != 2 || sp.pol.Mode != policy.ModeEnforce || sp.pol.Version != "7" {
		t.Errorf("scenario policy: authority %v, mode %s, version %q", sp.pol.Authority, sp.pol.Mode, sp.pol.Version)
	}
	if sp.pol.Hash != p.Hash {
		t.Errorf("scenario policy hash %s, want the operator's %s (enforce mode, same document)", sp.pol.Hash, p.Hash)
	}
	bare, err := newScenarioPolicy(p, nil, false)
	if err != nil {
		t.Fatalf("newScenarioPolicy without authority: %v", err)
	}
	if bare.pol.Authority != nil {
		t.Errorf("scenario policy without authority has %v", bare.pol.Authority)
	}
	again, err := policy.Parse("again.yaml", sp.doc)
	if err != nil || again.Hash != sp.pol.Hash {
		t.Errorf("re-parse: %v, hash %s, want %s", err, again.Hash, sp.pol.Hash)
	}
	extra, err := newScenarioPolicy(p, map[string]policy.Decision{"verify.unlisted.0": policy.Allow}, true)
	if err != nil {
		t.Fatalf("newScenarioPolicy with extra: %v", err)
	}
	if ev := extra.pol.Evaluate("verify.unlisted.0", nil); ev.Decision != policy.Allow {
		t.Errorf("extra action decides %s, want allow", ev.Decision)
	}
}
