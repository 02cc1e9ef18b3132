package client_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/latchkit/latch/auth"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/client"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/server"
	"github.com/latchkit/latch/store"
)

// A charge protected by a guard that runs in `latch serve`: the same function and the same
// errors as latch.Protect, with the guard in another process.
func ExampleProtect() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "latch-example")
	defer os.RemoveAll(dir)

	// The server side: what `latch serve` and `latch token create --agent billing-worker` do.
	p, _ := policy.Parse("latch.yaml", []byte("schema: latch.policy/v1\nactions:\n  billing.charge:\n    effect: \"charge:{invoice_id}\"\n    decision: allow\n"))
	g, err := latch.Open(ctx, &latch.Config{Policy: p, StoreURL: "sqlite:" + filepath.Join(dir, "state.db")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()
	srv, _ := server.New(g, nil)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	defer func() { stop(); <-done }()
	token, _, _ := auth.CreateToken(ctx, g.Store().(store.TokenStore), &auth.NewToken{Kind: store.TokenAgent, Agent: "billing-worker"}, time.Now())

	// The worker side.
	type Charge struct {
		InvoiceID string `json:"invoice_id"`
		Amount    int64  `json:"amount"`
	}
	c := client.New("http://"+ln.Addr().String(), token)
	charge := client.Protect(c, "billing.charge", func(ctx context.Context, ch Charge) (string, error) {
		return "ch_" + ch.InvoiceID, nil // call the processor with latch.IdempotencyToken(ctx)
	}, nil)
	id, err := charge(ctx, Charge{InvoiceID: "inv_88", Amount: 24900})
	fmt.Println(id, err)
	_, err = charge(ctx, Charge{InvoiceID: "inv_88", Amount: 24900})
	fmt.Println(errors.Is(err, latch.ErrDuplicateEffect))
	// Output:
	// ch_inv_88 <nil>
	// true
}
