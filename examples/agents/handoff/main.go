// Command handoff shows two agents, in two OS processes sharing one store, handing work from one
// to the other with a hop (docs/agents.md).
//
// The planner (this process) decides a customer is owed a refund of €42.00 and asks the billing
// agent to make it. It holds refunds of up to €1,000.00 and may delegate them; billing holds a
// far wider grant of its own. The planner:
//
//   - tries to hand on more than it holds (refunds up to €5,000.00): refused at creation,
//     authority_escalation on constraints.amount_lte, and nothing is stored;
//   - hands on refunds of at most €50.00 for the next hour, addressed to billing: a hop, whose id
//     is all that crosses to the billing process (its command line here; a message or a task's
//     payload in a real system).
//
// The billing process (this program again, started as "handoff billing HOP") presents the hop:
//
//   - the €42.00 refund runs, and its receipt names the hop;
//   - a €90.00 refund presenting the same hop is refused authority_constraint, although billing's
//     own grant would allow it: a call presenting a hop is decided by the hop's chain alone.
//
// Back in the planner, the chain is read: the record of the hop's creation (the sender's side)
// and billing's receipt (the receiver's side) name the same hop, and the payment processor was
// asked for one refund. It exits 0 only if all of that held.
//
// Run it with: go run ./examples/agents/handoff (LATCH_STORE=postgres://… to share Postgres).
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/examples/internal/examplestore"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

//go:embed latch.yaml
var policyYAML []byte

// name is the example's store name (examplestore).
const name = "agents-handoff"

// unguardedEnv makes the billing agent act without presenting the hop, as an agent falling back
// to its own grant would, so a test can show the example's checks fail (exit 1) when the hop is
// not what decides.
const unguardedEnv = "LATCH_EXAMPLE_UNGUARDED"

var (
	planner = latch.Principal{Agent: "planner"}
	billing = latch.Principal{Agent: "billing"}
)

func main() {
	var err error
	if len(os.Args) == 3 && os.Args[1] == "billing" {
		err = runBilling(context.Background(), os.Args[2])
	} else {
		err = runPlanner(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "handoff:", err)
		os.Exit(1)
	}
}

func open(ctx context.Context, url string) (*latch.Guard, error) {
	p, err := policy.Parse("latch.yaml", policyYAML)
	if err != nil {
		return nil, err
	}
	return latch.Open(ctx, &latch.Config{Policy: p, StoreURL: url})
}

// runPlanner is the sender: it creates the hop, starts the billing process with the hop's id,
// and checks what the chain recorded.
func runPlanner(ctx context.Context) error {
	url, err := examplestore.Reset(ctx, name)
	if err != nil {
		return err
	}
	g, err := open(ctx, url)
	if err != nil {
		return err
	}
	defer g.Close()

	// Wider than the planner's own grant (amount_lte 100000): refused, nothing stored.
	_, err = g.Hop(ctx, "planner-refunds", []byte("actions: [payments.refund]\nconstraints: {amount_lte: 500000}\n"), billing, planner)
	var ae *latch.AuthorityError
	if !errors.As(err, &ae) {
		return fmt.Errorf("a widening hop was not refused: %v", err)
	}
	fmt.Printf("planner: a hop of refunds up to 500000 is refused: %s on %s\n", ae.Reason, ae.Dimension)

	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	hop, err := g.Hop(ctx, "planner-refunds", fmt.Appendf(nil,
		"actions: [payments.refund]\nconstraints: {amount_lte: 5000}\nexpires_at: %s\n", until.Format(time.RFC3339)), billing, planner)
	if err != nil {
		return fmt.Errorf("hop: %w", err)
	}
	fmt.Printf("planner (pid %d): hop %s hands billing refunds up to 5000 until %s\n", os.Getpid(), hop.ID, until.Format(time.RFC3339))

	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, self, "billing", hop.ID)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("billing process: %w", err)
	}
	return check(ctx, g, hop.ID)
}

// check reads the chain and the processor's ledger after billing is done.
func check(ctx context.Context, g *latch.Guard, hopID string) error {
	var sender, receiver []string // receipt ids naming the hop, on each side
	for sealed, err := range g.Store().Receipts(ctx, store.ReceiptFilter{}) {
		if err != nil {
			return fmt.Errorf("read receipts: %w", err)
		}
		var doc struct {
			ReceiptID  string `json:"receipt_id"`
			Kind       string `json:"kind"`
			Result     string `json:"result"`
			Delegation *struct {
				ID string `json:"delegation_id"`
			} `json:"delegation"`
			Authority *struct {
				DelegationID string `json:"delegation_id"`
			} `json:"authority"`
		}
		if err := json.Unmarshal(sealed.Doc, &doc); err != nil {
			return fmt.Errorf("receipt %d: %w", sealed.Seq, err)
		}
		switch {
		case doc.Kind == receipt.KindDelegation && doc.Delegation != nil && doc.Delegation.ID == hopID:
			sender = append(sender, doc.ReceiptID)
		case doc.Authority != nil && doc.Authority.DelegationID == hopID && doc.Result == receipt.Committed:
			receiver = append(receiver, doc.ReceiptID)
		}
	}
	fmt.Printf("chain: %d record of the hop's creation (planner), %d committed call under it (billing), both naming %s\n", len(sender), len(receiver), hopID)

	ledger, err := os.ReadFile(ledgerPath())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	refunds := strings.Fields(string(ledger))
	fmt.Printf("processor refunds: %d (%s)\n", len(refunds), strings.Join(refunds, " "))

	switch {
	case len(sender) != 1 || len(receiver) != 1:
		return fmt.Errorf("want one record on each side naming hop %s, got %d and %d", hopID, len(sender), len(receiver))
	case len(refunds) != 1:
		return fmt.Errorf("want one refund at the processor, got %d: a refund beyond the hop ran", len(refunds))
	}
	fmt.Printf("see both sides with: latch inspect --hop %s\n", hopID)
	return nil
}

// runBilling is the receiver, in its own process: it presents the hop it was handed.
func runBilling(ctx context.Context, hopID string) error {
	g, err := open(ctx, examplestore.URL(name))
	if err != nil {
		return err
	}
	defer g.Close()
	ctx = latch.WithPrincipal(ctx, billing)
	present := hopID
	if os.Getenv(unguardedEnv) == "1" {
		present = "" // falls back to billing's own grant
	}

	fmt.Printf("billing (pid %d): handed hop %s\n", os.Getpid(), hopID)
	rc, err := refund(ctx, g, present, "rf_1001", 4200)
	if err != nil {
		return fmt.Errorf("the refund the planner asked for: %w", err)
	}
	fmt.Printf("billing: refund rf_1001 of 4200 presenting the hop: %s, receipt %s names delegation %s\n", rc.Result, rc.ReceiptID, delegationOf(rc))

	// Beyond the hop, within billing's own grant.
	own, err := g.Evaluate(ctx, &latch.Call{Action: "payments.refund", Arguments: args("rf_1002", 9000)})
	if err != nil {
		return err
	}
	fmt.Printf("billing: refund rf_1002 of 9000 without the hop would be %s by its own grant %s\n", own.Decision, own.Authority.GrantID)
	_, err = refund(ctx, g, present, "rf_1002", 9000)
	var ae *latch.AuthorityError
	switch {
	case errors.As(err, &ae):
		fmt.Printf("billing: refund rf_1002 of 9000 presenting the hop: refused %s on %s (its own grant is not used)\n", ae.Reason, ae.Dimension)
	case err != nil:
		return err
	default:
		fmt.Println("billing: refund rf_1002 of 9000 ran")
	}
	return nil
}

func args(id string, amount int64) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"refund_id": id, "amount": amount})
	return b
}

// refund asks the payment processor (a ledger file both processes can read) for a refund.
func refund(ctx context.Context, g *latch.Guard, hop, id string, amount int64) (*latch.Receipt, error) {
	return g.Execute(ctx, &latch.Call{Action: "payments.refund", Arguments: args(id, amount), Options: &latch.Options{Hop: hop}},
		func(context.Context, json.RawMessage) (any, error) {
			f, err := os.OpenFile(ledgerPath(), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err != nil {
				return nil, latch.NotExecuted(err)
			}
			defer f.Close()
			if _, err := fmt.Fprintln(f, id); err != nil {
				return nil, err
			}
			return map[string]any{"refund": id, "amount": amount}, nil
		})
}

func delegationOf(rc *latch.Receipt) string {
	if rc.Authority == nil || rc.Authority.DelegationID == "" {
		return "none"
	}
	return rc.Authority.DelegationID
}

func ledgerPath() string { return filepath.Join(examplestore.Dir(name), "processor.ledger") }
