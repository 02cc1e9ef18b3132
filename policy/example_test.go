package policy_test

import (
	"fmt"

	"github.com/latchkit/latch/policy"
)

const examplePolicy = `schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
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
	// amount "1200": deny (rule[2])
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
	// latch.yaml:4:5: unknown key "desicion" in action "billing.charge" (expected one of effect, resource, lease, approval_ttl, max_attempts, rules, decision)
}

func ExamplePolicy_Warnings() {
	p, _ := policy.Parse("latch.yaml", []byte(examplePolicy))
	for _, w := range p.Warnings() {
		fmt.Printf("%d:%d: %s\n", w.Pos.Line, w.Pos.Column, w.Msg)
	}
	// Output:
	// 11:3: action "git.merge" has no effect template but may decide allow: without an effect key nothing stops it running twice
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
