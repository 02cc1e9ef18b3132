package cli_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/latchkit/latch/gateway"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/store"
)

// TestServeBudgetProcess: a real `latch serve` process over each store, a policy giving each
// agent 1000 of amount a day on payout.send. Begins that fit are reserved and their outcomes
// recorded; the begin that would pass the limit is a 403 problem+json of type budget_exhausted
// and kind denied, naming the budget, its metric and its window and never an amount, and
// reserves nothing; one that does not pass the metered argument is budget_metric_missing.
func TestServeBudgetProcess(t *testing.T) {
	t.Parallel()
	const policyText = `schema: latch.policy/v1
actions:
  payout.send:
    effect: "payout:{payout_id}"
    decision: allow
    budgets:
      - {metric: amount, limit: 1000, window: P1D, per: agent}
`
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			bin, pol := latchDir(t, policyText)
			storeURL := testdb.URL(t, backend, "latch_cli_budget")
			token := createToken(t, bin, nil, pol, "--store", storeURL, "--agent", "payer")
			p := startServe(t, bin, nil, "--policy", pol, "--store", storeURL, "serve", "--sweep", "0", "--no-console")
			post := func(path string, body any) (int, string, map[string]any) {
				t.Helper()
				raw, _ := json.Marshal(body)
				req, _ := http.NewRequestWithContext(t.Context(), "POST", p.base+path, bytes.NewReader(raw))
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				var out map[string]any
				if err := json.Unmarshal(b, &out); err != nil {
					t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
				}
				return resp.StatusCode, resp.Header.Get("Content-Type"), out
			}
			payout := func(id string, amount any) map[string]any {
				args := map[string]any{"payout_id": id}
				if amount != nil {
					args["amount"] = amount
				}
				return map[string]any{"action": "payout.send", "arguments": args}
			}
			for _, c := range []struct {
				id     string
				amount int
			}{{"p1", 600}, {"p2", 400}} {
				status, _, body := post("/v1/actions", payout(c.id, c.amount))
				if status != 200 || body["status"] != "reserved" {
					t.Fatalf("begin %s: %d %v", c.id, status, body)
				}
				if status, _, body := post("/v1/actions/"+body["action_id"].(string)+"/outcome", map[string]any{"outcome": "committed"}); status != 200 {
					t.Fatalf("outcome %s: %d %v", c.id, status, body)
				}
			}
			status, ctype, prob := post("/v1/actions", payout("p3", 1))
			want := map[string]any{"type": "urn:latch:problem:budget_exhausted", "reason": "budget_exhausted", "kind": "denied",
				"budget": store.ActionBudget("payout.send", "agent", "payer"), "metric": "amount", "window": "P1D"}
			if status != http.StatusForbidden || ctype != "application/problem+json" {
				t.Errorf("over budget: %d %s %v, want 403 problem+json", status, ctype, prob)
			}
			for k, v := range want {
				if prob[k] != v {
					t.Errorf("over budget: %s = %v, want %v (%v)", k, prob[k], v, prob)
				}
			}
			if d, _ := prob["detail"].(string); d == "" || strings.Contains(d, "1000") || strings.Contains(d, " 0 ") {
				t.Errorf("over budget: detail %q, want one naming the budget and no amount", d)
			}
			status, _, prob = post("/v1/actions", payout("p4", nil))
			if status != http.StatusForbidden || prob["reason"] != "budget_metric_missing" || prob["kind"] != "denied" || prob["metric"] != "amount" {
				t.Errorf("without amount: %d %v, want 403 budget_metric_missing", status, prob)
			}
			st, err := store.Open(t.Context(), storeURL, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			for _, key := range []string{"payout:p3", "payout:p4"} {
				if _, err := st.Effect(t.Context(), key); err == nil {
					t.Errorf("the refused begin reserved %s", key)
				}
			}
		})
	}
}

// TestGatewayBudgetProcess: agent (go-sdk client) → `latch gateway --stdio` (a process) → the
// payments upstream (a process). Refunds are budgeted per agent: those that fit pass; the one
// that would pass the budget is refused -31001 with data reason budget_exhausted, kind denied,
// budget, metric and window, and never reaches the upstream.
func TestGatewayBudgetProcess(t *testing.T) {
	t.Parallel()
	bin := payments(t)
	e := newMCPEnv(t, "")
	pol := strings.Replace(gatewayPolicy(commandUpstream(bin, e.ledger)), `      amount: { type: integer }
`, `      amount: { type: integer }
    budgets:
      - {metric: amount, limit: 1000, window: P1D, per: agent}
`, 1)
	if !strings.Contains(pol, "budgets:") {
		t.Fatal("the budget was not added to the policy")
	}
	if err := os.WriteFile(e.policy, []byte(pol), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cs := e.stdioClient(t, &lockedBuffer{b: &stderr}, "gateway", "--stdio", "--agent", "support-bot")
	for _, c := range []struct {
		order  string
		amount int
	}{{"ord_1", 700}, {"ord_2", 300}} {
		if _, err := callRefund(t, cs, c.order, c.amount); err != nil {
			t.Fatalf("refund %s: %v\n%s", c.order, err, stderr.String())
		}
	}
	_, err := callRefund(t, cs, "ord_3", 1)
	code, r := refusalOf(t, err)
	if code != gateway.CodeDenied || r.Reason != "budget_exhausted" || r.Kind != "denied" ||
		r.Budget != store.ActionBudget("mcp.payments.refund", "agent", "support-bot") || r.Metric != "amount" || r.Window != "P1D" {
		t.Errorf("over budget: %d %+v, want %d budget_exhausted denied naming the budget, amount, P1D", code, r, gateway.CodeDenied)
	}
	if strings.Contains(r.Detail, "1000") {
		t.Errorf("over budget: detail %q tells the limit", r.Detail)
	}
	if lines := e.ledgerLines(t); len(lines) != 2 {
		t.Errorf("upstream ledger = %q, want the two refunds that fit", lines)
	}
}
