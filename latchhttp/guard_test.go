package latchhttp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/latchhttp"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

const shipPolicy = `schema: latch.policy/v1
actions:
  shipping.create:
    effect: "ship:{order_id}"
    decision: allow
`

type shipment struct {
	OrderID string `json:"order_id"`
}

// shipper is a protected executor that creates a shipment at url() through latchhttp.Do.
func shipper(t *testing.T, backend string, url func() string) (*latch.Guard, func(context.Context, shipment) (string, error)) {
	t.Helper()
	pol, err := policy.Parse("latch.yaml", []byte(shipPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: pol, StoreURL: testdb.URL(t, backend, "latchhttp")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	ship := latch.Protect(g, "shipping.create", func(ctx context.Context, s shipment) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url(), strings.NewReader(`{"order":"`+s.OrderID+`"}`))
		if err != nil {
			return "", latch.NotExecuted(err)
		}
		req.Header.Set("Idempotency-Key", latch.IdempotencyToken(ctx))
		resp, err := latchhttp.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		return "shp_" + s.OrderID, nil
	}, nil)
	return g, ship
}

func effectState(t *testing.T, g *latch.Guard, key string) store.State {
	t.Helper()
	e, err := g.Store().Effect(t.Context(), key)
	if err != nil {
		t.Fatalf("Effect(%s): %v", key, err)
	}
	return e.State
}

// Through a guard, on SQLite and Postgres: a request that never left is retried and runs once;
// a request whose reply was lost leaves the effect ambiguous and the retry is refused without
// a second request.
func TestThroughAGuard(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend+"/not sent, retried, runs once", func(t *testing.T) {
			t.Parallel()
			var hits atomic.Int32
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				w.WriteHeader(http.StatusCreated)
			}))
			t.Cleanup(up.Close)
			target := closedURL(t) // the remote is down for the first attempt
			g, ship := shipper(t, backend, func() string { return target })
			ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "shipping-worker"})

			_, err := ship(ctx, shipment{OrderID: "o_1"})
			if !errors.Is(err, latch.ErrNotExecuted) {
				t.Fatalf("first attempt = %v, want NotExecuted", err)
			}
			if s := effectState(t, g, "ship:o_1"); s != store.Failed {
				t.Fatalf("after a refused dial the effect is %s, want failed", s)
			}
			target = up.URL
			if id, err := ship(ctx, shipment{OrderID: "o_1"}); err != nil || id != "shp_o_1" {
				t.Fatalf("retry = %q, %v; want shp_o_1", id, err)
			}
			_, err = ship(ctx, shipment{OrderID: "o_1"})
			if !errors.Is(err, latch.ErrAlreadyCommitted) {
				t.Errorf("third attempt = %v, want ErrAlreadyCommitted", err)
			}
			if n := hits.Load(); n != 1 {
				t.Errorf("remote created %d shipments, want 1", n)
			}
		})
		t.Run(backend+"/reply lost, retry refused", func(t *testing.T) {
			t.Parallel()
			lost := newRawServer(t, hang)
			var hits atomic.Int32
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
			t.Cleanup(up.Close)
			target := lost.url()
			g, ship := shipper(t, backend, func() string { return target })
			ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "shipping-worker"})

			_, err := ship(ctx, shipment{OrderID: "o_2"})
			if !errors.Is(err, latch.ErrAmbiguous) || errors.Is(err, latch.ErrNotExecuted) {
				t.Fatalf("first attempt = %v, want ErrAmbiguous", err)
			}
			if s := effectState(t, g, "ship:o_2"); s != store.Ambiguous {
				t.Fatalf("after a lost reply the effect is %s, want ambiguous", s)
			}
			target = up.URL // the remote is healthy again: the retry must still not run
			_, err = ship(ctx, shipment{OrderID: "o_2"})
			if !errors.Is(err, latch.ErrAmbiguousEffect) {
				t.Fatalf("retry = %v, want ErrAmbiguousEffect", err)
			}
			if n, m := lost.requests.Load(), hits.Load(); n != 1 || m != 0 {
				t.Errorf("remote saw %d requests then %d, want 1 then 0", n, m)
			}
		})
	}
}
