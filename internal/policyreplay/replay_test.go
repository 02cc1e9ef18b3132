package policyreplay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/policyreplay"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

var backends = []string{"sqlite", "postgres"}

// current is the policy the chain is made under: reads allowed, writes approved, deletes
// denied, restarts allowed; ops-bot holds a delegable grant, helper a delegation of restarts.
const current = `
schema: latch.policy/v1
actions:
  doc.read:
    decision: allow
  doc.write:
    effect: "write:{id}"
    decision: approve
  doc.delete:
    effect: "delete:{id}"
    decision: deny
  ops.restart:
    effect: "restart:{host}"
    decision: allow
authority:
  grants:
    - id: ops
      subject: { agent: ops-bot }
      actions: [doc.read, doc.write, doc.delete, ops.restart]
      delegable: true
      expires_at: 2999-01-01T00:00:00Z
`

// stricter approves reads and denies writes; the rest as current.
const stricter = `
schema: latch.policy/v1
version: stricter
actions:
  doc.read:
    decision: approve
  doc.write:
    effect: "write:{id}"
    decision: deny
  doc.delete:
    effect: "delete:{id}"
    decision: deny
  ops.restart:
    effect: "restart:{host}"
    decision: allow
authority:
  grants:
    - id: ops
      subject: { agent: ops-bot }
      actions: [doc.read, doc.write, doc.delete, ops.restart]
      delegable: true
      expires_at: 2999-01-01T00:00:00Z
`

// looser allows writes, approves deletes and grants reads to stranger too.
const looser = `
schema: latch.policy/v1
actions:
  doc.read:
    decision: allow
  doc.write:
    effect: "write:{id}"
    decision: allow
  doc.delete:
    effect: "delete:{id}"
    decision: approve
  ops.restart:
    effect: "restart:{host}"
    decision: allow
authority:
  grants:
    - id: ops
      subject: { agent: ops-bot }
      actions: [doc.read, doc.write, doc.delete, ops.restart]
      delegable: true
      expires_at: 2999-01-01T00:00:00Z
    - id: readers
      subject: { agent: stranger }
      actions: [doc.read]
`

func parse(t *testing.T, name, src string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse(name, []byte(src))
	if err != nil {
		t.Fatalf("Parse(%s) = %v", name, err)
	}
	return p
}

func ok(context.Context, json.RawMessage) (any, error) { return "ok", nil }

// call is one call of the chain: who made it, what, and what was decided.
type call struct {
	agent, action, args string
	decision            string
}

// chain is the known chain: what each call receipt, in seq order, must record.
var chain = []call{
	{"ops-bot", "doc.read", `{"id":"a"}`, "allow"},
	{"ops-bot", "doc.write", `{"id":"a"}`, "approve"},
	{"ops-bot", "doc.delete", `{"id":"a"}`, "deny"},
	{"helper", "ops.restart", `{"host":"h1"}`, "allow"}, // under the delegation
	{"stranger", "doc.read", `{"id":"b"}`, "deny"},      // no_authority
	{"helper", "ops.restart", `{"host":"h2"}`, "deny"},  // after the revocation: authority_revoked
}

// fixture makes the chain on a fresh store of backend and returns the store (kept open by the
// guard) and the seq of each call's receipt, in chain order.
func fixture(t *testing.T, backend string) (store.Store, []int64) {
	t.Helper()
	ctx := t.Context()
	clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { clock = clock.Add(time.Second); return clock }
	g, err := latch.Open(ctx, &latch.Config{Policy: parse(t, "current.yaml", current),
		StoreURL: testdb.URL(t, backend, "policyreplay"), Now: now, Environment: "production"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	var dlg string
	for i, c := range chain {
		if i == 3 {
			d, err := g.Delegate(ctx, "ops", []byte("subject: { agent: helper }\nactions: [ops.restart]\nexpires_at: 2998-01-01T00:00:00Z\n"), latch.Principal{Agent: "ops-bot"})
			if err != nil {
				t.Fatalf("Delegate = %v", err)
			}
			dlg = d.ID
		}
		if i == 5 {
			if _, err := g.Revoke(ctx, dlg, "ops-bot"); err != nil {
				t.Fatalf("Revoke = %v", err)
			}
		}
		cctx := latch.WithPrincipal(ctx, latch.Principal{Agent: c.agent})
		_, err := g.Execute(cctx, &latch.Call{Action: c.action, Arguments: json.RawMessage(c.args)}, ok)
		var ar *latch.ApprovalRequiredError
		if errors.As(err, &ar) {
			// A call that asks leaves its receipt when it runs with the granted approval.
			if _, err := g.Approve(ctx, ar.ApprovalID, "alice"); err != nil {
				t.Fatalf("Approve = %v", err)
			}
			if _, err := g.Execute(latch.WithApproval(cctx, ar.ApprovalID), &latch.Call{Action: c.action, Arguments: json.RawMessage(c.args)}, ok); err != nil {
				t.Fatalf("Execute(%s, approved) = %v", c.action, err)
			}
		}
	}
	st := g.Store()
	var seqs []int64
	for s, err := range st.Receipts(ctx, store.ReceiptFilter{}) {
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Kind      *string `json:"kind"`
			Action    string  `json:"action"`
			Decision  string  `json:"decision"`
			Principal struct {
				Agent string `json:"agent"`
			} `json:"principal"`
		}
		if err := json.Unmarshal(s.Doc, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Kind != nil && *doc.Kind != "call" {
			continue
		}
		if n := len(seqs); n >= len(chain) || doc.Action != chain[n].action || doc.Principal.Agent != chain[n].agent || doc.Decision != chain[n].decision {
			t.Fatalf("call receipt %d = %s by %s decided %s; the chain was not made as planned", s.Seq, doc.Action, doc.Principal.Agent, doc.Decision)
		}
		seqs = append(seqs, s.Seq)
	}
	if len(seqs) != len(chain) {
		t.Fatalf("%d call receipts, want %d", len(seqs), len(chain))
	}
	return st, seqs
}

// marks is what a replay leaves: the chain head and the newest event id.
func marks(t *testing.T, st store.Store) string {
	t.Helper()
	h, err := st.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	id, err := st.(store.EventHead).LastEventID(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("head %d %s, event %d", h.Seq, h.Hash, id)
}

// brief is a change as the test states it.
type brief struct {
	Seq      int64
	Action   string
	Agent    string
	From, To policy.Decision
	Reason   string
}

func briefs(cs []policyreplay.Change) []brief {
	out := []brief{}
	for _, c := range cs {
		out = append(out, brief{c.Seq, c.Action, c.Principal.Agent, c.From, c.To, c.Reason})
	}
	return out
}

func transitions(r *policyreplay.Report) map[string]int {
	out := map[string]int{}
	for _, tr := range r.Transitions {
		out[tr.Key()] = tr.Count
	}
	return out
}

// TestReplay: a known chain (allowed, needing approval, denied, under a delegation, without a
// grant, after a revocation) replayed under a stricter and a looser policy lists exactly the
// calls whose decision changes, with the counts per change, decides each call as of its start
// (the delegation revoked later still admits the call made before) unless Options.Now says
// otherwise, and writes nothing: the head and the newest event id are unchanged — on both stores.
func TestReplay(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			st, seq := fixture(t, backend)
			before := marks(t, st)
			ctx := t.Context()

			cases := []struct {
				name   string
				policy string
				opts   *policyreplay.Options
				want   []brief
				counts map[string]int
			}{
				{"stricter", stricter, nil, []brief{
					{seq[0], "doc.read", "ops-bot", policy.Allow, policy.Approve, "decision"},
					{seq[1], "doc.write", "ops-bot", policy.Approve, policy.Deny, "decision"},
				}, map[string]int{"allow→approve": 1, "approve→deny": 1}},
				{"looser", looser, nil, []brief{
					{seq[1], "doc.write", "ops-bot", policy.Approve, policy.Allow, "decision"},
					{seq[2], "doc.delete", "ops-bot", policy.Deny, policy.Approve, "decision"},
					{seq[4], "doc.read", "stranger", policy.Deny, policy.Allow, "decision"},
				}, map[string]int{"approve→allow": 1, "deny→allow": 1, "deny→approve": 1}},
				{"current, as of now", current, &policyreplay.Options{Now: time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)}, []brief{
					{seq[3], "ops.restart", "helper", policy.Allow, policy.Deny, "authority_revoked"},
				}, map[string]int{"allow→deny": 1}},
				{"current", current, nil, []brief{}, map[string]int{}},
				{"looser, last 2 receipts", looser, &policyreplay.Options{Last: 2}, []brief{}, map[string]int{}},
				{"looser, last 3 receipts", looser, &policyreplay.Options{Last: int(seq[5] - seq[4] + 1)}, []brief{
					{seq[4], "doc.read", "stranger", policy.Deny, policy.Allow, "decision"},
				}, map[string]int{"deny→allow": 1}},
				{"looser, one listed", looser, &policyreplay.Options{MaxChanges: 1}, []brief{
					{seq[1], "doc.write", "ops-bot", policy.Approve, policy.Allow, "decision"},
				}, map[string]int{"approve→allow": 1, "deny→allow": 1, "deny→approve": 1}},
			}
			for _, tc := range cases {
				rep, err := policyreplay.Replay(ctx, st, parse(t, tc.name+".yaml", tc.policy), tc.opts)
				if err != nil {
					t.Fatalf("%s: Replay = %v", tc.name, err)
				}
				if diff := cmp.Diff(tc.want, briefs(rep.Changes)); diff != "" {
					t.Errorf("%s: changes (-want +got):\n%s", tc.name, diff)
				}
				if diff := cmp.Diff(tc.counts, transitions(rep)); diff != "" {
					t.Errorf("%s: transitions (-want +got):\n%s", tc.name, diff)
				}
				total := 0
				for _, n := range tc.counts {
					total += n
				}
				if rep.Changed != total || rep.Truncated != (len(tc.want) < total) {
					t.Errorf("%s: changed %d, truncated %v; want %d, %v", tc.name, rep.Changed, rep.Truncated, total, len(tc.want) < total)
				}
				if tc.opts == nil && rep.Replayed != len(chain) {
					t.Errorf("%s: replayed %d, want %d", tc.name, rep.Replayed, len(chain))
				}
			}
			if after := marks(t, st); after != before {
				t.Errorf("after the replays: %s; before: %s (a replay wrote)", after, before)
			}
		})
	}
}

// TestReplayKeepsCircumstances: a refusal the policy did not decide (an expired credential,
// arguments that could not form an action) is kept as recorded, not re-decided into an allow.
func TestReplayKeepsCircumstances(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	g, err := latch.Open(ctx, &latch.Config{Policy: parse(t, "p.yaml", "schema: latch.policy/v1\nactions:\n  doc.read:\n    decision: allow\n"),
		StoreURL: testdb.URL(t, "sqlite", "policyreplay")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	old := latch.Principal{Agent: "bot", ExpiresAt: time.Now().Add(-time.Hour)}
	if _, err := g.Execute(latch.WithPrincipal(ctx, old), &latch.Call{Action: "doc.read"}, ok); !errors.Is(err, latch.ErrDenied) {
		t.Fatalf("Execute(expired principal) = %v, want denied", err)
	}
	if _, err := g.Execute(latch.WithPrincipal(ctx, latch.Principal{Agent: "bot"}), &latch.Call{Action: "doc.write"}, ok); err == nil {
		t.Fatal("Execute(doc.write) = nil, want denied (unknown action)")
	}
	// Arguments that cannot form an action are recorded as {}: re-deciding {} would be about
	// a call nobody made.
	if _, err := g.Execute(latch.WithPrincipal(ctx, latch.Principal{Agent: "bot"}), &latch.Call{Action: "doc.read", Arguments: json.RawMessage(`{"n":1.5}`)}, ok); !errors.Is(err, latch.ErrInvalidArgument) {
		t.Fatalf("Execute(float) = %v, want invalid_argument", err)
	}
	loose := parse(t, "loose.yaml", "schema: latch.policy/v1\nactions:\n  doc.read:\n    decision: allow\n  doc.write:\n    decision: allow\n")
	rep, err := policyreplay.Replay(ctx, g.Store(), loose, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replayed != 3 || rep.Kept != 2 || rep.Changed != 1 || len(rep.Changes) != 1 || rep.Changes[0].Action != "doc.write" {
		t.Errorf("Replay = replayed %d, kept %d, changed %d %+v; want 3, 2, 1 (doc.write only)", rep.Replayed, rep.Kept, rep.Changed, rep.Changes)
	}
}

// TestReplayRefusesBadInput: no policy, a negative --last.
func TestReplayRefusesBadInput(t *testing.T) {
	t.Parallel()
	if _, err := policyreplay.Replay(t.Context(), nil, nil, nil); !errors.Is(err, policyreplay.ErrNoPolicy) {
		t.Errorf("Replay(nil policy) = %v, want ErrNoPolicy", err)
	}
	p := parse(t, "p.yaml", "schema: latch.policy/v1\nactions:\n  doc.read:\n    decision: allow\n")
	if _, err := policyreplay.Replay(t.Context(), nil, p, &policyreplay.Options{Last: -1}); err == nil {
		t.Error("Replay(last -1) = nil error, want one")
	}
}

// taskPolicy lets ops-bot restart under tickets of taskPattern, in production only.
func taskPolicy(taskPattern string) string {
	return `
schema: latch.policy/v1
actions:
  ops.restart:
    effect: "restart:{host}"
    decision: allow
authority:
  grants:
    - id: tickets
      subject: { agent: ops-bot }
      actions: [ops.restart]
      environments: [production]
      tasks: ["` + taskPattern + `"]
`
}

// TestReplayTaskAndEnvironment: a call's task and environment are rebuilt from its receipt, so
// the policy it ran under changes nothing, a grant narrowed to other tasks denies it, and
// Options.Environment decides it in another environment — on both stores.
func TestReplayTaskAndEnvironment(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			g, err := latch.Open(ctx, &latch.Config{Policy: parse(t, "tasks.yaml", taskPolicy("ticket:INC-*")),
				StoreURL: testdb.URL(t, backend, "policyreplay"), Environment: "production"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })
			call := &latch.Call{Action: "ops.restart", Arguments: json.RawMessage(`{"host":"h1"}`), Options: &latch.Options{Task: "ticket:INC-7"}}
			rc, err := g.Execute(latch.WithPrincipal(ctx, latch.Principal{Agent: "ops-bot"}), call, ok)
			if err != nil {
				t.Fatalf("Execute = %v", err)
			}
			var doc struct{ Seq int64 }
			if err := json.Unmarshal(rc.Doc, &doc); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				name, policy string
				opts         *policyreplay.Options
				want         []brief
			}{
				{"same grant", taskPolicy("ticket:INC-*"), nil, []brief{}},
				{"other tasks", taskPolicy("ticket:OPS-*"), nil, []brief{{doc.Seq, "ops.restart", "ops-bot", policy.Allow, policy.Deny, "no_authority"}}},
				{"staging", taskPolicy("ticket:INC-*"), &policyreplay.Options{Environment: "staging"},
					[]brief{{doc.Seq, "ops.restart", "ops-bot", policy.Allow, policy.Deny, "no_authority"}}},
			} {
				rep, err := policyreplay.Replay(ctx, g.Store(), parse(t, tc.name+".yaml", tc.policy), tc.opts)
				if err != nil {
					t.Fatalf("%s: Replay = %v", tc.name, err)
				}
				if diff := cmp.Diff(tc.want, briefs(rep.Changes)); diff != "" {
					t.Errorf("%s: changes (-want +got):\n%s", tc.name, diff)
				}
			}
		})
	}
}

// TestReplaySkipsRedacted: a receipt that records a redacted argument holds a commitment, not
// the value, so its call is skipped rather than re-decided on the commitment (which would read
// as a change to invalid_arguments).
func TestReplaySkipsRedacted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const doc = "schema: latch.policy/v1\nactions:\n  card.charge:\n    effect: \"charge:{id}\"\n    arguments:\n      id: { type: string }\n      card: { type: string, redact: last4 }\n    decision: allow\n  doc.read:\n    decision: allow\n"
	g, err := latch.Open(ctx, &latch.Config{Policy: parse(t, "p.yaml", doc), StoreURL: testdb.URL(t, "sqlite", "policyreplay")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	bot := latch.WithPrincipal(ctx, latch.Principal{Agent: "bot"})
	if _, err := g.Execute(bot, &latch.Call{Action: "card.charge", Arguments: json.RawMessage(`{"card":"4242424242424242","id":"c1"}`)}, ok); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Execute(bot, &latch.Call{Action: "doc.read"}, ok); err != nil {
		t.Fatal(err)
	}
	rep, err := policyreplay.Replay(ctx, g.Store(), parse(t, "same.yaml", doc), nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replayed != 1 || rep.Skipped != 1 || rep.Changed != 0 {
		t.Errorf("Replay = replayed %d, skipped %d, changed %d %+v; want 1, 1, 0", rep.Replayed, rep.Skipped, rep.Changed, rep.Changes)
	}
}
