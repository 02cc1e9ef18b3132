package notify_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/notify"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

const slackPolicy = `
schema: latch.policy/v1
actions:
  billing.refund:
    effect: "refund:{invoice_id}"
    decision: approve
    arguments:
      invoice_id: { type: string, display: { label: Invoice } }
      amount: { type: integer, display: { money: { minor_units: 2, currency: EUR } } }
`

func slackRequest(t *testing.T, args map[string]any) *store.Approval {
	t.Helper()
	doc, err := json.Marshal(map[string]any{"name": "billing.refund", "arguments": args,
		"principal": map[string]any{"agent": "billing-worker", "user": "<@U0BOSS>"}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	return &store.Approval{ID: "apr_1", Status: store.Pending, ActionHash: "sha256:ab", Action: doc, ActionName: "billing.refund",
		Agent: "billing-worker", CreatedAt: at, ExpiresAt: at.Add(15 * time.Minute)}
}

// blockTexts is the mrkdwn of each section and context element, and the buttons' action ids.
func blockTexts(m notify.SlackMessage) (texts, buttons []string) {
	raw, _ := json.Marshal(m.Blocks)
	var blocks []struct {
		Type     string
		Text     struct{ Text string }
		Elements []struct {
			Text     any
			ActionID string `json:"action_id"`
		}
	}
	_ = json.Unmarshal(raw, &blocks)
	for _, b := range blocks {
		switch b.Type {
		case "section":
			texts = append(texts, b.Text.Text)
		case "context":
			for _, e := range b.Elements {
				texts = append(texts, e.Text.(string))
			}
		case "actions":
			for _, e := range b.Elements {
				buttons = append(buttons, e.ActionID)
			}
		}
	}
	return texts, buttons
}

// TestSlackApprovalMessage: the message shows the arguments in their display form and nothing
// beyond it — at most 20 of them, each at most 200 characters, the rest said to be cut — with
// every value a person or an agent typed escaped; it has buttons only while the request can be
// answered and buttons are asked for.
func TestSlackApprovalMessage(t *testing.T) {
	t.Parallel()
	pol, err := policy.Parse("latch.yaml", []byte(slackPolicy))
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"invoice_id": "inv_1\u202e", "amount": 1250, "memo": strings.Repeat("m", 500) + "TAIL"}
	for i := range 25 {
		args[fmt.Sprintf("x%02d", i)] = "<!here>"
	}
	a := slackRequest(t, args)
	now := a.CreatedAt.Add(time.Minute)
	m := notify.SlackApprovalMessage(a, pol, true, now)
	texts, buttons := blockTexts(m)
	all := strings.Join(texts, "\n") + "\n" + m.Text
	lines := strings.Split(texts[1], "\n")
	want := []string{"*Arguments*", "• Invoice (`invoice_id`): `\"inv_1\\u202e\"`", "• `amount`: `€12.50 (1250 minor units)`",
		"• `memo`: `\"" + strings.Repeat("m", 198) + "…`"}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("argument line %d = %q, want %q", i, lines[i], w)
		}
	}
	if len(lines) != 22 || lines[21] != "… and 8 more: see latch approvals or the console" {
		t.Errorf("argument lines = %d, last %q; want 20 arguments and the 8 left said to be cut", len(lines), lines[len(lines)-1])
	}
	for _, bad := range []string{"<!here>", "TAIL", "<@U0BOSS>", "\u202e", `"amount":1250`} {
		if strings.Contains(all, bad) {
			t.Errorf("the message shows %q:\n%s", bad, all)
		}
	}
	if !strings.Contains(texts[0], "for user `\"&lt;@U0BOSS&gt;\"`") && !strings.Contains(texts[0], "for user `&lt;@U0BOSS&gt;`") {
		t.Errorf("the head = %q, want the user escaped", texts[0])
	}
	if strings.Join(buttons, ",") != notify.SlackActionApprove+","+notify.SlackActionDeny {
		t.Errorf("buttons of a pending request = %v", buttons)
	}
	if _, b := blockTexts(notify.SlackApprovalMessage(a, pol, false, now)); len(b) != 0 {
		t.Errorf("buttons when none are asked for = %v", b)
	}
	expired := notify.SlackApprovalMessage(a, pol, true, a.ExpiresAt)
	if tx, b := blockTexts(expired); len(b) != 0 || !strings.Contains(strings.Join(tx, "\n"), "*Expired*") {
		t.Errorf("an expired request = %v %v, want Expired and no buttons", tx, b)
	}
	byExpiry := *a
	byExpiry.Status, byExpiry.Approver = store.Denied, store.ExpiryApprover
	if tx, b := blockTexts(notify.SlackApprovalMessage(&byExpiry, pol, true, a.ExpiresAt)); len(b) != 0 ||
		!strings.Contains(strings.Join(tx, "\n"), "*Denied* at its expiry, unanswered (`latch:expiry`)") {
		t.Errorf("a request denied at its expiry = %v %v, want it said so and no buttons", tx, b)
	}
	a.Status, a.Answers = store.Denied, []store.Answer{{Approver: store.Approver{Name: "bob", Method: store.MethodProxy, Verified: true},
		Note: "via Slack as U0BOB `x` <!channel>"}}
	tx, b := blockTexts(notify.SlackApprovalMessage(a, pol, true, now))
	if len(b) != 0 || !strings.Contains(strings.Join(tx, "\n"), "*Denied*: denied by `proxy:bob` (`via Slack as U0BOB \\x60x\\x60 &lt;!channel&gt;`)") {
		t.Errorf("a denied request = %v %v, want who denied it, escaped, and no buttons", tx, b)
	}
}
