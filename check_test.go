package latch_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch"
)

const checkPolicy = `schema: latch.policy/v1
actions:
  pay.send:
    effect: "pay:{payment_id}"
    arguments:
      payment_id: { type: string }
      amount: { type: integer, min: 1 }
      currency: { type: string, enum: [EUR, USD] }
      memo: { type: string, optional: true }
    rules:
      - when: { amount_lte: 10000 }
        decision: allow
      - decision: approve
  pay.closed:
    arguments:
      id: { type: string }
      additional: false
    decision: allow
  pay.loose:
    effect: "loose:{id}"
    rules:
      - when: { amount_lte: 10000 }
        decision: allow
      - decision: approve
`

type Money struct {
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

type goodPay struct {
	ID    string `json:"payment_id"`
	Money        // embedded: amount and currency are promoted
	Memo  string `json:"memo,omitempty"`
	Trace string `json:"-"`
	//lint:ignore U1000 an unexported field is part of the shape the check must accept
	note string
}

type omitPay struct {
	ID       string `json:"payment_id"`
	Amount   int64  `json:"amount,omitempty"`
	Currency string `json:"currency"`
}

type floatPay struct {
	ID       string  `json:"payment_id"`
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
}

type nestedFloat struct {
	ID string `json:"id"`
	X  struct {
		Rates []float32 `json:"rates"`
	} `json:"x"`
}

type wrongKind struct {
	ID       string `json:"payment_id"`
	Amount   string `json:"amount"`
	Currency []byte `json:"currency"` // base64 string: may be a string, fine
}

type quotedAmount struct {
	ID       string `json:"payment_id"`
	Amount   int64  `json:"amount,string"` // encodes as a string
	Currency string `json:"currency"`
}

type ptrPay struct {
	ID       *string `json:"payment_id"`
	Amount   *int64  `json:"amount"`
	Currency string  `json:"currency"`
	When     time.Time
}

type closedExtra struct {
	ID    string `json:"id"`
	Debug bool   `json:"debug"`
}

type conflict struct {
	A
	B
	ID       string `json:"payment_id"`
	Currency string `json:"currency"`
}

// A and B both promote Amount at the same depth, untagged: encoding/json drops both.
type A struct {
	Amount int64
}

type B struct {
	Amount int64
}

func protectAs[T any](g *latch.Guard, action string) {
	latch.Protect(g, action, func(context.Context, T) (struct{}, error) { return struct{}{}, nil }, nil)
}

func TestGuardCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		protect func(g *latch.Guard)
		want    []string // substrings, one per problem, in order
	}{
		{"tags, embedding, omitempty of an optional, json:- and unexported", func(g *latch.Guard) { protectAs[goodPay](g, "pay.send") }, nil},
		{"pointer to the type", func(g *latch.Guard) { protectAs[*goodPay](g, "pay.send") }, nil},
		{"omitempty of a required argument", func(g *latch.Guard) { protectAs[omitPay](g, "pay.send") },
			[]string{`argument "amount", required by the arguments: section (latch.yaml:7:7), may be absent: field Amount is omitempty`}},
		{"float", func(g *latch.Guard) { protectAs[floatPay](g, "pay.send") },
			[]string{"field Amount (float64) is a float"}},
		{"nested float", func(g *latch.Guard) { protectAs[nestedFloat](g, "pay.closed") },
			[]string{"field X.Rates (float32) is a float", `field X (JSON "x") is not declared, and action "pay.closed" says additional: false`}},
		{"kind that can never fit", func(g *latch.Guard) { protectAs[wrongKind](g, "pay.send") },
			[]string{`field Amount (string) can never encode to integer, the declared type of argument "amount" (latch.yaml:7:7)`}},
		{",string option", func(g *latch.Guard) { protectAs[quotedAmount](g, "pay.send") },
			[]string{`field Amount (int64) can never encode to integer`}},
		{"pointers may be null but may fit", func(g *latch.Guard) { protectAs[ptrPay](g, "pay.send") }, nil},
		{"unknown action", func(g *latch.Guard) { protectAs[goodPay](g, "pay.sned") },
			[]string{`the policy does not list action "pay.sned"`}},
		{"additional: false", func(g *latch.Guard) { protectAs[closedExtra](g, "pay.closed") },
			[]string{`field Debug (JSON "debug") is not declared`}},
		{"ambiguous embedded fields are dropped, as encoding/json drops them", func(g *latch.Guard) { protectAs[conflict](g, "pay.send") },
			[]string{`argument "amount", required by the arguments: section (latch.yaml:7:7), is not a JSON field of latch_test.conflict (its fields: currency, payment_id)`}},
		{"no arguments: section, referenced names required", func(g *latch.Guard) { protectAs[closedExtra](g, "pay.loose") },
			[]string{`argument "amount", required by rule 0 (amount_lte) (latch.yaml:22:17), is not a JSON field`}},
		{"map arguments cannot be checked field by field", func(g *latch.Guard) { protectAs[map[string]any](g, "pay.send") }, nil},
		{"not an object", func(g *latch.Guard) { protectAs[[]string](g, "pay.send") }, []string{"do not encode to a JSON object"}},
		{"every problem at once", func(g *latch.Guard) {
			protectAs[floatPay](g, "pay.send")
			protectAs[goodPay](g, "nope")
		}, []string{"is a float", `does not list action "nope"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, checkPolicy)
			tt.protect(e.g)
			err := e.g.Check()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Check() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check() = nil, want %d problems", len(tt.want))
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("Check() = %d problems:\n%v\nwant %d", len(lines), err, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, lines[i], w)
				}
			}
			var ce *latch.CheckError
			if !errors.As(err, &ce) || ce.Action == "" || ce.Type == "" {
				t.Errorf("Check() = %v, want *CheckError values", err)
			}
		})
	}
}
