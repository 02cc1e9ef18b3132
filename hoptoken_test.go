package latch_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
)

// refusedHop asserts that g refuses the refund presenting tok as agent authority_hop (Execute),
// and that the authority decision's trace says why (Evaluate, which writes nothing).
func refusedHop(t *testing.T, g *latch.Guard, agent, tok, why string) {
	t.Helper()
	var ae *latch.AuthorityError
	if _, err := refundAs(t, g, agent, tok, "rf_refused", 10); !errors.As(err, &ae) || ae.Reason != "authority_hop" {
		t.Errorf("Execute = %v, want authority_hop", err)
	}
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: agent})
	ev, err := g.Evaluate(ctx, &latch.Call{Action: "payments.refund", Arguments: []byte(`{"refund_id":"rf_refused","amount":10}`), Options: &latch.Options{Hop: tok}})
	if err != nil || ev.Authority == nil || ev.Authority.Reason != "authority_hop" || !strings.Contains(strings.Join(ev.Authority.Trace, "; "), why) {
		t.Errorf("Evaluate = %+v, %v; want authority_hop with a trace saying %q", ev, err, why)
	}
}

// TestHopToken: on both stores, the sender's guard signs a compact token for a hop, and the
// receiver's guard (another guard on the same store, holding only the public key) accepts it
// where the hop's id is accepted: the call within the hop runs and its receipt names the hop,
// one beyond it is refused by the hop. A token presented by another agent, expired, signed by
// another key, altered, of another type, or presented to a guard with no hop keys is refused
// authority_hop naming the check; a valid token for a revoked hop is refused by the store's
// record.
func TestHopToken(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			p, err := policy.Parse("latch.yaml", []byte(hopDoc))
			if err != nil {
				t.Fatal(err)
			}
			pub, key, _ := ed25519.GenerateKey(rand.Reader)
			otherPub, otherKey, _ := ed25519.GenerateKey(rand.Reader)
			c := newClock()
			url := testdb.URL(t, backend, "latch_hoptoken")
			open := func(cfg latch.Config) *latch.Guard {
				cfg.Policy, cfg.StoreURL, cfg.Now = p, url, c.Now
				g, err := latch.Open(ctx, &cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { g.Close() })
				return g
			}
			sender := open(latch.Config{HopKey: key})
			receiver := open(latch.Config{HopVerifyKeys: []ed25519.PublicKey{otherPub, pub}}) // rotation: either key
			keyless := open(latch.Config{})

			planner, billing := latch.Principal{Agent: "planner"}, latch.Principal{Agent: "billing"}
			hop, err := sender.Hop(ctx, "planner-refunds", []byte("actions: [payments.refund]\nconstraints: {amount_lte: 500}\nexpires_at: "+c.Now().Add(time.Hour).UTC().Format(time.RFC3339)+"\n"), billing, planner)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := sender.HopToken(hop)
			if err != nil {
				t.Fatalf("HopToken: %v", err)
			}
			if _, err := receiver.HopToken(hop); err == nil {
				t.Error("a guard without HopKey issued a token")
			}

			rc, err := refundAs(t, receiver, "billing", tok, "rf_1", 400)
			if err != nil || rc.Authority == nil || rc.Authority.DelegationID != hop.ID {
				t.Fatalf("a call presenting the token = %+v, %v; want run under %s", rc, err, hop.ID)
			}
			var ae *latch.AuthorityError
			if _, err := refundAs(t, receiver, "billing", tok, "rf_2", 800); !errors.As(err, &ae) || ae.Reason != "authority_constraint" {
				t.Errorf("beyond the hop presenting the token: %v, want authority_constraint", err)
			}

			wrongType := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"hop": hop.ID, "aud": "billing", "exp": c.Now().Add(time.Hour).Unix(), "iat": c.Now().Unix()})
			wt, _ := wrongType.SignedString(key)
			otherSender := open(latch.Config{HopKey: otherKey})
			other, _ := otherSender.HopToken(hop) // signed by a key the keyless guard does not know
			parts := strings.Split(tok, ".")
			altered := parts[0] + "." + strings.TrimRight(parts[1], "=") + "x." + parts[2]
			for _, tc := range []struct {
				name, agent, tok, detail string
			}{
				{"presented by another agent", "planner", tok, "is addressed to billing, not to the caller"},
				{"altered", "billing", altered, "not valid"},
				{"another type", "billing", wt, "not latch-hop+jwt"},
				{"no hop keys", "billing", tok, "this guard has no hop keys"},
			} {
				g := receiver
				if tc.name == "no hop keys" {
					g = keyless
				}
				t.Run(tc.name, func(t *testing.T) { refusedHop(t, g, tc.agent, tc.tok, tc.detail) })
			}
			// Signed by a key the receiver trusts only after rotation: otherKey is in its list.
			if _, err := refundAs(t, receiver, "billing", other, "rf_3", 10); err != nil {
				t.Errorf("a token signed by the other trusted key: %v", err)
			}
			onlyPub := open(latch.Config{HopVerifyKeys: []ed25519.PublicKey{pub}})
			refusedHop(t, onlyPub, "billing", other, "not signed by a key this guard trusts")

			// Revoked: the token still verifies, the store's record refuses it.
			if _, err := sender.Revoke(ctx, hop.ID, "planner"); err != nil {
				t.Fatal(err)
			}
			if _, err := refundAs(t, receiver, "billing", tok, "rf_5", 10); !errors.As(err, &ae) || ae.Reason != "authority_hop" {
				t.Errorf("a revoked hop's token: %v, want authority_hop", err)
			}

			// Expired: past the hop's expires_at, the token itself has expired.
			hop2, err := sender.Hop(ctx, "planner-refunds", []byte("actions: [payments.refund]\nconstraints: {amount_lte: 500}\nexpires_at: "+c.Now().Add(time.Minute).UTC().Format(time.RFC3339)+"\n"), billing, planner)
			if err != nil {
				t.Fatal(err)
			}
			tok2, err := sender.HopToken(hop2)
			if err != nil {
				t.Fatal(err)
			}
			c.Add(2 * time.Minute)
			refusedHop(t, receiver, "billing", tok2, "has expired")
			if _, err := sender.HopToken(hop2); err == nil {
				t.Error("HopToken signed a token for an expired hop")
			}
		})
	}
}

// TestHopKeysChecked: Open refuses hop keys that are not Ed25519 keys.
func TestHopKeysChecked(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse("latch.yaml", []byte(hopDoc))
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]latch.Config{
		"short HopKey":        {HopKey: ed25519.PrivateKey("short")},
		"short HopVerifyKeys": {HopVerifyKeys: []ed25519.PublicKey{ed25519.PublicKey("short")}},
	} {
		cfg.Policy, cfg.StoreURL = p, "sqlite:"+t.TempDir()+"/state.db"
		if g, err := latch.Open(t.Context(), &cfg); err == nil || !strings.Contains(err.Error(), "Ed25519") {
			if g != nil {
				g.Close()
			}
			t.Errorf("%s: Open = %v, want refused naming Ed25519", name, err)
		}
	}
}
