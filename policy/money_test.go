package policy

import "testing"

// An amount whose currency comes from an argument is read with that currency's ISO 4217
// exponent, whatever minor_units the policy wrote (it cannot know the currency): ¥250,000 is
// JP¥250,000, not JP¥2,500.00. A currency that is not a code keeps the policy's minor_units.
func TestViewCurrencyExponent(t *testing.T) {
	t.Parallel()
	p := mustParse(t, header+`actions:
  pay.charge:
    effect: "pay:{id}"
    arguments:
      id: { type: string }
      amount: { type: integer, display: { money: { minor_units: 2, currency_arg: currency } } }
      currency: { type: string }
    decision: allow
`)
	for _, tt := range []struct{ currency, want string }{
		{"JPY", "JP¥250,000 (250000 minor units)"},
		{"KRW", "₩250,000 (250000 minor units)"},
		{"EUR", "€2,500.00 (250000 minor units)"},
		{"USD", "US$2,500.00 (250000 minor units)"},
		{"KWD", "KWD 250.000 (250000 minor units)"},
		{"BHD", "BHD 250.000 (250000 minor units)"},
		{"CLF", "CLF 25.0000 (250000 minor units)"},
		{"ZZZ", `2,500.00 (250000 minor units; currency "ZZZ" is not an ISO 4217 code)`},
		{"jpy", `2,500.00 (250000 minor units; currency "jpy" is not an ISO 4217 code)`},
	} {
		args := map[string]any{"id": "x", "amount": int64(250000), "currency": tt.currency}
		if got := p.View("pay.charge", args)[1].Human; got != tt.want {
			t.Errorf("View(amount 250000, currency %s) = %q, want %q", tt.currency, got, tt.want)
		}
	}
	// A fixed currency is read as the policy says.
	fixed := mustParse(t, header+`actions:
  pay.yen:
    effect: "pay:{id}"
    arguments:
      id: { type: string }
      amount: { type: integer, display: { money: { minor_units: 0, currency: JPY } } }
    decision: allow
`)
	if got, want := fixed.View("pay.yen", map[string]any{"id": "x", "amount": int64(250000)})[1].Human, "JP¥250,000 (250000 minor units)"; got != want {
		t.Errorf("View(fixed JPY) = %q, want %q", got, want)
	}
}

func TestMinorUnits(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		code string
		want int
		ok   bool
	}{
		{"EUR", 2, true}, {"USD", 2, true}, {"GBP", 2, true}, {"CHF", 2, true},
		{"JPY", 0, true}, {"KRW", 0, true}, {"VND", 0, true}, {"ISK", 0, true}, {"CLP", 0, true},
		{"KWD", 3, true}, {"BHD", 3, true}, {"JOD", 3, true}, {"OMR", 3, true}, {"TND", 3, true}, {"IQD", 3, true}, {"LYD", 3, true},
		{"CLF", 4, true},
		{"XAU", 0, true}, {"XDR", 0, true},
		{"ZZZ", 0, false}, {"", 0, false}, {"eur", 0, false},
	} {
		if got, ok := MinorUnits(tt.code); got != tt.want || ok != tt.ok {
			t.Errorf("MinorUnits(%q) = %d, %t; want %d, %t", tt.code, got, ok, tt.want, tt.ok)
		}
	}
}
