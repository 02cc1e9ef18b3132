package notify_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/latchkit/latch/notify"
)

// TestBudgetAlertOncePerCrossing: a budget reaching the share alerts once — not again while it
// stays at or past it — and again only after it fell below and reached it again. Counted at a
// real HTTP receiver that verifies every signature.
func TestBudgetAlertOncePerCrossing(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	n := newNotifier(t, notify.Config{URLs: []string{rcv.url}, Secret: secret, BudgetShare: 0.8})
	level := func(id string, consumed int64) notify.BudgetLevel {
		return notify.BudgetLevel{Budget: id, Kind: "grant", Metric: "count", Consumed: consumed, Limit: 10, Window: "P1D", Ratio: float64(consumed) / 10}
	}
	for _, c := range []int64{5, 7, 8, 9, 10, 8, 7, 9, 9, 3} { // crossings at 8 and at the second 9
		n.Budgets([]notify.BudgetLevel{level("ops-billing", c), level("quiet", 1)})
	}
	n.Budgets([]notify.BudgetLevel{level("action:refund.issue:agent:bot\u202e", 10)}) // first seen past the share; ops-billing forgotten
	n.Budgets([]notify.BudgetLevel{level("ops-billing", 9)})                          // seen again, past it: a new crossing
	n.Budgets([]notify.BudgetLevel{level("sentinel", 10)})                            // delivered last: every alert before it has arrived
	got := rcv.wait(t, 5)
	var ids []string
	for _, a := range got {
		var p struct {
			Budget   string  `json:"budget"`
			Consumed int64   `json:"consumed"`
			Share    float64 `json:"share"`
		}
		if err := json.Unmarshal(a.Payload, &p); err != nil || a.Alert != notify.KindBudgetThreshold || p.Share != 0.8 {
			t.Errorf("alert %+v (payload %v), want a budget_threshold alert with share 0.8", a, err)
		}
		ids = append(ids, p.Budget)
	}
	want := []string{"ops-billing", "ops-billing", "action:refund.issue:agent:bot\u202e", "ops-billing", "sentinel"}
	if strings.Join(ids, "|") != strings.Join(want, "|") || len(got) != len(want) {
		t.Errorf("alerts for %q, want %q", ids, want)
	}
	if !strings.Contains(got[2].Text, `\u202e`) || strings.Contains(got[2].Text, "\u202e") {
		t.Errorf("alert text %q shows the principal's bidi override as is, want it marked", got[2].Text)
	}
	rcv.mu.Lock()
	d0, d1 := rcv.headers[0].Get(notify.HeaderDelivery), rcv.headers[1].Get(notify.HeaderDelivery)
	rcv.mu.Unlock()
	if !strings.HasPrefix(d0, "budget:ops-billing:count:") || d0 == d1 {
		t.Errorf("deliveries %q and %q: want budget:ID:METRIC:MS, one per crossing", d0, d1)
	}
}
