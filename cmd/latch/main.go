// Command latch is the operator's side of latch: check and evaluate the policy, answer approval
// requests, resolve ambiguous effects, read and verify the receipt chain. See docs/cli.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/latchkit/latch/internal/cli"
	"github.com/latchkit/latch/internal/verify"
)

func main() {
	verify.Child() // a re-executed `latch verify` racer (G4) does its part and exits here
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.MainLookup(ctx, os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv)
	stop()
	os.Exit(code)
}
