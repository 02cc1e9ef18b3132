package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchkit/latch/gateway"
)

// TestGatewayHopToken: the planner creates a hop with `latch hop --token-key`; billing, behind
// `latch gateway --stdio --agent billing --hop-verify-key KEY.pub` (a process), presents the
// token in _meta latch/hop: the refund within the hop reaches the upstream, the one beyond it is
// refused although billing's own grant allows it, and a gateway that does not trust the key
// refuses the token authority_hop with nothing sent.
func TestGatewayHopToken(t *testing.T) {
	t.Parallel()
	bin := payments(t)
	e := newMCPEnv(t, "")
	doc := gatewayPolicy(commandUpstream(bin, e.ledger)) + `authority:
  grants:
    - id: planner-refunds
      subject: { agent: planner }
      actions: [mcp.payments.refund]
      constraints: { amount_lte: 1000 }
      delegable: true
      expires_at: 2099-01-01T00:00:00Z
    - id: billing-own
      subject: { agent: billing }
      actions: ["mcp.payments.*"]
`
	if err := os.WriteFile(e.policy, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "narrow.yaml"), []byte("actions: [mcp.payments.refund]\nconstraints: {amount_lte: 500}\nexpires_at: 2098-01-01T00:00:00Z\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.run(t, "checkpoint", "keygen", "--out", "hop.key")
	e.run(t, "checkpoint", "keygen", "--out", "other.key")
	var out struct {
		Hop struct {
			ID string `json:"delegation_id"`
		} `json:"hop"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(e.run(t, "hop", "--parent", "planner-refunds", "--to", "billing", "--file", "narrow.yaml", "--as", "planner", "--token-key", "hop.key", "--json")), &out); err != nil || out.Token == "" {
		t.Fatalf("latch hop --token-key --json: %+v, %v", out, err)
	}

	refund := func(cs *mcp.ClientSession, order string, amount int) error {
		_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "payments.refund", Meta: mcp.Meta{gateway.MetaHop: out.Token},
			Arguments: map[string]any{"order_id": order, "amount": amount}})
		return err
	}
	untrusting := e.stdioClient(t, os.Stderr, "gateway", "--stdio", "--agent", "billing", "--hop-verify-key", "other.key.pub")
	if code, r := refusalOf(t, refund(untrusting, "ord_0", 100)); code != gateway.CodeAuthority || r.Reason != "authority_hop" {
		t.Errorf("a token the gateway's keys do not sign: %d %+v, want authority_hop", code, r)
	}
	billing := e.stdioClient(t, os.Stderr, "gateway", "--stdio", "--agent", "billing", "--hop-verify-key", "other.key.pub", "--hop-verify-key", "hop.key.pub")
	if err := refund(billing, "ord_1", 400); err != nil {
		t.Fatalf("the refund within the hop, presenting its token: %v", err)
	}
	if code, r := refusalOf(t, refund(billing, "ord_2", 800)); code != gateway.CodeAuthority || r.Reason != "authority_constraint" {
		t.Errorf("the refund beyond the hop: %d %+v, want authority_constraint", code, r)
	}
	if lines := e.ledgerLines(t); len(lines) != 1 {
		t.Errorf("upstream refunds = %q, want only ord_1", lines)
	}
}
