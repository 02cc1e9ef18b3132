package policy

import "testing"

const benchPolicy = `schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    rules:
      - when: {amount_gte: 0, amount_lte: 50000, currency_in: [EUR, USD, GBP]}
        decision: allow
      - when: {amount_lte: 500000, customer_prefix: "cus_", express_eq: false}
        decision: approve
      - decision: deny
`

// BenchmarkEvaluate decides one call with five arguments against three rules.
func BenchmarkEvaluate(b *testing.B) {
	p, err := Parse("bench.yaml", []byte(benchPolicy))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name   string
		amount int64
		want   Decision
	}{
		{"rule0", 1000, Allow},
		{"rule1", 200000, Approve},
		{"rule2", 900000, Deny},
	} {
		args := map[string]any{
			"invoice_id": "inv_123",
			"amount":     bc.amount,
			"currency":   "EUR",
			"customer":   "cus_42",
			"express":    false,
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ev := p.Evaluate("billing.charge", args); ev.Decision != bc.want {
					b.Fatalf("Evaluate = %+v, want %s", ev, bc.want)
				}
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	data := []byte(hashBase)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("bench.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
}
