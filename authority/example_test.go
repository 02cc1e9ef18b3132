package authority_test

import (
	"fmt"
	"time"

	"github.com/latchkit/latch/authority"
	"github.com/latchkit/latch/policy"
)

const paymentsPolicy = `schema: latch.policy/v1
actions:
  billing.refund: {decision: allow}
authority:
  grants:
    - id: alice-payments
      subject: {user: alice}
      actions: ["billing.*"]
      constraints: {amount_lte: 100000}
      expires_at: "2026-12-31T23:59:59Z"
      delegable: true
`

// A human delegates part of her grant to an agent; the agent may then act on its own, within
// the narrower grant, until it is revoked.
func Example() {
	pol, err := policy.Parse("latch.yaml", []byte(paymentsPolicy))
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	child, err := policy.ParseGrant("refunds.yaml", []byte(`subject: {agent: "svc:refund-bot"}
actions: [billing.refund]
constraints: {amount_lte: 5000}
expires_at: "2026-12-01T00:00:00Z"
`))
	if err != nil {
		panic(err)
	}
	alice := authority.Request{Agent: "cli", User: "alice", Now: now}
	if err := authority.CheckDelegation(pol.Authority, nil, "alice-payments", child, alice); err != nil {
		panic(err)
	}
	// The store assigns the id and keeps the record.
	ds := []authority.Delegation{{ID: "dlg_1", Parent: "alice-payments", Grant: *child, CreatedBy: "cli/alice", CreatedAt: now}}

	refund := func(amount int64) authority.Request {
		return authority.Request{Agent: "svc:refund-bot", Action: "billing.refund", Args: map[string]any{"amount": amount}, Now: now}
	}
	for _, amount := range []int64{4000, 9000} {
		d := authority.Evaluate(pol.Authority, ds, refund(amount))
		fmt.Println(amount, d.Allowed, d.Reason, d.Dimension, d.GrantID, d.DelegationID)
	}
	ds[0].Revoked = true
	d := authority.Evaluate(pol.Authority, ds, refund(4000))
	fmt.Println("revoked:", d.Reason)

	// A wider child is refused, naming the dimension.
	wider := *child
	wider.Actions = []string{"billing.*", "git.merge"}
	fmt.Println(authority.CheckDelegation(pol.Authority, nil, "alice-payments", &wider, alice))
	// Output:
	// 4000 true granted  alice-payments dlg_1
	// 9000 false authority_constraint constraints.amount_lte alice-payments dlg_1
	// revoked: authority_revoked
	// authority_escalation on actions: action pattern "git.merge" is not contained in any of the parent's ["billing.*"]
}

func ExampleContains() {
	fmt.Println(authority.Contains("billing.**", "billing.refund.partial", '.'))
	fmt.Println(authority.Contains("billing.**", "billing", '.'))
	fmt.Println(authority.Contains("billing.refund", "billing.*", '.'))
	fmt.Println(authority.Contains("repo:latchkit:*", "repo:latchkit:la*", ':'))
	// Output:
	// true
	// false
	// false
	// true
}
