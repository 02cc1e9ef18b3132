package latch_test

import (
	"errors"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

const revokeWhereDoc = `schema: latch.policy/v1
actions:
  payments.refund:
    effect: "refund:{refund_id}"
    decision: allow
authority:
  grants:
    - id: alice-payments
      subject: {user: alice}
      actions: ["payments.*"]
      delegable: true
      expires_at: "2099-01-01T00:00:00Z"
    - id: bob-payments
      subject: {user: bob}
      actions: ["payments.*"]
      delegable: true
      expires_at: "2099-01-01T00:00:00Z"
`

// TestRevokeWhere: on both stores, a selector revokes each match with its own write, skips
// what is already revoked (so a second run finishes a stopped one), leaves the named
// delegation of --under alone, matches the creator exactly, and matches nothing with
// ErrNothingMatched.
func TestRevokeWhere(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			p, err := policy.Parse("latch.yaml", []byte(revokeWhereDoc))
			if err != nil {
				t.Fatal(err)
			}
			c := newClock()
			g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: testdb.URL(t, backend, "latch_revokewhere"), Now: c.Now})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })
			ctx := t.Context()
			grant := func(agent string, delegable bool) []byte {
				doc := "subject: {agent: " + agent + "}\nactions: [payments.refund]\nexpires_at: \"2098-01-01T00:00:00Z\"\n"
				if delegable {
					doc += "delegable: true\n"
				}
				return []byte(doc)
			}
			mk := func(parent, agent string, delegable bool, by latch.Principal) string {
				t.Helper()
				d, err := g.Delegate(ctx, parent, grant(agent, delegable), by)
				if err != nil {
					t.Fatal(err)
				}
				return d.ID
			}
			alice, bob := latch.Principal{Agent: "cli", User: "alice"}, latch.Principal{Agent: "cli", User: "bob"}
			a := mk("alice-payments", "finance-bot", true, alice)
			b := mk("alice-payments", "refund-bot", false, alice)
			cc := mk(a, "support-bot", false, latch.Principal{Agent: "finance-bot"})
			e := mk(a, "helper-bot", false, latch.Principal{Agent: "finance-bot"})
			f := mk("bob-payments", "finance-bot", false, bob)

			if _, err := g.RevokeWhere(ctx, latch.RevokeSelector{CreatedBy: "cli"}, "cli:carol"); !errors.Is(err, latch.ErrNothingMatched) {
				t.Fatalf("created_by cli (no exact match) = %v, want ErrNothingMatched", err)
			}
			if _, err := g.RevokeWhere(ctx, latch.RevokeSelector{Under: e}, "cli:carol"); !errors.Is(err, latch.ErrNothingMatched) {
				t.Fatalf("under a leaf = %v, want ErrNothingMatched", err)
			}
			if _, err := g.RevokeWhere(ctx, latch.RevokeSelector{}, "cli:carol"); err == nil {
				t.Fatal("an empty selector was accepted")
			}

			// A run stopped halfway: cc revoked by id; the selector skips it and revokes e only.
			if _, err := g.Revoke(ctx, cc, "cli:carol"); err != nil {
				t.Fatal(err)
			}
			res, err := g.RevokeWhere(ctx, latch.RevokeSelector{Under: a}, "cli:dave")
			if err != nil {
				t.Fatal(err)
			}
			if ids(res.Revoked) != e || ids(res.Skipped) != cc {
				t.Fatalf("under %s: revoked %q skipped %q, want %q and %q", a, ids(res.Revoked), ids(res.Skipped), e, cc)
			}
			res, err = g.RevokeWhere(ctx, latch.RevokeSelector{Under: a}, "cli:dave")
			if err != nil || len(res.Revoked) != 0 || len(res.Skipped) != 2 {
				t.Fatalf("second run = %+v, %v; want nothing revoked, 2 skipped", res, err)
			}
			res, err = g.RevokeWhere(ctx, latch.RevokeSelector{CreatedBy: "cli/alice"}, "cli:erin")
			if err != nil {
				t.Fatal(err)
			}
			if ids(res.Revoked) != a+","+b {
				t.Fatalf("created_by cli/alice revoked %q, want %q", ids(res.Revoked), a+","+b)
			}
			all, err := g.Store().(store.DelegationStore).Delegations(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{a: "cli:erin", b: "cli:erin", cc: "cli:carol", e: "cli:dave", f: ""}
			for _, d := range all {
				if d.RevokedBy != want[d.ID] {
					t.Errorf("%s revoked_by %q, want %q", d.ID, d.RevokedBy, want[d.ID])
				}
			}
			// One delegation_revoked event per revocation, each its own write.
			evs, err := g.Store().Events(ctx, store.EventFilter{})
			if err != nil {
				t.Fatal(err)
			}
			revoked := 0
			for _, ev := range evs {
				if ev.Kind == store.EventDelegationRevoked {
					revoked++
				}
			}
			if revoked != 4 {
				t.Errorf("%d delegation_revoked events, want 4", revoked)
			}
		})
	}
}

func ids(ds []*store.Delegation) string {
	s := ""
	for i, d := range ds {
		if i > 0 {
			s += ","
		}
		s += d.ID
	}
	return s
}
