package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

func paymentsEnv(t *testing.T) *env {
	t.Helper()
	doc, err := os.ReadFile("examples/authority/payments.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, string(doc))
}

const (
	financeGrant = `subject: { agent: finance-bot }
actions: [payments.refund]
constraints: { amount_lte: 100000, currency_in: [EUR, USD] }
environments: [production]
expires_at: "2026-12-15T00:00:00Z"
delegable: true
`
	supportGrant = `subject: { agent: support-bot }
actions: [payments.refund]
constraints: { amount_lte: 10000, currency_in: [EUR] }
environments: [production]
expires_at: "2026-12-01T00:00:00Z"
`
)

func refund(t *testing.T, e *env, agent string, amount int64, currency string) (*latch.Receipt, error) {
	t.Helper()
	args, _ := json.Marshal(map[string]any{"refund_id": "rf_" + agent + currency, "order_id": "ord_1", "amount": amount, "currency": currency})
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: agent})
	return e.g.Execute(ctx, &latch.Call{Action: "payments.refund", Arguments: args}, func(context.Context, json.RawMessage) (any, error) { return "ok", nil })
}

func TestAuthorityDelegationChain(t *testing.T) {
	t.Parallel()
	e := paymentsEnv(t)
	ctx := t.Context()
	alice := latch.Principal{Agent: "console", User: "alice"}

	// Nobody holds authority yet but alice: the bots are refused no_authority.
	_, err := refund(t, e, "support-bot", 500, "EUR")
	var ae *latch.AuthorityError
	if !errors.As(err, &ae) || ae.Reason != "no_authority" || !errors.Is(err, latch.ErrAuthority) {
		t.Fatalf("before delegation err = %v, want no_authority", err)
	}

	fin, err := e.g.Delegate(ctx, "alice-payments", []byte(financeGrant), alice)
	if err != nil {
		t.Fatalf("Delegate(finance-bot): %v", err)
	}
	sup, err := e.g.Delegate(ctx, fin.ID, []byte(supportGrant), latch.Principal{Agent: "finance-bot"})
	if err != nil {
		t.Fatalf("Delegate(support-bot): %v", err)
	}

	rc, err := refund(t, e, "support-bot", 5000, "EUR")
	if err != nil {
		t.Fatalf("support-bot refund of €50: %v", err)
	}
	if rc.Authority == nil || rc.Authority.GrantID != "alice-payments" || rc.Authority.DelegationID != sup.ID {
		t.Errorf("receipt authority = %+v, want alice-payments via %s", rc.Authority, sup.ID)
	}
	if _, err := refund(t, e, "support-bot", 50000, "EUR"); !errors.As(err, &ae) || ae.Reason != "authority_constraint" {
		t.Errorf("support-bot refund of €500 err = %v, want authority_constraint", err)
	}
	if _, err := refund(t, e, "finance-bot", 50000, "USD"); err != nil {
		t.Errorf("finance-bot refund of $500: %v", err)
	}
	if doc := lastReceipt(t, e.g); doc["authority"].(map[string]any)["delegation_id"] != fin.ID {
		t.Errorf("receipt authority = %v", doc["authority"])
	}

	// Widening is refused, naming the dimension, and recorded.
	wide := `subject: { agent: rogue-bot }
actions: [payments.refund]
constraints: { amount_lte: 900000, currency_in: [EUR] }
environments: [production]
expires_at: "2026-12-01T00:00:00Z"
`
	if _, err := e.g.Delegate(ctx, fin.ID, []byte(wide), latch.Principal{Agent: "finance-bot"}); !errors.As(err, &ae) ||
		ae.Reason != "authority_escalation" || ae.Dimension != "constraints.amount_lte" {
		t.Fatalf("widening Delegate err = %v, want authority_escalation on constraints.amount_lte", err)
	}
	omit := `subject: { agent: rogue-bot }
actions: [payments.refund]
constraints: { amount_lte: 100 }
environments: [production]
expires_at: "2026-12-01T00:00:00Z"
`
	if _, err := e.g.Delegate(ctx, fin.ID, []byte(omit), latch.Principal{Agent: "finance-bot"}); !errors.As(err, &ae) ||
		ae.Reason != "authority_escalation" || ae.Dimension != "constraints.currency_in" {
		t.Fatalf("omitting Delegate err = %v, want authority_escalation on constraints.currency_in", err)
	}
	evs, _ := e.g.Store().Events(ctx, store.EventFilter{})
	rejected := 0
	for _, ev := range evs {
		if ev.Kind == store.EventDelegationRejected {
			rejected++
		}
	}
	if rejected != 2 {
		t.Errorf("delegation_rejected events = %d, want 2", rejected)
	}

	// Revoking finance-bot's delegation cuts support-bot's beneath it, in one write.
	before := writes(t, e.g)
	if _, err := e.g.Revoke(ctx, fin.ID, "cli:alice"); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if n := writes(t, e.g) - before; n != 1 {
		t.Errorf("Revoke used %d writes, want 1", n)
	}
	if _, err := refund(t, e, "support-bot", 500, "EUR"); !errors.As(err, &ae) || ae.Reason != "authority_revoked" {
		t.Errorf("after revoking its parent, support-bot err = %v, want authority_revoked", err)
	}
	verifyChain(t, e.g)
}

func TestAuthorityExpiryIsExact(t *testing.T) {
	t.Parallel()
	e := paymentsEnv(t)
	ctx := t.Context()
	sup := `subject: { agent: support-bot }
actions: [payments.refund]
constraints: { amount_lte: 100, currency_in: [EUR] }
environments: [production]
expires_at: "2026-11-29T10:30:00Z"
`
	if _, err := e.g.Delegate(ctx, "alice-payments", []byte(sup), latch.Principal{Agent: "console", User: "alice"}); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(30 * time.Minute) // exactly expires_at
	if _, err := refund(t, e, "support-bot", 50, "EUR"); err != nil {
		t.Fatalf("at expires_at: %v", err)
	}
	e.clock.Add(time.Microsecond)
	var ae *latch.AuthorityError
	_, err := refund(t, e, "support-bot", 60, "EUR")
	if !errors.As(err, &ae) || ae.Reason != "authority_expired" {
		t.Fatalf("1µs after expires_at err = %v, want authority_expired", err)
	}
	if doc := lastReceipt(t, e.g); doc["result"] != "denied" || doc["decision_reason"] != "authority_expired" {
		t.Errorf("receipt = %v %v", doc["result"], doc["decision_reason"])
	}
}

func TestAuthorityUnreadableDeniesEverything(t *testing.T) {
	t.Parallel()
	e := paymentsEnv(t)
	ds := e.g.Store().(store.DelegationStore)
	if err := ds.CreateDelegation(t.Context(), &store.Delegation{ID: "dlg_broken", Parent: "alice-payments", Grant: []byte("subject: {"), CreatedBy: "x", CreatedAt: e.clock.Now()}, nil); err != nil {
		t.Fatal(err)
	}
	var ae *latch.AuthorityError
	_, err := e.g.Execute(latch.WithPrincipal(t.Context(), latch.Principal{Agent: "ops-1"}), &latch.Call{Action: "reports.daily.read"}, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
	if !errors.As(err, &ae) || ae.Reason != "authority_unreadable" {
		t.Fatalf("err = %v, want authority_unreadable", err)
	}
}

func TestAuthorityAndPolicyCombineAsStricter(t *testing.T) {
	t.Parallel()
	doc, _ := os.ReadFile("examples/authority/payments.yaml")
	p, err := policy.Parse("payments.yaml", doc)
	if err != nil {
		t.Fatal(err)
	}
	e := paymentsEnv(t)
	if _, err := e.g.Delegate(t.Context(), "alice-payments", []byte(financeGrant), latch.Principal{Agent: "console", User: "alice"}); err != nil {
		t.Fatal(err)
	}
	// Authority allows finance-bot a payout? No: its grant is refunds only. Policy says approve;
	// authority denies; the stricter is deny.
	ev, err := e.g.Evaluate(latch.WithPrincipal(t.Context(), latch.Principal{Agent: "finance-bot"}),
		&latch.Call{Action: "payments.payout", Arguments: json.RawMessage(`{"payout_id":"po_1","amount":5,"currency":"EUR"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Decision != policy.Deny || ev.Reason != "no_authority" || p.Actions["payments.payout"].Decision != policy.Approve {
		t.Errorf("Evaluate = %s %s, want deny no_authority over the policy's approve", ev.Decision, ev.Reason)
	}
	// alice herself: authority allows, policy says approve: approve.
	ev, _ = e.g.Evaluate(latch.WithPrincipal(t.Context(), latch.Principal{Agent: "console", User: "alice"}),
		&latch.Call{Action: "payments.payout", Arguments: json.RawMessage(`{"payout_id":"po_1","amount":5,"currency":"EUR"}`)})
	if ev.Decision != policy.Approve || ev.Authority == nil || ev.Authority.GrantID != "alice-payments" {
		t.Errorf("Evaluate(alice) = %s %s %+v, want approve via alice-payments", ev.Decision, ev.Reason, ev.Authority)
	}
}
