package policy_test

import (
	"fmt"

	"github.com/latchkit/latch/policy"
)

const examplePolicy = `schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    arguments:
      invoice_id: { type: string }
      amount: { type: integer, display: { money: { minor_units: 2, currency: EUR } } }
    rules:
      - when: { amount_gte: 0, amount_lte: 50000 }
        decision: allow
      - when: { amount_gte: 0, amount_lte: 500000 }
        decision: approve
      - decision: deny
  git.merge:
    decision: allow
`

func ExamplePolicy_Evaluate() {
	p, err := policy.Parse("latch.yaml", []byte(examplePolicy))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, amount := range []any{int64(1200), int64(200000), "1200"} {
		ev := p.Evaluate("billing.charge", map[string]any{"invoice_id": "inv_1", "amount": amount})
		fmt.Printf("amount %#v: %s (%s)\n", amount, ev.Decision, ev.Reason)
	}
	ev := p.Evaluate("billing.refund", nil)
	fmt.Printf("billing.refund: %s (%s)\n", ev.Decision, ev.Reason)
	// Output:
	// amount 1200: allow (rule[0])
	// amount 200000: approve (rule[1])
	// amount "1200": deny (invalid_arguments)
	// billing.refund: deny (unknown_action)
}

func ExampleParse_strict() {
	_, err := policy.Parse("latch.yaml", []byte(`schema: latch.policy/v1
actions:
  billing.charge:
    desicion: allow
`))
	fmt.Println(err)
	// Output:
	// latch.yaml:4:5: unknown key "desicion" in action "billing.charge" (expected one of effect, resource, arguments, lease, approval_ttl, max_attempts, rules, decision, approvers, budgets, precondition)
}

func ExamplePolicy_Warnings() {
	p, _ := policy.Parse("latch.yaml", []byte(examplePolicy))
	for _, w := range p.Warnings() {
		fmt.Printf("%d:%d: %s\n", w.Pos.Line, w.Pos.Column, w.Msg)
	}
	// Output:
	// 14:3: action "git.merge" has no effect template but may decide allow: without an effect key nothing stops it running twice
}

func ExampleTemplate_Render() {
	t, _ := policy.ParseTemplate("merge:{repo}:{number}:{{done}}")
	key, err := t.Render(map[string]any{"repo": "latch", "number": int64(42)}, "")
	fmt.Println(key, err)
	_, err = t.Render(map[string]any{"repo": "latch", "number": true}, "")
	fmt.Println(err)
	// Output:
	// merge:latch:42:{done} <nil>
	// placeholder {number}: argument number is a boolean, want a non-empty string or an integer
}

// A misspelt argument name fails closed: without an arguments: section the call is denied
// missing_argument naming it; with one, loading refuses the policy with the position.
func ExamplePolicy_Evaluate_typo() {
	p, _ := policy.Parse("latch.yaml", []byte(`schema: latch.policy/v1
actions:
  billing.refund:
    rules:
      - when: { amout_gt: 10000 }
        decision: approve
      - decision: allow
`))
	ev := p.Evaluate("billing.refund", map[string]any{"amount": int64(900000)})
	fmt.Println(ev.Decision, ev.Arguments)

	_, err := policy.Parse("latch.yaml", []byte(`schema: latch.policy/v1
actions:
  billing.refund:
    arguments:
      amount: { type: integer }
    rules:
      - when: { amout_gt: 10000 }
        decision: approve
      - decision: allow
`))
	fmt.Println(err)
	// Output:
	// deny missing_argument: amout (argument "amout" is required by rule 0 (amout_gt) of action "billing.refund" and the call does not pass it)
	// latch.yaml:7:17: condition "amout_gt" in rule 0 of action "billing.refund" names argument "amout", which arguments: does not declare (declared: amount)
}

func ExamplePolicy_View() {
	p, _ := policy.Parse("latch.yaml", []byte(examplePolicy))
	for _, v := range p.View("billing.charge", map[string]any{"invoice_id": "inv_1", "amount": int64(250000)}) {
		fmt.Println(v)
	}
	// Output:
	// invoice_id = "inv_1"
	// amount = 250000 — €2,500.00 (250000 minor units)
}

func ExampleFormatMoney() {
	fmt.Println(policy.FormatMoney(250000, 2, "EUR"))
	fmt.Println(policy.FormatMoney(-1999, 2, "USD"))
	fmt.Println(policy.FormatMoney(1500, 0, "JPY"))
	// Output:
	// €2,500.00 (250000 minor units)
	// -US$19.99 (-1999 minor units)
	// JP¥1,500 (1500 minor units)
}
