package mcpop_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/mcpop"
	"github.com/latchkit/latch/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const standingPolicy = `schema: latch.policy/v1
actions:
  refund.issue:
    effect: "refund:{order_id}"
    arguments:
      order_id: { type: string }
      amount: { type: integer }
    decision: approve
    approvers:
      standing: { max_uses: 3, max_for: 1h }
`

// TestStandingTools: approve with standing terms grants the request and a standing approval,
// named beside the request; list_standing and show_standing show it; the agent's call
// presenting it runs; revoke_standing ends it. Refusals are tool errors led by their reason.
func TestStandingTools(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pol, err := policy.Parse("latch.yaml", []byte(standingPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(ctx, &latch.Config{Policy: pol, StoreURL: "sqlite:" + filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	bot := latch.WithPrincipal(ctx, latch.Principal{Agent: "support-bot"})
	run := func(ctx context.Context, order string) error {
		_, err := g.Execute(ctx, &latch.Call{Action: "refund.issue", Arguments: json.RawMessage(`{"order_id":"` + order + `","amount":100}`)},
			func(context.Context, json.RawMessage) (any, error) { return "ok", nil })
		return err
	}
	var ar *latch.ApprovalRequiredError
	if err := run(bot, "o1"); !errors.As(err, &ar) {
		t.Fatalf("first call = %v, want approval required", err)
	}
	op, err := mcpop.New(&mcpop.Config{Guard: g, Approver: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := op.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "operator"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	call := func(tool string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return res
	}
	terms := map[string]any{"uses": 2, "for": "1h", "vary": []string{"order_id"}}
	if res := call("approve", map[string]any{"approval_id": ar.ApprovalID, "standing": map[string]any{"uses": 9, "for": "1h"}}); !res.IsError || !strings.HasPrefix(errText(res), "standing_too_wide: ") {
		t.Errorf("approve wider than the policy: %v %q, want standing_too_wide", res.IsError, errText(res))
	}
	if res := call("deny", map[string]any{"approval_id": ar.ApprovalID, "standing": terms}); !res.IsError || !strings.HasPrefix(errText(res), "invalid_argument: ") {
		t.Errorf("deny with standing terms: %v %q, want invalid_argument", res.IsError, errText(res))
	}
	res := call("approve", map[string]any{"approval_id": ar.ApprovalID, "standing": terms})
	if res.IsError {
		t.Fatalf("approve with standing terms: %s", errText(res))
	}
	var granted map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &granted)
	m := regexp.MustCompile(`standing approval (sta_[0-9a-f]{32}) granted`).FindStringSubmatch(errText(res))
	if granted["status"] != "granted" || m == nil {
		t.Fatalf("approve answered %v and %q; want the request granted and the standing approval named", granted, errText(res))
	}
	sta := m[1]

	var list struct {
		Standing []map[string]any `json:"standing"`
	}
	b, _ = json.Marshal(call("list_standing", nil).StructuredContent)
	_ = json.Unmarshal(b, &list)
	if len(list.Standing) != 1 || list.Standing[0]["standing_id"] != sta || list.Standing[0]["from"] != ar.ApprovalID {
		t.Fatalf("list_standing = %v, want %s from %s", list.Standing, sta, ar.ApprovalID)
	}
	if err := run(latch.WithApproval(bot, sta), "o2"); err != nil {
		t.Fatalf("a call presenting %s: %v", sta, err)
	}
	var shown map[string]any
	b, _ = json.Marshal(call("show_standing", map[string]any{"standing_id": sta}).StructuredContent)
	_ = json.Unmarshal(b, &shown)
	if shown["uses"] != float64(1) || shown["state"] != "active" {
		t.Errorf("show_standing = %v, want 1 use, active", shown)
	}
	var revoked map[string]any
	b, _ = json.Marshal(call("revoke_standing", map[string]any{"standing_id": sta, "note": "enough"}).StructuredContent)
	_ = json.Unmarshal(b, &revoked)
	if revoked["state"] != "revoked" || revoked["revoked_by"] != "alice" {
		t.Errorf("revoke_standing = %v, want revoked by alice", revoked)
	}
	if res := call("revoke_standing", map[string]any{"standing_id": sta}); !res.IsError || !strings.HasPrefix(errText(res), "revoked: ") {
		t.Errorf("revoke twice: %q, want revoked", errText(res))
	}
	if err := run(latch.WithApproval(bot, sta), "o3"); latch.RefusalOf(err) == nil || latch.RefusalOf(err).Reason != latch.ReasonApprovalRevoked {
		t.Errorf("a call after the revocation: %v, want approval_revoked", err)
	}
}
