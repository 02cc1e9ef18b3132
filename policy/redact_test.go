package policy

import (
	"encoding/json"
	"strings"
	"testing"
)

const redactPolicy = header + `actions:
  billing.charge:
    effect: "charge:{order_id}"
    arguments:
      order_id: { type: string }
      card_number: { type: string, redact: last4, display: { label: Card } }
      cvc: { type: string, redact: true }
      iban: { type: string, redact: hash }
      amount: { type: integer }
    rules:
      - decision: approve
`

func TestRedact(t *testing.T) {
	t.Parallel()
	p := mustParse(t, redactPolicy)
	args := map[string]any{"order_id": "ord_1", "card_number": "4242424242424242", "cvc": "123", "iban": "DE89370400440532013000", "amount": int64(500)}
	got := p.Redact("billing.charge", args)
	if got["card_number"] != "••••4242" || got["cvc"] != "••••" || got["order_id"] != "ord_1" || got["amount"] != int64(500) {
		t.Errorf("Redact = %v, want card ••••4242, cvc ••••, the rest unchanged", got)
	}
	if h, _ := got["iban"].(string); !strings.HasPrefix(h, "sha256:") || strings.Contains(h, "DE89") {
		t.Errorf("Redact iban = %q, want a sha256 prefix", h)
	}
	if args["card_number"] != "4242424242424242" {
		t.Errorf("Redact changed its input: %v", args)
	}
	raw, _ := json.Marshal(args)
	red := string(p.RedactJSON("billing.charge", raw))
	for _, secret := range []string{"4242424242424242", "DE89370400440532013000", `"123"`} {
		if strings.Contains(red, secret) {
			t.Errorf("RedactJSON = %s, shows %s", red, secret)
		}
	}
	if !strings.Contains(red, "••••4242") {
		t.Errorf("RedactJSON = %s, want ••••4242", red)
	}
	if got := string(p.RedactJSON("billing.charge", json.RawMessage(`[1]`))); got != "{}" {
		t.Errorf("RedactJSON(not an object) = %s, want {}", got)
	}
	if got := string(p.RedactJSON("other", raw)); got != string(raw) {
		t.Errorf("RedactJSON(unlisted action) = %s, want the input", got)
	}
	for _, v := range p.View("billing.charge", args) {
		if strings.Contains(v.String(), "4242424242424242") || strings.Contains(v.String(), "DE8937") {
			t.Errorf("View shows %s", v)
		}
		if v.Name == "card_number" && (!v.Redacted || v.Label != "Card" || v.Raw != `"••••4242"`) {
			t.Errorf("View card_number = %+v, want redacted ••••4242 labelled Card", v)
		}
	}
}

func TestRedactionMask(t *testing.T) {
	t.Parallel()
	tests := []struct {
		r    Redaction
		v    any
		want string
	}{
		{RedactLast4, "4242424242424242", "••••4242"},
		{RedactLast4, int64(12345678), "••••5678"},
		{RedactLast4, "1234567", "••••"}, // too short: four would be most of it
		{RedactLast4, true, "••••"},
		{RedactFull, "anything", "••••"},
		{RedactFull, map[string]any{"a": "b"}, "••••"},
	}
	for _, tt := range tests {
		if got := tt.r.Mask(tt.v); got != tt.want {
			t.Errorf("%s.Mask(%v) = %q, want %q", tt.r, tt.v, got, tt.want)
		}
	}
	if a, b := RedactHash.Mask("x"), RedactHash.Mask("x"); a != b || a == RedactHash.Mask("y") {
		t.Errorf("hash masks: x %q, x %q, y %q: want equal for equal values only", a, b, RedactHash.Mask("y"))
	}
}

func TestRedactParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ args, want string }{
		{`card: { type: string, redact: maybe }`, "redact of argument \"card\""},
		{`card: { type: boolean, redact: last4 }`, "redact: last4 applies to string and integer"},
		{`card: { type: integer, redact: true, editable: { decrease: true } }`, "both redact and editable"},
		{`card: { type: integer, redact: true, display: { money: { minor_units: 2, currency: EUR } } }`, "both redact and display money"},
	}
	for _, tt := range tests {
		src := header + "actions:\n  a:\n    effect: \"a:{id}\"\n    arguments:\n      id: { type: string }\n      " + tt.args + "\n    rules:\n      - decision: allow\n"
		_, err := Parse("p.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%s) = %v, want an error containing %q", tt.args, err, tt.want)
		}
	}
	budget := header + "actions:\n  a:\n    effect: \"a:{id}\"\n    arguments:\n      id: { type: string }\n      pin: { type: integer, redact: true }\n    budgets:\n      - { metric: pin, limit: 10, window: PT1H, per: agent }\n    rules:\n      - decision: allow\n"
	if _, err := Parse("p.yaml", []byte(budget)); err == nil || !strings.Contains(err.Error(), "meters argument \"pin\", declared redact") {
		t.Errorf("Parse(budget metering a redacted argument) = %v, want declared redact", err)
	}
	src := header + "actions:\n  a:\n    effect: \"a:{card}\"\n    arguments:\n      card: { type: string, redact: last4 }\n    rules:\n      - decision: allow\n"
	if _, err := Parse("p.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), "declared redact") {
		t.Errorf("Parse(effect template of a redacted argument) = %v, want declared redact", err)
	}
}

func TestLooksSecret(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"card_number": true, "cardNumber": true, "api_key": true, "apiKey": true, "access-token": true,
		"password": true, "iban": true, "CVC": true, "pin": true, "user.ssn": true,
		"amount": false, "order_id": false, "shipping": false, "idempotency_key": false, "spinner": false, "tokens_used": false,
	} {
		if got := LooksSecret(name); got != want {
			t.Errorf("LooksSecret(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestWarnUnredactedSecret(t *testing.T) {
	t.Parallel()
	src := header + `actions:
  a:
    effect: "a:{id}"
    arguments:
      id: { type: string }
      card_number: { type: string }
      api_token: { type: string, redact: true }
      password: { type: string, redact: false }
    rules:
      - decision: allow
`
	var got []string
	for _, w := range mustParse(t, src).Warnings() {
		if w.Code == WarnUnredactedSecret {
			got = append(got, w.Msg)
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], `"card_number"`) {
		t.Errorf("unredacted_secret warnings = %q, want one, for card_number", got)
	}
}

func TestRedactedAnywhere(t *testing.T) {
	t.Parallel()
	p := mustParse(t, header+`actions:
  a:
    effect: "a:{id}"
    arguments:
      id: { type: string }
      card: { type: string, redact: last4 }
      note: { type: string }
    rules:
      - decision: allow
  b:
    effect: "b:{id}"
    arguments:
      id: { type: string }
      card: { type: string, redact: true }
      iban: { type: string, redact: hash }
    rules:
      - decision: allow
`)
	got := p.RedactedAnywhere()
	if len(got) != 2 || got["card"] != RedactFull || got["iban"] != RedactHash {
		t.Errorf("RedactedAnywhere = %v, want card full (the least shown) and iban hash", got)
	}
	if (*Policy)(nil).RedactedAnywhere() != nil {
		t.Errorf("RedactedAnywhere of no policy is not nil")
	}
}

// TestRedactPolicyHash: redaction changes what receipts record, so it is part of the policy
// hash; a policy without it hashes as before (redact: false is no redaction).
func TestRedactPolicyHash(t *testing.T) {
	t.Parallel()
	src := func(decl string) string {
		return header + "actions:\n  a:\n    effect: \"a:{id}\"\n    arguments:\n      id: { type: string }\n      card: { type: string" + decl + " }\n    rules:\n      - decision: allow\n"
	}
	plain, off := mustParse(t, src("")).Hash, mustParse(t, src(", redact: false")).Hash
	last4, full := mustParse(t, src(", redact: last4")).Hash, mustParse(t, src(", redact: true")).Hash
	if plain != off || plain == last4 || last4 == full {
		t.Errorf("hashes: plain %s, redact false %s, last4 %s, true %s; want plain = false, and the rest distinct", plain, off, last4, full)
	}
}
