// Command redelivered-webhook shows a payment provider delivering the same payout event twice.
//
// Webhook senders deliver at least once: a slow acknowledgement and the event comes again,
// possibly to another process behind the load balancer. The first delivery transfers €1,800.00
// for payout po_412; the second delivery runs in a separate OS process and is refused as a
// duplicate of a committed effect, so the bank sees one transfer.
//
// Run it with: go run ./examples/without-an-agent/redelivered-webhook
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

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/examples/internal/examplestore"
	"github.com/latchkit/latch/policy"
)

//go:embed latch.yaml
var policyYAML []byte

// Event is the webhook body the provider delivers.
type Event struct {
	ID       string `json:"id"`
	PayoutID string `json:"payout_id"`
	Amount   int64  `json:"amount"` // minor units
	Currency string `json:"currency"`
}

const body = `{"id":"evt_9f2","payout_id":"po_412","amount":180000,"currency":"EUR"}`

var dir = examplestore.Dir("redelivered-webhook")

// unguardedEnv makes the handler call the bank directly, without latch, so a test can show that
// the example's checks fail (exit 1) when nothing refuses the second delivery.
const unguardedEnv = "LATCH_EXAMPLE_UNGUARDED"

// roleEnv tells a re-executed copy of this program that it is the second delivery.
const roleEnv = "LATCH_EXAMPLE_SECOND_DELIVERY"

func main() {
	ctx := context.Background()
	if os.Getenv(roleEnv) == "1" {
		if err := deliver(ctx, "second delivery (pid "+fmt.Sprint(os.Getpid())+")"); err != nil {
			if errors.Is(err, latch.ErrDuplicateEffect) {
				os.Exit(3) // refused as it must be
			}
			fmt.Fprintln(os.Stderr, "redelivered-webhook:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "redelivered-webhook:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	if _, err := examplestore.Reset(ctx, "redelivered-webhook"); err != nil {
		return err
	}
	if err := deliver(ctx, "first delivery (pid "+fmt.Sprint(os.Getpid())+")"); err != nil {
		return fmt.Errorf("first delivery: %w", err)
	}

	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), roleEnv+"=1")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		return fmt.Errorf("the second delivery was not refused as a duplicate (%v)", err)
	}

	n, err := transfers()
	if err != nil {
		return err
	}
	fmt.Printf("\nbank transfers: %d\n", n)
	if n != 1 {
		return fmt.Errorf("the bank saw %d transfers", n)
	}
	return nil
}

// deliver is the webhook handler: decode the body, transfer through latch.
func deliver(ctx context.Context, who string) error {
	pol, err := policy.Parse("latch.yaml", policyYAML)
	if err != nil {
		return err
	}
	g, err := latch.Open(ctx, &latch.Config{Policy: pol, StoreURL: examplestore.URL("redelivered-webhook")})
	if err != nil {
		return err
	}
	defer g.Close()

	var ev Event
	if err := json.Unmarshal([]byte(body), &ev); err != nil {
		return err
	}
	transfer := latch.Protect(g, "payouts.transfer", bankTransfer, nil)
	if err := g.Check(); err != nil { // the policy and the Go type agree, or nothing starts
		return err
	}
	if os.Getenv(unguardedEnv) == "1" {
		transfer = bankTransfer // without latch: the second delivery transfers again
	}
	ctx = latch.WithPrincipal(ctx, latch.Principal{Agent: "payout-webhook"})
	ref, err := transfer(ctx, ev)
	if err != nil {
		fmt.Printf("%s of %s: refused: %v\n", who, ev.ID, err)
		return err
	}
	fmt.Printf("%s of %s: transferred €%d.%02d, bank reference %s\n", who, ev.ID, ev.Amount/100, ev.Amount%100, ref)
	return nil
}

// bankTransfer stands in for the bank: each transfer is a line in a file, so the count holds
// across processes.
func bankTransfer(ctx context.Context, ev Event) (string, error) {
	f, err := os.OpenFile(filepath.Join(dir, "bank-transfers.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return "", latch.NotExecuted(err) // the bank was never called
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "%s %d %s\n", ev.PayoutID, ev.Amount, ev.Currency); err != nil {
		return "", err
	}
	return "trf_" + ev.PayoutID, nil
}

func transfers() (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "bank-transfers.log"))
	if err != nil {
		return 0, err
	}
	return len(strings.Split(strings.TrimSpace(string(b)), "\n")), nil
}
