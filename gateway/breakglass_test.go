package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/gateway"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// TestBreakGlassThroughGateway: an agent holding no grant of its own is refused through the
// gateway (the JSON-RPC code of kind authority); once a person opens a break-glass grant for it,
// its tool call reaches the upstream and the receipt names the envelope and the opening; once
// the grant is revoked, the call is refused authority_revoked and the upstream never sees it.
func TestBreakGlassThroughGateway(t *testing.T) {
	t.Parallel()
	doc := testPolicy + `approvers:
  roles:
    oncall: [carol]
authority:
  grants: []
  break_glass:
    - id: incident
      subject: {agent: "support-*"}
      actions: [mcp.payments.refund]
      constraints: {amount_lte: 500}
      max_ttl: 1h
      openers: [oncall]
`
	e := setupWith(t, doc, latch.Principal{Agent: "support-bot"})
	ctx := t.Context()
	_, err := refund(ctx, e.agent, "A-1", 100)
	if code, r := refusalOf(t, err); code != gateway.CodeAuthority || r.Reason != "no_authority" {
		t.Fatalf("refund before any opening = %d %+v, want %d no_authority", code, r, gateway.CodeAuthority)
	}

	d, err := e.guard.BreakGlass(ctx, &latch.BreakGlassRequest{Envelope: "incident", For: latch.Principal{Agent: "support-bot"},
		TTL: 30 * time.Minute, Reason: "INC-3: refunds stuck", By: store.Approver{Name: "carol", Method: store.MethodSession, Verified: true}})
	if err != nil {
		t.Fatalf("BreakGlass: %v", err)
	}
	if _, err := refund(ctx, e.agent, "A-2", 100); err != nil {
		t.Fatalf("refund under the opened grant: %v", err)
	}
	var last *receipt.Receipt
	for s, err := range e.guard.Store().Receipts(ctx, store.ReceiptFilter{}) {
		if err != nil {
			t.Fatal(err)
		}
		if r, err := receipt.Parse(s.Doc); err == nil && r.EffectKey == "refund:A-2" {
			last = r
		}
	}
	if last == nil || last.Result != receipt.Committed || last.Authority == nil ||
		last.Authority.BreakGlass != "incident" || last.Authority.DelegationID != d.ID {
		t.Errorf("receipt of refund:A-2 = %+v, want committed under break-glass incident via %s", last, d.ID)
	}
	_, err = refund(ctx, e.agent, "A-3", 900)
	if code, r := refusalOf(t, err); code != gateway.CodeAuthority || r.Reason != "authority_constraint" {
		t.Errorf("refund beyond the envelope's constraint = %d %+v, want authority_constraint", code, r)
	}

	if _, err := e.guard.Revoke(ctx, d.ID, "session:carol"); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	_, err = refund(ctx, e.agent, "A-4", 100)
	if code, r := refusalOf(t, err); code != gateway.CodeAuthority || r.Reason != "authority_revoked" {
		t.Errorf("refund after revocation = %d %+v, want authority_revoked", code, r)
	}
	if lines := e.ledgerLines(t); len(lines) != 1 || !strings.Contains(lines[0], "A-2") {
		t.Errorf("upstream ledger = %q, want the one refund made under the grant", lines)
	}
}
