package receipt

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestRedactArguments(t *testing.T) {
	t.Parallel()
	args := json.RawMessage(`{"amount":5,"card":"4242424242424242","pin":1234}`)
	out, err := RedactArguments(args, map[string]string{"card": "last4", "pin": "full"}, map[string]string{"card": "••••4242", "pin": "••••"})
	if err != nil {
		t.Fatal(err)
	}
	if s := string(out); strings.Contains(s, "4242424242424242") || strings.Contains(s, "1234") || !strings.Contains(s, `"amount":5`) {
		t.Fatalf("RedactArguments = %s, want card and pin committed, amount kept", s)
	}
	card, err := RedactedArgument(out, "card")
	if err != nil || card.Shown != "••••4242" || card.Redacted != "last4" {
		t.Fatalf("RedactedArgument(card) = %+v, %v", card, err)
	}
	// The value proves itself whatever its spelling; nothing else does, and a tampered salt
	// or commitment proves nothing.
	if !card.Check(json.RawMessage(`"4242424242424242"`)) || card.Check(json.RawMessage(`"4242424242424243"`)) {
		t.Errorf("Check: the number does not prove, or another does")
	}
	pin, _ := RedactedArgument(out, "pin")
	if !pin.Check(json.RawMessage(`1234`)) || pin.Check(json.RawMessage(`"1234"`)) {
		t.Errorf("Check(pin): want the integer 1234 alone to prove")
	}
	bad := card
	bad.Salt = strings.Repeat("0", 32)
	if bad.Check(json.RawMessage(`"4242424242424242"`)) {
		t.Errorf("Check with another salt proves the number")
	}
	// A fresh salt each time: two receipts of the same value do not show equal commitments.
	again, _ := RedactArguments(args, map[string]string{"card": "last4"}, map[string]string{"card": "••••4242"})
	if c2, _ := RedactedArgument(again, "card"); c2.Commitment == card.Commitment {
		t.Errorf("two commitments of one value are equal: %s", c2.Commitment)
	}
	if _, err := RedactedArgument(out, "amount"); !errors.Is(err, ErrNotRedacted) {
		t.Errorf("RedactedArgument(amount) = %v, want ErrNotRedacted", err)
	}
	if !HasRedacted(out) || HasRedacted(args) {
		t.Errorf("HasRedacted: %v of the redacted, %v of the plain arguments; want true, false", HasRedacted(out), HasRedacted(args))
	}
	if same, _ := RedactArguments(args, nil, nil); string(same) != string(args) {
		t.Errorf("RedactArguments(nothing redacted) = %s, want the input", same)
	}
}
