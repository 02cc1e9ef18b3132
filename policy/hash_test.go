package policy

import (
	"regexp"
	"strings"
	"testing"

	"github.com/latchkit/latch/canon"
)

const hashBase = `schema: latch.policy/v1
environment: production
version: "1"
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    resource: "invoice:{invoice_id}"
    lease: 5m
    approval_ttl: 15m
    max_attempts: 3
    rules:
      - when: {amount_gte: 0, amount_lte: 50000}
        decision: allow
      - when: {currency_in: [EUR, USD], meta_eq: {tier: gold}}
        decision: approve
      - decision: deny
  git.merge:
    effect: "merge:{repo}:{number}"
    decision: allow
authority:
  grants:
    - id: g1
      subject: {agent: "svc:billing", user: "*"}
      actions: [billing.*]
      resources: ["invoice:*"]
      constraints: {amount_lte: 100000}
      environments: [production]
      expires_at: "2026-12-31T23:00:00Z"
      delegable: true
    - id: g2
      subject: {agent: "svc:git"}
      actions: [git.**]
`

func mustParse(t *testing.T, src string) *Policy {
	t.Helper()
	p, err := Parse("latch.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse(%q) = %v", src, err)
	}
	return p
}

// edit replaces exactly one occurrence of old in hashBase.
func edit(t *testing.T, old, new string) string {
	t.Helper()
	if n := strings.Count(hashBase, old); n != 1 {
		t.Fatalf("edit: %q occurs %d times in the base policy, want 1", old, n)
	}
	return strings.Replace(hashBase, old, new, 1)
}

func TestHashFormat(t *testing.T) {
	t.Parallel()
	p := mustParse(t, hashBase)
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(p.Hash) {
		t.Errorf("Hash = %q, want sha256:<64 hex>", p.Hash)
	}
	b, err := canon.Marshal(Normalize(p))
	if err != nil {
		t.Fatal(err)
	}
	if got := canon.Sum(b); got != p.Hash {
		t.Errorf("canon.Sum(canon.Marshal(Normalize(p))) = %s, want Hash %s", got, p.Hash)
	}
	// Pinned: receipts name policy hashes, so the normalized form must not drift by accident.
	small := mustParse(t, "schema: latch.policy/v1\nactions:\n  a.b:\n    effect: \"k:{id}\"\n    rules:\n      - when: {n_lte: 5}\n        decision: allow\n      - decision: deny\n")
	const wantJSON = `{"actions":{"a.b":{"approval_ttl":null,"decision":null,"effect":"k:{id}","lease":null,"max_attempts":null,"resource":null,"rules":[{"decision":"allow","when":{"n_lte":5}},{"decision":"deny","when":null}]}},"authority":null,"environment":null,"mode":"enforce","schema":"latch.policy/v1"}`
	b, err = canon.Marshal(Normalize(small))
	if err != nil || string(b) != wantJSON {
		t.Errorf("canon.Marshal(Normalize(small)) = %s, %v; want %s", b, err, wantJSON)
	}
	if want := canon.Sum([]byte(wantJSON)); small.Hash != want {
		t.Errorf("small.Hash = %s, want %s", small.Hash, want)
	}
}

func TestHashIgnoresFormatting(t *testing.T) {
	t.Parallel()
	base := mustParse(t, hashBase).Hash
	same := map[string]string{
		"comments and blank lines": "# the policy\n\n" + strings.ReplaceAll(hashBase, "\n  git.merge:", "\n\n  # merges\n  git.merge:  # trailing\n"),
		"quoting":                  edit(t, `effect: "merge:{repo}:{number}"`, `effect: 'merge:{repo}:{number}'`),
		"flow to block":            edit(t, "      - when: {amount_gte: 0, amount_lte: 50000}\n", "      - when:\n          amount_gte: 0\n          amount_lte: 50000\n"),
		"condition order":          edit(t, "{amount_gte: 0, amount_lte: 50000}", "{amount_lte: 50000, amount_gte: 0}"),
		"rule key order":           edit(t, "      - when: {amount_gte: 0, amount_lte: 50000}\n        decision: allow\n", "      - decision: allow\n        when: {amount_gte: 0, amount_lte: 50000}\n"),
		"action key order":         edit(t, "    effect: \"merge:{repo}:{number}\"\n    decision: allow\n", "    decision: allow\n    effect: \"merge:{repo}:{number}\"\n"),
		"top-level key order":      strings.Replace(edit(t, "environment: production\n", ""), "authority:\n", "environment: production\nauthority:\n", 1),
		"operand object key order": edit(t, "meta_eq: {tier: gold}", "meta_eq: {\"tier\": \"gold\"}"),
		"equivalent durations":     edit(t, "lease: 5m", "lease: 300s"),
		"explicit default mode":    edit(t, "environment: production\n", "environment: production\nmode: enforce\n"),
		"explicit default depth":   edit(t, "authority:\n", "authority:\n  max_delegation_depth: 3\n"),
		"same instant, other zone": edit(t, `"2026-12-31T23:00:00Z"`, "2027-01-01T00:00:00+01:00"),
		"version changed":          edit(t, `version: "1"`, `version: "2"`),
		"version removed":          edit(t, "version: \"1\"\n", ""),
		"grant key order":          edit(t, "      subject: {agent: \"svc:git\"}\n      actions: [git.**]\n", "      actions: [git.**]\n      subject: {agent: \"svc:git\"}\n"),
		"action order":             strings.Replace(strings.Replace(hashBase, "  git.merge:\n    effect: \"merge:{repo}:{number}\"\n    decision: allow\n", "", 1), "actions:\n", "actions:\n  git.merge:\n    effect: \"merge:{repo}:{number}\"\n    decision: allow\n", 1),
	}
	for name, src := range same {
		if got := mustParse(t, src).Hash; got != base {
			t.Errorf("%s: Hash = %s, want the base hash %s", name, got, base)
		}
	}
}

func TestHashSeesEverySemanticChange(t *testing.T) {
	t.Parallel()
	base := mustParse(t, hashBase).Hash
	changed := map[string]string{
		"mode":                 edit(t, "environment: production\n", "environment: production\nmode: observe\n"),
		"environment":          edit(t, "environment: production\n", "environment: staging\n"),
		"environment removed":  edit(t, "environment: production\n", ""),
		"action renamed":       edit(t, "  git.merge:", "  git.merge2:"),
		"action added":         edit(t, "authority:\n", "  docs.read:\n    decision: allow\nauthority:\n"),
		"effect":               edit(t, `effect: "merge:{repo}:{number}"`, `effect: "merge:{repo}/{number}"`),
		"effect removed":       edit(t, "    effect: \"merge:{repo}:{number}\"\n", ""),
		"resource":             edit(t, `resource: "invoice:{invoice_id}"`, `resource: "inv:{invoice_id}"`),
		"resource removed":     edit(t, "    resource: \"invoice:{invoice_id}\"\n", ""),
		"lease":                edit(t, "lease: 5m", "lease: 6m"),
		"approval_ttl":         edit(t, "approval_ttl: 15m", "approval_ttl: 16m"),
		"max_attempts":         edit(t, "max_attempts: 3", "max_attempts: 4"),
		"max_attempts removed": edit(t, "    max_attempts: 3\n", ""),
		"operand":              edit(t, "amount_lte: 50000}", "amount_lte: 50001}"),
		"operand type":         edit(t, "amount_gte: 0,", "amount_gte: -0,"), // same value: must NOT differ; checked below
		"operator":             edit(t, "amount_lte: 50000}", "amount_lt: 50000}"),
		"condition added":      edit(t, "{amount_gte: 0, amount_lte: 50000}", "{amount_gte: 0, amount_lte: 50000, x_eq: 1}"),
		"condition removed":    edit(t, "{amount_gte: 0, amount_lte: 50000}", "{amount_gte: 0}"),
		"nested operand":       edit(t, "meta_eq: {tier: gold}", "meta_eq: {tier: silver}"),
		"string vs integer":    edit(t, "meta_eq: {tier: gold}", "meta_eq: {tier: \"5\"}"),
		"list order":           edit(t, "[EUR, USD]", "[USD, EUR]"),
		"rule decision":        edit(t, "        decision: approve\n", "        decision: deny\n"),
		"rule order":           edit(t, "      - when: {amount_gte: 0, amount_lte: 50000}\n        decision: allow\n      - when: {currency_in: [EUR, USD], meta_eq: {tier: gold}}\n        decision: approve\n", "      - when: {currency_in: [EUR, USD], meta_eq: {tier: gold}}\n        decision: approve\n      - when: {amount_gte: 0, amount_lte: 50000}\n        decision: allow\n"),
		"bare decision":        edit(t, "    effect: \"merge:{repo}:{number}\"\n    decision: allow\n", "    effect: \"merge:{repo}:{number}\"\n    decision: approve\n"),
		"decision as a rule":   edit(t, "    effect: \"merge:{repo}:{number}\"\n    decision: allow\n", "    effect: \"merge:{repo}:{number}\"\n    rules:\n      - decision: allow\n"),
		"authority removed":    hashBase[:strings.Index(hashBase, "authority:")],
		"depth":                edit(t, "authority:\n", "authority:\n  max_delegation_depth: 2\n"),
		"grant id":             edit(t, "id: g2", "id: g3"),
		"grant agent":          edit(t, `agent: "svc:billing"`, `agent: "svc:billing*"`),
		"grant user removed":   edit(t, `, user: "*"`, ""),
		"grant actions":        edit(t, "actions: [billing.*]", "actions: [billing.**]"),
		"grant resources":      edit(t, `resources: ["invoice:*"]`, `resources: ["invoice:1"]`),
		"grant resources gone": edit(t, "      resources: [\"invoice:*\"]\n", ""),
		"grant constraints":    edit(t, "constraints: {amount_lte: 100000}", "constraints: {amount_lte: 100001}"),
		"grant environments":   edit(t, "environments: [production]", "environments: [production, staging]"),
		"grant expires_at":     edit(t, `"2026-12-31T23:00:00Z"`, `"2026-12-31T23:00:00.000000001Z"`),
		"grant delegable":      edit(t, "      delegable: true\n", "      delegable: false\n"),
		"grant tasks":          edit(t, "      actions: [git.**]\n", "      actions: [git.**]\n      tasks: [\"ticket:*\"]\n"),
		"grant tasks other":    edit(t, "      actions: [git.**]\n", "      actions: [git.**]\n      tasks: [\"ticket:INC-1\"]\n"),
		"grant tasks order":    edit(t, "      actions: [git.**]\n", "      actions: [git.**]\n      tasks: [\"ticket:INC-1\", \"ticket:*\"]\n"),
		"approvers roles":      edit(t, "authority:\n", "approvers:\n  roles:\n    owners: [olga, omar]\nauthority:\n"),
		"policy_change":        edit(t, "authority:\n", "approvers:\n  roles:\n    owners: [olga, omar]\n  policy_change: {roles: [owners], required: 2}\nauthority:\n"),
		"policy_change other":  edit(t, "authority:\n", "approvers:\n  roles:\n    owners: [olga, omar]\n  policy_change: {roles: [owners], required: 1}\nauthority:\n"),
		"grant order":          strings.Replace(strings.Replace(hashBase, "    - id: g2\n      subject: {agent: \"svc:git\"}\n      actions: [git.**]\n", "", 1), "  grants:\n", "  grants:\n    - id: g2\n      subject: {agent: \"svc:git\"}\n      actions: [git.**]\n", 1),
	}
	seen := map[string]string{base: "base"}
	for name, src := range changed {
		h := mustParse(t, src).Hash
		if name == "operand type" {
			if h != base {
				t.Errorf("%s: -0 and 0 are the same integer, but Hash changed", name)
			}
			continue
		}
		if other, dup := seen[h]; dup {
			t.Errorf("%s: Hash = %s, same as %s; want every semantic change to change it", name, h, other)
		}
		seen[h] = name
	}
}
