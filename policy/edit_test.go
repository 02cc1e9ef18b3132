package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const editPolicy = header + `actions:
  billing.refund:
    effect: "refund:{order_id}"
    arguments:
      order_id: { type: string }
      amount: { type: integer, min: 1, editable: { decrease: true, min: 100 } }
      destination: { type: string }
      note: { type: integer, optional: true, editable: { decrease: true } }
    rules:
      - when: { amount_lt: 50 }
        decision: deny
      - decision: approve
`

func TestApplyEdit(t *testing.T) {
	t.Parallel()
	p := mustParse(t, editPolicy)
	req := map[string]any{"order_id": "ord_1", "amount": int64(500), "destination": "acct_1"}
	got, changes, err := p.ApplyEdit("billing.refund", req, map[string]any{"amount": int64(400)})
	if err != nil {
		t.Fatalf("ApplyEdit(amount 400) = %v", err)
	}
	if got["amount"] != int64(400) || got["destination"] != "acct_1" || req["amount"] != int64(500) {
		t.Errorf("ApplyEdit(amount 400) = %v (request now %v), want amount 400 and the request unchanged", got, req)
	}
	if diff := cmp.Diff([]Change{{Argument: "amount", From: int64(500), To: int64(400)}}, changes); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}

	tests := []struct {
		name   string
		set    map[string]any
		reason string
		arg    string
	}{
		{"raised", map[string]any{"amount": int64(501)}, ReasonEditWidens, "amount"},
		{"below the floor", map[string]any{"amount": int64(99)}, ReasonEditWidens, "amount"},
		{"not editable", map[string]any{"destination": "acct_2"}, ReasonEditNotEditable, "destination"},
		{"undeclared", map[string]any{"extra": int64(1)}, ReasonEditNotEditable, "extra"},
		{"not passed", map[string]any{"note": int64(1)}, ReasonEditNotEditable, "note"},
		{"not an integer", map[string]any{"amount": "400"}, ReasonEditInvalid, "amount"},
		{"no change", map[string]any{"amount": int64(500)}, ReasonEditInvalid, ""},
		{"nothing", map[string]any{}, ReasonEditInvalid, ""},
		{"editable and not", map[string]any{"amount": int64(400), "destination": "acct_2"}, ReasonEditNotEditable, "destination"},
	}
	for _, tt := range tests {
		_, _, err := p.ApplyEdit("billing.refund", req, tt.set)
		var ee *EditError
		if !errors.As(err, &ee) || ee.Reason != tt.reason || ee.Argument != tt.arg {
			t.Errorf("%s: ApplyEdit(%v) = %v, want %s on %q", tt.name, tt.set, err, tt.reason, tt.arg)
		}
	}
	// A floor below what the rules deny: the edited call would be denied, so the edit is.
	low := mustParse(t, strings.Replace(editPolicy, "min: 100 }", "min: 10 }", 1))
	if _, _, err := low.ApplyEdit("billing.refund", req, map[string]any{"amount": int64(20)}); err == nil || !strings.Contains(err.Error(), "makes a call the policy denies") {
		t.Errorf("ApplyEdit to a denied amount = %v, want edit_invalid (the policy denies the edited call)", err)
	}
	if _, _, err := p.ApplyEdit("other", req, map[string]any{"amount": int64(1)}); err == nil {
		t.Errorf("ApplyEdit of an unlisted action = nil, want edit_not_editable")
	}
}

func TestEditableParse(t *testing.T) {
	t.Parallel()
	a := mustParse(t, editPolicy).Actions["billing.refund"]
	ed := a.Argument("amount").Editable
	if ed == nil || !ed.Decrease || ed.Min == nil || *ed.Min != 100 {
		t.Fatalf("editable of amount = %+v, want decrease with min 100", ed)
	}
	if a.Argument("destination").Editable != nil {
		t.Errorf("destination is editable, want not")
	}
	bad := []struct{ body, want string }{
		{"      x: { type: string, editable: { decrease: true } }\n", "editable applies to integer arguments"},
		{"      x: { type: integer, editable: { decrease: false } }\n", "decrease of the editable of argument \"x\""},
		{"      x: { type: integer, editable: { min: 3 } }\n", "does not say how it may change"},
		{"      x: { type: integer, editable: { increase: true } }\n", "unknown key"},
		{"      x: { type: integer, editable: true }\n", "expected a mapping"},
		{"      x: { type: integer, editable: { decrease: true } }\n    effect: \"k:{x}\"\n", "declared editable"},
	}
	for _, b := range bad {
		src := withAction("    decision: approve\n    arguments:\n" + b.body)
		_, err := Parse("latch.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), b.want) || !strings.HasPrefix(err.Error(), "latch.yaml:") {
			t.Errorf("Parse(%q) = %v, want an error naming the line and %q", b.body, err, b.want)
		}
	}
	// What an approver may change is part of the policy hash.
	plain := mustParse(t, strings.Replace(editPolicy, ", editable: { decrease: true, min: 100 }", "", 1))
	if plain.Hash == mustParse(t, editPolicy).Hash {
		t.Errorf("a policy with and without editable hash alike")
	}
}
