package policy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const refundPolicy = header + `actions:
  billing.refund:
    effect: "refund:{order_id}"
    resource: "order:{order_id}"
    arguments:
      order_id: { type: string, max_length: 32, display: { label: Order } }
      amount: { type: integer, min: 1, display: { label: Refund, money: { minor_units: 2, currency_arg: currency } } }
      currency: { type: string, enum: [EUR, USD, XTS] }
      note: { type: string, optional: true }
      additional: false
    rules:
      - when: { amount_lte: 10000 }
        decision: allow
      - decision: approve
`

func TestRequirements(t *testing.T) {
	t.Parallel()
	p := mustParse(t, header+`actions:
  t.op:
    effect: "k:{id}:{resource}"
    resource: "r:{owner}"
    rules:
      - when: { amount_gt: 5, id_prefix: a }
        decision: allow
      - decision: deny
`)
	want := []Requirement{
		{Argument: "amount", By: "rule 0 (amount_gt)", Pos: Position{7, 17}},
		{Argument: "id", By: "rule 0 (id_prefix)", Pos: Position{7, 31}},
		{Argument: "owner", By: "resource template", Pos: Position{5, 15}},
	}
	if diff := cmp.Diff(want, p.Actions["t.op"].Requirements()); diff != "" {
		t.Errorf("Requirements mismatch (-want +got):\n%s", diff)
	}
	d := mustParse(t, refundPolicy).Actions["billing.refund"]
	var names []string
	for _, r := range d.Requirements() {
		names = append(names, r.Argument)
	}
	if diff := cmp.Diff([]string{"order_id", "amount", "currency"}, names); diff != "" {
		t.Errorf("Requirements of a declared action (-want +got):\n%s", diff)
	}
}

func TestCheckArguments(t *testing.T) {
	t.Parallel()
	a := mustParse(t, refundPolicy).Actions["billing.refund"]
	ok := map[string]any{"order_id": "ord_1", "amount": int64(5), "currency": "EUR"}
	tests := []struct {
		name string
		edit func(map[string]any)
		want ArgumentCheck
	}{
		{"fits", func(map[string]any) {}, ArgumentCheck{}},
		{"optional present", func(m map[string]any) { m["note"] = "hi" }, ArgumentCheck{}},
		{"missing", func(m map[string]any) { delete(m, "currency") }, ArgumentCheck{Reason: ReasonMissingArgument, Argument: "currency", Pointer: "/currency"}},
		{"wrong type", func(m map[string]any) { m["amount"] = "5" }, ArgumentCheck{Reason: ReasonInvalidArguments, Argument: "amount", Pointer: "/amount"}},
		{"below min", func(m map[string]any) { m["amount"] = int64(0) }, ArgumentCheck{Reason: ReasonInvalidArguments, Argument: "amount", Pointer: "/amount"}},
		{"too long", func(m map[string]any) { m["order_id"] = "ord_123456789012345678901234567890" }, ArgumentCheck{Reason: ReasonInvalidArguments, Argument: "order_id", Pointer: "/order_id"}},
		{"not in enum", func(m map[string]any) { m["currency"] = "eur" }, ArgumentCheck{Reason: ReasonInvalidArguments, Argument: "currency", Pointer: "/currency"}},
		{"optional of wrong type", func(m map[string]any) { m["note"] = nil }, ArgumentCheck{Reason: ReasonInvalidArguments, Argument: "note", Pointer: "/note"}},
		{"undeclared", func(m map[string]any) { m["a/b~c"] = true }, ArgumentCheck{Reason: ReasonInvalidArguments, Argument: "a/b~c", Pointer: "/a~1b~0c"}},
	}
	for _, tt := range tests {
		args := map[string]any{}
		for k, v := range ok {
			args[k] = v
		}
		tt.edit(args)
		got := a.CheckArguments(args)
		got.Msg = ""
		if got != tt.want {
			t.Errorf("%s: CheckArguments(%v) = %+v, want %+v", tt.name, args, got, tt.want)
		}
	}
}

// TestCheckArgumentsAllocations: checking arguments that fit costs the call nothing.
func TestCheckArgumentsAllocations(t *testing.T) {
	p := mustParse(t, refundPolicy)
	ok := map[string]any{"order_id": "ord_1", "amount": int64(5), "currency": "EUR"}
	ca := p.compiled[p.Actions["billing.refund"]]
	if n := testing.AllocsPerRun(100, func() { ca.schema.check("billing.refund", ok) }); n != 0 {
		t.Errorf("the argument check of fitting arguments allocates %v times, want 0", n)
	}
}

func TestView(t *testing.T) {
	t.Parallel()
	p := mustParse(t, refundPolicy)
	args := map[string]any{"amount": int64(250000), "currency": "EUR", "order_id": "ord_1", "zeta": []any{int64(1)}}
	want := []ArgumentView{
		{Name: "order_id", Label: "Order", Raw: `"ord_1"`},
		{Name: "amount", Label: "Refund", Raw: "250000", Human: "€2,500.00 (250000 minor units)"},
		{Name: "currency", Raw: `"EUR"`},
		{Name: "zeta", Raw: "[1]"},
	}
	if diff := cmp.Diff(want, p.View("billing.refund", args)); diff != "" {
		t.Errorf("View mismatch (-want +got):\n%s", diff)
	}
	args["currency"] = "ZZZ"
	if got, want := p.View("billing.refund", args)[1].Human, `2,500.00 (250000 minor units; currency "ZZZ" is not an ISO 4217 code)`; got != want {
		t.Errorf("View with an unknown currency = %q, want %q", got, want)
	}
	if got := p.View("not.listed", args); len(got) != 4 || got[0].Name != "amount" || got[0].Human != "" {
		t.Errorf("View of an unlisted action = %+v, want the raw values sorted by name", got)
	}
}

func TestFormatMoney(t *testing.T) {
	t.Parallel()
	tests := []struct {
		amount int64
		units  int
		code   string
		want   string
	}{
		{250000, 2, "EUR", "€2,500.00 (250000 minor units)"},
		{5, 2, "EUR", "€0.05 (5 minor units)"},
		{-5, 2, "GBP", "-£0.05 (-5 minor units)"},
		{1234567, 3, "BHD", "BHD 1,234.567 (1234567 minor units)"},
		{100, 0, "JPY", "JP¥100 (100 minor units)"},
		{100000, 2, "CHF", "CHF 1,000.00 (100000 minor units)"},
		{100000, 2, "", "1,000.00 (100000 minor units)"},
		{-9007199254740991, 2, "USD", "-US$90,071,992,547,409.91 (-9007199254740991 minor units)"},
		{-9223372036854775808, 0, "", "-9,223,372,036,854,775,808 (-9223372036854775808 minor units)"},
	}
	for _, tt := range tests {
		if got := FormatMoney(tt.amount, tt.units, tt.code); got != tt.want {
			t.Errorf("FormatMoney(%d, %d, %q) = %q, want %q", tt.amount, tt.units, tt.code, got, tt.want)
		}
	}
}

// TestHashWithoutArguments: a policy of the old shape hashes as before (no arguments key), and
// display hints, being presentation, do not change the hash while a bound does.
func TestHashArguments(t *testing.T) {
	t.Parallel()
	old := mustParse(t, header+"actions:\n  a:\n    decision: allow\n")
	if _, ok := Normalize(old)["actions"].(map[string]any)["a"].(map[string]any)["arguments"]; ok {
		t.Errorf("Normalize of an action without arguments: has an arguments key")
	}
	base := mustParse(t, refundPolicy)
	relabel := mustParse(t, replace(t, refundPolicy, "label: Order", "label: Commande"))
	rebound := mustParse(t, replace(t, refundPolicy, "min: 1", "min: 2"))
	if relabel.Hash != base.Hash {
		t.Errorf("a display label changed the policy hash")
	}
	if rebound.Hash == base.Hash {
		t.Errorf("a changed min did not change the policy hash")
	}
}

func replace(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("%q not in the document", old)
	}
	return strings.Replace(s, old, new, 1)
}
