package identity

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// TestGuardWithJWT runs calls through a guard whose principals come from verified tokens: a
// valid token runs and is attributed; an expired one is refused before any decision and recorded
// principal_expired; a forged one is refused with ErrIdentity and writes nothing.
func TestGuardWithJWT(t *testing.T) {
	t.Parallel()
	k := keys()
	clk := newClock(t0)
	j := newJWT(t, &Config{Issuer: testIssuer, Audience: testAudience, KeyFiles: []string{writePEM(t, t.TempDir(), "ed.pem", k.ed.Public())}, Now: clk.Now})
	p, err := policy.Parse("latch.yaml", []byte("schema: latch.policy/v1\nactions:\n  report.read:\n    decision: allow\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: "sqlite:" + t.TempDir() + "/s.db", Identity: j, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	runs := 0
	call := func(token string) error {
		_, err := g.Execute(latch.WithCredential(t.Context(), "Bearer "+token), &latch.Call{Action: "report.read"},
			func(context.Context, json.RawMessage) (any, error) { runs++; return nil, nil })
		return err
	}
	lastDoc := func() map[string]any {
		var doc map[string]any
		for r, err := range g.Store().Receipts(t.Context(), store.ReceiptFilter{Last: 1}) {
			if err != nil {
				t.Fatal(err)
			}
			_ = json.Unmarshal(r.Doc, &doc)
		}
		return doc
	}

	valid := sign(t, jwt.SigningMethodEdDSA, k.ed, claims(), nil)
	if err := call(valid); err != nil {
		t.Fatalf("valid token: %v", err)
	}
	if doc := lastDoc(); doc["principal"].(map[string]any)["agent"] != "agent-1" || doc["principal"].(map[string]any)["issuer"] != testIssuer {
		t.Errorf("receipt principal = %v", doc["principal"])
	}

	forged := sign(t, jwt.SigningMethodEdDSA, k.ed2, claims(), nil)
	head, _ := g.Store().Head(t.Context())
	if err := call(forged); !errors.Is(err, latch.ErrIdentity) {
		t.Fatalf("forged token err = %v, want ErrIdentity", err)
	}
	if h, _ := g.Store().Head(t.Context()); h != head {
		t.Errorf("a forged token wrote a receipt")
	}

	clk.Set(t0.Add(2 * time.Hour))
	var d *latch.DeniedError
	if err := call(valid); !errors.As(err, &d) || d.Reason != "principal_expired" {
		t.Fatalf("expired token err = %v, want denied principal_expired", err)
	}
	if doc := lastDoc(); doc["decision_reason"] != "principal_expired" || doc["principal"].(map[string]any)["agent"] != "agent-1" {
		t.Errorf("expired receipt = %v %v", doc["decision_reason"], doc["principal"])
	}
	if runs != 1 {
		t.Errorf("executor ran %d times, want 1", runs)
	}
}
