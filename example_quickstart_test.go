package latch_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/latchkit/latch"
)

// quickstartPolicy is the latch.yaml of README's quickstart, byte for byte (TestReadmeQuickstart).
const quickstartPolicy = `schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"       # the effect key: one invoice, one charge
    arguments:                          # what a call passes: a misspelt name in a rule is refused
      invoice_id: { type: string }
      amount: { type: integer, min: 1, display: { money: { minor_units: 2, currency: EUR } } }
    rules:
      - when: { amount_lte: 50000 }     # integer minor units; floats are refused
        decision: allow
      - decision: approve                # bigger charges wait for a human
`

// paymentProcessor stands in for a payment processor's client: it charges once per
// idempotency key, as a processor that honours idempotency keys does.
type paymentProcessor struct{ charged map[string]string }

func (p *paymentProcessor) Charge(ctx context.Context, invoiceID string, amount int64, idempotencyKey string) (string, error) {
	if id, ok := p.charged[idempotencyKey]; ok {
		return id, nil
	}
	id := fmt.Sprintf("ch_%s_%d", invoiceID, amount)
	p.charged[idempotencyKey] = id
	return id, nil
}

var processor = &paymentProcessor{charged: map[string]string{}}

// The quickstart of the README: a policy file in the working directory, a guard with every
// default, and a protected charge. The code between the quickstart markers is the README's, and
// TestReadmeQuickstart fails when the two differ.
func Example_quickstart() {
	// A fresh working directory holding README's latch.yaml.
	dir, err := os.MkdirTemp("", "latch-quickstart-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	wd, err := os.Getwd()
	if err != nil {
		log.Fatal(err)
	}
	if err := os.Chdir(dir); err != nil {
		log.Fatal(err)
	}
	defer os.Chdir(wd)
	if err := os.WriteFile("latch.yaml", []byte(quickstartPolicy), 0o600); err != nil {
		log.Fatal(err)
	}

	// quickstart: begin
	ctx := context.Background()
	g, err := latch.Open(ctx, nil) // ./latch.yaml; SQLite store in ./.latch/state.db
	if err != nil {
		log.Fatal(err) // a missing or invalid policy never runs permissively
	}
	defer g.Close()

	type Charge struct {
		InvoiceID string `json:"invoice_id"`
		Amount    int64  `json:"amount"` // integer minor units: 24900 is €249.00
	}
	charge := latch.Protect(g, "billing.charge", func(ctx context.Context, c Charge) (string, error) {
		return processor.Charge(ctx, c.InvoiceID, c.Amount, latch.IdempotencyToken(ctx)) // per-attempt key
	}, nil)
	if err := g.Check(); err != nil {
		log.Fatal(err) // the policy and the Go types agree, or nothing starts
	}

	ctx = latch.WithPrincipal(ctx, latch.Principal{Agent: "billing-worker"})
	for range 2 { // a retry of the same invoice: one charge
		id, err := charge(ctx, Charge{InvoiceID: "inv_88", Amount: 24900})
		switch {
		case errors.Is(err, latch.ErrDuplicateEffect): // already charged: do not retry
			fmt.Println("already charged")
		case errors.Is(err, latch.ErrAmbiguousEffect): // an earlier attempt's outcome is unknown: a human decides
		case errors.Is(err, latch.ErrAmbiguous): // this attempt's outcome is unknown: recorded, retries refused
		case errors.Is(err, latch.ErrApprovalRequired): // stored for a human; call again WithApproval once granted
		case errors.Is(err, latch.ErrDenied): // not on the list, no rule allows it, or an argument is missing
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Println("charged", id)
		}
	}
	// quickstart: end

	// Output:
	// charged ch_inv_88_24900
	// already charged
}
