package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// breakGlassDoc has no grant for ops-bot: only an opening of the incident envelope lets it
// refund, within the envelope's constraint, for at most 2h. carol is on call.
const breakGlassDoc = `schema: latch.policy/v1
actions:
  payments.refund:
    effect: "refund:{refund_id}"
    decision: allow
approvers:
  roles:
    oncall: [carol]
authority:
  grants:
    - id: reader
      subject: {agent: reporter}
      actions: [reports.read]
  break_glass:
    - id: incident
      subject: {agent: "ops-*"}
      actions: [payments.refund]
      constraints: {amount_lte: 1000}
      max_ttl: 2h
      openers: [oncall]
`

// breakGlassEnv opens a guard with breakGlassDoc on backend, with its own clock.
func breakGlassEnv(t *testing.T, backend string) (*latch.Guard, *clock, string) {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(breakGlassDoc))
	if err != nil {
		t.Fatal(err)
	}
	c := newClock()
	url := testdb.URL(t, backend, "latch_breakglass")
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: url, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g, c, url
}

var carolSession = store.Approver{Name: "carol", Method: store.MethodSession, Verified: true}

func opsRefund(t *testing.T, g *latch.Guard, id string, amount int64) (*latch.Receipt, error) {
	t.Helper()
	args, _ := json.Marshal(map[string]any{"refund_id": id, "amount": amount})
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "ops-bot"})
	return g.Execute(ctx, &latch.Call{Action: "payments.refund", Arguments: args}, func(context.Context, json.RawMessage) (any, error) { return "ok", nil })
}

// TestBreakGlass: on both stores, an envelope alone allows nothing; an opening by a verified
// opener is stored as a break-glass delegation, a call under it commits with the envelope in
// its receipt, and it ends at its expiry (authority_expired) or when revoked
// (authority_revoked).
func TestBreakGlass(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			g, c, url := breakGlassEnv(t, backend)
			other := (&env{url: url, clock: c}).another(t, breakGlassDoc)
			ctx := t.Context()
			var ae *latch.AuthorityError

			if _, err := opsRefund(t, g, "rf_0", 100); !errors.As(err, &ae) || ae.Reason != "no_authority" {
				t.Fatalf("a call under an unopened envelope err = %v, want no_authority", err)
			}

			d, err := g.BreakGlass(ctx, &latch.BreakGlassRequest{Envelope: "incident", For: latch.Principal{Agent: "ops-bot"},
				TTL: time.Hour, Reason: "INC-7: refunds stuck", By: carolSession})
			if err != nil {
				t.Fatalf("BreakGlass: %v", err)
			}
			if d.Parent != "incident" || d.Via != store.ViaBreakGlass || d.Reason != "INC-7: refunds stuck" || d.CreatedBy != "session:carol" {
				t.Errorf("opened = %+v, want beneath incident, via break-glass, by session:carol, with the reason", d)
			}
			g2, err := policy.ParseGrant("stored", d.Grant)
			if err != nil || g2.Subject.Agent != "ops-bot" || !g2.ExpiresAt.Equal(c.Now().Add(time.Hour)) || g2.Delegable {
				t.Fatalf("stored grant = %+v, %v; want for ops-bot, expiring in 1h, not delegable", g2, err)
			}

			rc, err := opsRefund(t, g, "rf_1", 500)
			if err != nil {
				t.Fatalf("a call under the opened grant: %v", err)
			}
			if rc.Result != "committed" || rc.Authority == nil || rc.Authority.BreakGlass != "incident" ||
				rc.Authority.DelegationID != d.ID || rc.Authority.GrantID != "incident" {
				t.Errorf("receipt result %s, authority %+v; want committed under incident via %s", rc.Result, rc.Authority, d.ID)
			}
			if doc := lastReceipt(t, g); doc["authority"].(map[string]any)["break_glass"] != "incident" {
				t.Errorf("stored receipt authority = %v, want break_glass incident", doc["authority"])
			}
			// Begun here, finished by another guard (another process): the receipt Finish writes
			// still names the envelope.
			args, _ := json.Marshal(map[string]any{"refund_id": "rf_remote", "amount": 10})
			p, err := g.Begin(latch.WithPrincipal(ctx, latch.Principal{Agent: "ops-bot"}), &latch.Call{Action: "payments.refund", Arguments: args})
			if err != nil {
				t.Fatalf("Begin under the opened grant: %v", err)
			}
			rc, err = other.Finish(latch.WithPrincipal(ctx, latch.Principal{Agent: "ops-bot"}), p.ActionID, latch.OutcomeCommitted, nil, "")
			if err != nil {
				t.Fatalf("Finish: %v", err)
			}
			if rc.Authority == nil || rc.Authority.BreakGlass != "incident" {
				t.Errorf("Finish receipt authority = %+v, want break-glass envelope incident", rc.Authority)
			}
			if _, err := opsRefund(t, g, "rf_2", 5000); !errors.As(err, &ae) || ae.Reason != "authority_constraint" {
				t.Errorf("a call beyond the envelope's constraint err = %v, want authority_constraint", err)
			}

			c.Add(time.Hour) // valid up to and including its expiry
			if _, err := opsRefund(t, g, "rf_3", 100); err != nil {
				t.Errorf("a call at the expiry: %v", err)
			}
			c.Add(time.Microsecond)
			if _, err := opsRefund(t, g, "rf_4", 100); !errors.As(err, &ae) || ae.Reason != "authority_expired" {
				t.Errorf("a call after the expiry err = %v, want authority_expired", err)
			}

			d2, err := g.BreakGlass(ctx, &latch.BreakGlassRequest{Envelope: "incident", For: latch.Principal{Agent: "ops-bot"},
				Reason: "INC-8", By: carolSession})
			if err != nil {
				t.Fatalf("BreakGlass again: %v", err)
			}
			if g3, _ := policy.ParseGrant("stored", d2.Grant); g3 == nil || !g3.ExpiresAt.Equal(c.Now().Add(2*time.Hour)) {
				t.Errorf("an opening without a TTL expires at %v, want max_ttl (2h) from now", g3)
			}
			if _, err := opsRefund(t, g, "rf_5", 100); err != nil {
				t.Fatalf("a call under the second opening: %v", err)
			}
			if _, err := g.Revoke(ctx, d2.ID, "cli:carol"); err != nil {
				t.Fatalf("Revoke: %v", err)
			}
			if _, err := opsRefund(t, g, "rf_6", 100); !errors.As(err, &ae) || ae.Reason != "authority_revoked" {
				t.Errorf("a call after revocation err = %v, want authority_revoked", err)
			}
			if rep := verifyChain(t, g); !rep.OK {
				t.Errorf("chain: %+v", rep)
			}
		})
	}
}

// TestBreakGlassRefusals: every refused opening stores no delegation; a refused verified
// person leaves one delegation_rejected event, anyone else nothing at all.
func TestBreakGlassRefusals(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			g, _, _ := breakGlassEnv(t, backend)
			ctx := t.Context()
			ops := latch.Principal{Agent: "ops-bot"}
			tests := []struct {
				name        string
				req         latch.BreakGlassRequest
				reason, dim string
				logged      bool // a delegation_rejected event
			}{
				{"agent credential", latch.BreakGlassRequest{Envelope: "incident", For: ops, Reason: "x",
					By: store.Approver{Name: "carol", Method: store.MethodCLI}}, "no_authority", "opener", false},
				{"asserted name marked verified", latch.BreakGlassRequest{Envelope: "incident", For: ops, Reason: "x",
					By: store.Approver{Name: "carol", Method: store.MethodCLI, Verified: true}}, "no_authority", "opener", false},
				{"not an opener", latch.BreakGlassRequest{Envelope: "incident", For: ops, Reason: "x",
					By: store.Approver{Name: "dave", Method: store.MethodSession, Verified: true}}, "no_authority", "opener", true},
				{"unknown envelope", latch.BreakGlassRequest{Envelope: "nope", For: ops, Reason: "x", By: carolSession}, "no_authority", "parent", true},
				{"no reason", latch.BreakGlassRequest{Envelope: "incident", For: ops, By: carolSession}, "invalid_grant", "reason", true},
				{"longer than max_ttl", latch.BreakGlassRequest{Envelope: "incident", For: ops, Reason: "x", TTL: 3 * time.Hour, By: carolSession},
					"authority_escalation", "expires_at", true},
				{"negative ttl", latch.BreakGlassRequest{Envelope: "incident", For: ops, Reason: "x", TTL: -time.Hour, By: carolSession},
					"invalid_grant", "ttl", true},
				{"no concrete agent", latch.BreakGlassRequest{Envelope: "incident", Reason: "x", By: carolSession},
					"authority_escalation", "subject", true},
				{"agent outside the envelope", latch.BreakGlassRequest{Envelope: "incident", For: latch.Principal{Agent: "billing-bot"}, Reason: "x", By: carolSession},
					"authority_escalation", "subject", true},
				{"wider", latch.BreakGlassRequest{Envelope: "incident", Reason: "x", By: carolSession,
					Grant: []byte("subject: {agent: ops-bot}\nactions: [payments.refund]\nconstraints: {amount_lte: 5000}\n")},
					"authority_escalation", "constraints.amount_lte", true},
			}
			for _, tt := range tests {
				before := writes(t, g)
				evsBefore, _ := g.Store().Events(ctx, store.EventFilter{})
				_, err := g.BreakGlass(ctx, &tt.req)
				var ae *latch.AuthorityError
				if !errors.As(err, &ae) || ae.Reason != tt.reason || ae.Dimension != tt.dim {
					t.Errorf("%s: BreakGlass err = %v, want %s on %s", tt.name, err, tt.reason, tt.dim)
					continue
				}
				evs, _ := g.Store().Events(ctx, store.EventFilter{})
				added := evs[len(evsBefore):]
				switch {
				case tt.logged && (len(added) != 1 || added[0].Kind != store.EventDelegationRejected):
					t.Errorf("%s: events written = %v, want one delegation_rejected", tt.name, added)
				case !tt.logged && (len(added) != 0 || writes(t, g) != before):
					t.Errorf("%s: %d events and %d writes, want nothing written", tt.name, len(added), writes(t, g)-before)
				}
			}
			// A grant that brings its own expiry, or does not parse, is refused before anything.
			for _, doc := range []string{
				"subject: {agent: ops-bot}\nactions: [payments.refund]\nconstraints: {amount_lte: 5}\nexpires_at: \"2030-01-01T00:00:00Z\"\n",
				"subject: {agent: ops-bot}\nactions: [payments.refund]\nconstraints: {amount_lte: 5}\nexpires: soon\n",
			} {
				before := writes(t, g)
				_, err := g.BreakGlass(ctx, &latch.BreakGlassRequest{Envelope: "incident", Reason: "x", By: carolSession, Grant: []byte(doc)})
				var pe *policy.Error
				if !errors.As(err, &pe) || writes(t, g) != before {
					t.Errorf("BreakGlass(%q) err = %v (%d writes), want a *policy.Error and nothing written", doc, err, writes(t, g)-before)
				}
			}
			list, err := g.Store().(store.DelegationStore).Delegations(ctx)
			if err != nil || len(list) != 0 {
				t.Errorf("delegations after refusals = %d, %v; want none", len(list), err)
			}
		})
	}
}

// TestBreakGlassOpenerRoleFromAccount: an envelope's openers count the roles a person's local
// approver account gives them, as approvals do.
func TestBreakGlassOpenerRoleFromAccount(t *testing.T) {
	t.Parallel()
	g, c, _ := breakGlassEnv(t, "sqlite")
	req := &latch.BreakGlassRequest{Envelope: "incident", For: latch.Principal{Agent: "ops-bot"},
		Reason: "x", By: store.Approver{Name: "Dave", Method: store.MethodToken, Verified: true}}
	var ae *latch.AuthorityError
	if _, err := g.BreakGlass(t.Context(), req); !errors.As(err, &ae) || ae.Dimension != "opener" {
		t.Fatalf("BreakGlass by dave before his account has the role err = %v, want no_authority on opener", err)
	}
	acc := &store.Account{Name: "dave", PasswordHash: "$2a$10$abcdefghijklmnopqrstuuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ01", Roles: []string{"oncall"}, CreatedAt: c.Now()}
	if err := g.Store().(store.AccountStore).CreateAccount(t.Context(), acc); err != nil {
		t.Fatal(err)
	}
	if _, err := g.BreakGlass(t.Context(), req); err != nil {
		t.Fatalf("BreakGlass by dave (oncall through his account): %v", err)
	}
}

// TestPlainDelegationBeneathEnvelopeDenied: a delegation written beneath an envelope's id
// without via break-glass allows nothing, even when it fits the envelope.
func TestPlainDelegationBeneathEnvelopeDenied(t *testing.T) {
	t.Parallel()
	g, c, _ := breakGlassEnv(t, "sqlite")
	doc := "subject: {agent: ops-bot}\nactions: [payments.refund]\nconstraints: {amount_lte: 100}\nexpires_at: \"" +
		c.Now().Add(time.Hour).Format(time.RFC3339) + "\"\n"
	for _, via := range []string{"", "cli"} {
		ds := g.Store().(store.DelegationStore)
		d := &store.Delegation{ID: "dlg_" + strings.Repeat("0", 31) + map[string]string{"": "1", "cli": "2"}[via], Parent: "incident",
			Grant: []byte(doc), CreatedBy: "ops-bot", CreatedAt: c.Now(), Via: via}
		if err := ds.CreateDelegation(t.Context(), d, nil); err != nil {
			t.Fatal(err)
		}
		var ae *latch.AuthorityError
		_, err := opsRefund(t, g, "rf_"+via, 10)
		want := map[string]string{"": "authority_escalation", "cli": "authority_unreadable"}[via]
		if !errors.As(err, &ae) || ae.Reason != want {
			t.Errorf("a call under a delegation with via %q beneath an envelope err = %v, want %s", via, err, want)
		}
	}
}

// TestBreakGlassEnvelopeBudget: on both stores, an envelope's budget is shared by every grant
// opened in it — each call under an opening is charged against the opening and the envelope —
// so a second opening cannot spend what the first one spent, and an opening must carry the
// envelope's budget at least as tight.
func TestBreakGlassEnvelopeBudget(t *testing.T) {
	t.Parallel()
	doc := strings.Replace(breakGlassDoc, "      max_ttl: 2h\n", "      max_ttl: 2h\n      budgets: [{metric: amount, limit: 1000, window: P1D}]\n", 1)
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			p, err := policy.Parse("latch.yaml", []byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			clk := newClock()
			g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: testdb.URL(t, backend, "latch_bgbudget"), Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })
			ctx := t.Context()
			open := func(agent, reason string) {
				t.Helper()
				if _, err := g.BreakGlass(ctx, &latch.BreakGlassRequest{Envelope: "incident", For: latch.Principal{Agent: agent},
					TTL: time.Hour, Reason: reason, By: carolSession}); err != nil {
					t.Fatalf("BreakGlass for %s: %v", agent, err)
				}
			}
			refund := func(agent, id string, amount int64) (*latch.Receipt, error) {
				args, _ := json.Marshal(map[string]any{"refund_id": id, "amount": amount})
				return g.Execute(latch.WithPrincipal(ctx, latch.Principal{Agent: agent}), &latch.Call{Action: "payments.refund", Arguments: args},
					func(context.Context, json.RawMessage) (any, error) { return "ok", nil })
			}
			open("ops-bot", "INC-9")
			rc, err := refund("ops-bot", "rf_1", 700)
			if err != nil {
				t.Fatalf("first refund: %v", err)
			}
			charged := map[string]int64{}
			for _, c := range rc.BudgetCharges {
				charged[c.Budget] = c.Amount
			}
			if charged["incident"] != 700 || len(rc.BudgetCharges) != 2 {
				t.Errorf("receipt charges = %+v, want 700 against the opening and against the envelope incident", rc.BudgetCharges)
			}
			open("ops-helper", "INC-9, a second pair of hands")
			var be *latch.BudgetError
			if _, err := refund("ops-helper", "rf_2", 400); !errors.As(err, &be) || be.Reason != "budget_exhausted" || be.Budget != "incident" {
				t.Fatalf("a second opening spending past the envelope's budget: err = %v, want budget_exhausted naming incident", err)
			}
			if _, err := refund("ops-helper", "rf_3", 300); err != nil {
				t.Errorf("a second opening within what the envelope has left: %v", err)
			}
			// Operators see the envelope's budget, shared by both openings.
			o, err := operator.New(&operator.Config{Store: g.Store(), Policy: p, Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			bs, err := o.Budgets(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var env *jsonview.Budget
			for i := range bs {
				if bs[i].Budget == "incident" {
					env = &bs[i]
				}
			}
			if env == nil || env.Kind != jsonview.BudgetOfEnvelope || env.Consumed != 1000 || env.Remaining != 0 {
				t.Errorf("operator budgets = %+v; want the envelope incident, consumed 1000 of 1000", bs)
			}
			in, err := o.InspectGrant(ctx, "incident")
			if err != nil || in.Kind != jsonview.BudgetOfEnvelope || in.Live || len(in.Budgets) != 1 {
				t.Errorf("InspectGrant(incident) = %+v, %v; want an envelope (never live on its own) with its budget", in, err)
			}
		})
	}
}
