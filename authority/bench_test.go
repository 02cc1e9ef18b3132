package authority

import (
	"strconv"
	"strings"
	"testing"
)

// benchAuthority returns ten policy grants (pay and nine that do not match the bot's request)
// and three delegations: mid beneath pay, the bot's beneath mid (depth 2), and an unrelated one.
func benchAuthority(b *testing.B) (string, []Delegation) {
	var sb strings.Builder
	sb.WriteString(payGrant)
	for i := range 9 {
		n := strconv.Itoa(i)
		sb.WriteString("    - id: g" + n + "\n      subject: {agent: \"svc:team" + n + ":*\"}\n      actions: [\"team" + n + ".**\", billing.charge]\n      resources: [\"invoice:*\"]\n      constraints: {amount_lte: 100}\n")
	}
	other := *mustGrant(b, "subject: {agent: \"svc:ops:bot\"}\nactions: [ops.restart]\nexpires_at: \"2026-12-31T00:00:00Z\"\n")
	ds := []Delegation{
		{ID: "dlg_mid", Parent: "pay", Grant: *mustGrant(b, midGrant)},
		{ID: "dlg_other", Parent: "g0", Grant: other},
		{ID: "dlg_bot", Parent: "dlg_mid", Grant: *mustGrant(b, narrowGrant)},
	}
	return sb.String(), ds
}

// BenchmarkEvaluate measures one decision over ten grants and three delegations: allowed
// through a delegation two links below its policy grant (every link re-checked for
// containment), and denied by a constraint of that delegation.
func BenchmarkEvaluate(b *testing.B) {
	grants, ds := benchAuthority(b)
	auth := mustAuthority(b, 3, grants)
	b.Run("allowed", func(b *testing.B) {
		r := botRequest()
		if d := Evaluate(auth, ds, r); !d.Allowed || d.DelegationID != "dlg_bot" {
			b.Fatalf("Evaluate = %+v", outcomeOf(d))
		}
		b.ReportAllocs()
		for b.Loop() {
			Evaluate(auth, ds, r)
		}
	})
	b.Run("denied", func(b *testing.B) {
		r := botRequest()
		r.Args["amount"] = int64(20000)
		if d := Evaluate(auth, ds, r); d.Reason != ReasonConstraint {
			b.Fatalf("Evaluate = %+v", outcomeOf(d))
		}
		b.ReportAllocs()
		for b.Loop() {
			Evaluate(auth, ds, r)
		}
	})
}
