package latch_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// standingPolicy lets approvers of refund.issue grant standing approvals of up to 5 calls for up
// to an hour; refund.plain allows none.
const standingPolicy = `
schema: latch.policy/v1
actions:
  refund.issue:
    effect: "refund:{order_id}"
    arguments:
      order_id: {type: string}
      amount: {type: integer}
      currency: {type: string}
    decision: approve
    approvers:
      standing: {max_uses: 5, max_for: 1h}
  refund.plain:
    effect: "plain:{order_id}"
    decision: approve
  refund.two:
    effect: "two:{order_id}"
    decision: approve
    approvers:
      required: 2
      standing: {max_uses: 5, max_for: 1h}
`

// The helper process of TestStandingProcessRace: a guard that presents standing approval ID once
// for a refund of order NAME, and prints "ok" or "refused REASON".
const standingChildEnv = "LATCH_TEST_STANDING_CHILD"

func init() { children[standingChildEnv] = standingChild }

func standingChild(spec string) error {
	var c struct{ Store, Start, Name, ID string }
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		return err
	}
	ctx := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "bot"})
	p, err := policy.Parse("latch.yaml", []byte(standingPolicy))
	if err != nil {
		return err
	}
	g, err := latch.Open(ctx, &latch.Config{Policy: p, StoreURL: c.Store})
	if err != nil {
		return err
	}
	defer g.Close()
	for wait := time.Now().Add(10 * time.Second); time.Now().Before(wait); { // the others, to race
		if _, err := os.Stat(c.Start); err == nil {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	_, err = g.Execute(latch.WithApproval(ctx, c.ID), refundCall(c.Name, 200),
		func(context.Context, json.RawMessage) (any, error) { return "refunded", nil })
	if r := latch.RefusalOf(err); err != nil && r != nil && r.Kind != latch.KindInternal {
		fmt.Fprintf(out, "refused %s\n", r.Reason)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "ok")
	return nil
}

func refundCall(order string, amount int) *latch.Call {
	return &latch.Call{Action: "refund.issue",
		Arguments: json.RawMessage(fmt.Sprintf(`{"order_id":%q,"amount":%d,"currency":"EUR"}`, order, amount))}
}

// grantStanding asks for a refund as bot, grants the request with terms as approver, and
// returns the standing approval the grant created.
func grantStanding(t *testing.T, g *latch.Guard, approver string, terms store.StandingTerms) *store.Standing {
	t.Helper()
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "bot"})
	_, err := g.Execute(ctx, refundCall("first", 100), func(context.Context, json.RawMessage) (any, error) { return "x", nil })
	var are *latch.ApprovalRequiredError
	if !errors.As(err, &are) {
		t.Fatalf("first call: %v, want approval required", err)
	}
	if _, err := g.Answer(t.Context(), &store.AnswerRequest{ID: are.ApprovalID, Grant: true, Approver: approver, Standing: &terms}); err != nil {
		t.Fatalf("grant with standing terms: %v", err)
	}
	list, err := g.Standings(t.Context(), store.StandingFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.From == are.ApprovalID {
			return s
		}
	}
	t.Fatalf("no standing approval from %s among %d", are.ApprovalID, len(list))
	return nil
}

func openStandingGuard(t *testing.T, url string) *latch.Guard {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(standingPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// TestStandingProcessRace: a standing approval of 3 uses, presented at once by 4 OS processes
// (each refunding its own order), admits exactly 3 and refuses the 4th approval_exhausted: each
// use is spent in the reservation's transaction. The 3 receipts name the standing approval.
func TestStandingProcessRace(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			url := testdb.URL(t, backend, "latch_standing")
			g := openStandingGuard(t, url)
			st := grantStanding(t, g, "alice", store.StandingTerms{Uses: 3, For: store.Duration(time.Hour),
				Max: map[string]int64{"amount": 500}, Vary: []string{"order_id"}})
			const procs = 4
			start := filepath.Join(t.TempDir(), "start")
			cmds, outs := startChildren(t, standingChildEnv, procs, func(i int) any {
				return map[string]any{"Store": url, "Start": start, "Name": fmt.Sprintf("o-%d", i), "ID": st.ID}
			})
			if err := os.WriteFile(start, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			ok, exhausted := 0, 0
			for i, lines := range waitChildren(t, cmds, outs) {
				switch line := strings.Join(lines, "\n"); line {
				case "ok":
					ok++
				case "refused approval_exhausted":
					exhausted++
				default:
					t.Errorf("process %d: %q", i, line)
				}
			}
			if ok != 3 || exhausted != 1 {
				t.Fatalf("%d admitted, %d refused approval_exhausted; want exactly 3 and 1", ok, exhausted)
			}
			cur, err := g.Standing(t.Context(), st.ID)
			if err != nil {
				t.Fatal(err)
			}
			if cur.Uses != 3 || store.StandingState(cur, time.Now()) != store.StandingExhausted {
				t.Errorf("standing approval after the race: %d uses, %s; want 3, exhausted", cur.Uses, store.StandingState(cur, time.Now()))
			}
			named := 0
			for s, err := range g.Store().Receipts(t.Context(), store.ReceiptFilter{ApprovalID: st.ID}) {
				if err != nil {
					t.Fatal(err)
				}
				var doc struct {
					Result, Approver string
					ApprovalID       string `json:"approval_id"`
				}
				if err := json.Unmarshal(s.Doc, &doc); err != nil {
					t.Fatal(err)
				}
				if doc.Result == "committed" {
					named++
					if doc.Approver != "alice" || doc.ApprovalID != st.ID {
						t.Errorf("receipt %d names approver %q, approval %q; want alice, %s", s.Seq, doc.Approver, doc.ApprovalID, st.ID)
					}
				}
			}
			if named != 3 {
				t.Errorf("%d committed receipts name %s, want 3", named, st.ID)
			}
			verifyChain(t, g)
		})
	}
}

// standingFixture is a guard on a fresh store of backend whose clock the test moves.
type standingFixture struct {
	t   *testing.T
	g   *latch.Guard
	now time.Time
}

func newStandingFixture(t *testing.T, backend string) *standingFixture {
	t.Helper()
	f := &standingFixture{t: t, now: time.Now().UTC().Truncate(time.Millisecond)}
	p, err := policy.Parse("latch.yaml", []byte(standingPolicy))
	if err != nil {
		t.Fatal(err)
	}
	f.g, err = latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: testdb.URL(t, backend, "latch_standing_rules"),
		Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.g.Close() })
	return f
}

// ask makes a call of action as agent, presenting approval id (or none), and returns its
// refusal reason ("" when it ran) and the request id of an approval_required.
func (f *standingFixture) ask(agent, id, action, args string) (latch.Reason, string) {
	f.t.Helper()
	ctx := latch.WithPrincipal(f.t.Context(), latch.Principal{Agent: agent})
	if id != "" {
		ctx = latch.WithApproval(ctx, id)
	}
	_, err := f.g.Execute(ctx, &latch.Call{Action: action, Arguments: json.RawMessage(args)},
		func(context.Context, json.RawMessage) (any, error) { return "done", nil })
	if err == nil {
		return "", ""
	}
	var are *latch.ApprovalRequiredError
	if errors.As(err, &are) {
		return latch.ReasonApprovalRequired, are.ApprovalID
	}
	r := latch.RefusalOf(err)
	if r == nil || r.Kind == latch.KindInternal {
		f.t.Fatalf("%s %s: %v", action, args, err)
	}
	return r.Reason, ""
}

func (f *standingFixture) standingFrom(request string) *store.Standing {
	f.t.Helper()
	list, err := f.g.Standings(f.t.Context(), store.StandingFilter{})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, s := range list {
		if s.From == request {
			return s
		}
	}
	return nil
}

func standingReason(err error) string {
	var se *store.StandingError
	if errors.As(err, &se) {
		return se.Reason
	}
	var ae *store.AnswerError
	if errors.As(err, &ae) {
		return ae.Reason
	}
	return fmt.Sprint(err)
}

// TestStandingBounds: a standing approval admits only the action, principal and arguments it
// bounds; a refused call spends nothing; a duplicate spends nothing; a total caps the sum; it
// ends at its expiry and when revoked, each with its own word.
func TestStandingBounds(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			f := newStandingFixture(t, backend)
			reason, req := f.ask("bot", "", "refund.issue", `{"order_id":"o-1","amount":100,"currency":"EUR"}`)
			if reason != latch.ReasonApprovalRequired {
				t.Fatalf("first call: %s, want approval_required", reason)
			}
			terms := store.StandingTerms{Uses: 5, For: store.Duration(time.Hour), Max: map[string]int64{"amount": 500},
				Vary: []string{"order_id"}, Total: &store.StandingTotal{Argument: "amount", Limit: 900}}
			a, err := f.g.Answer(t.Context(), &store.AnswerRequest{ID: req, Grant: true, Approver: "alice", Standing: &terms})
			if err != nil || a.Status != store.Granted {
				t.Fatalf("grant with standing terms: %v, %v", a, err)
			}
			st := f.standingFrom(req)
			if st == nil || st.Uses != 0 || len(st.GrantedBy) != 1 || st.GrantedBy[0] != "alice" || !st.ExpiresAt.Equal(f.now.Add(time.Hour)) {
				t.Fatalf("standing approval = %+v, want unused, granted by alice, until now+1h", st)
			}
			// The request itself is granted too: its own call spends it, not a standing use.
			if r, _ := f.ask("bot", req, "refund.issue", `{"order_id":"o-1","amount":100,"currency":"EUR"}`); r != "" {
				t.Fatalf("the request's own call: %s", r)
			}
			for _, tc := range []struct {
				agent, args string
				want        latch.Reason
			}{
				{"bot", `{"order_id":"o-2","amount":600,"currency":"EUR"}`, latch.ReasonApprovalMismatch}, // over max
				{"bot", `{"order_id":"o-2","amount":-1,"currency":"EUR"}`, latch.ReasonApprovalMismatch},  // under 0
				{"bot", `{"order_id":"o-2","amount":50,"currency":"USD"}`, latch.ReasonApprovalMismatch},  // a fixed argument
				{"eve", `{"order_id":"o-2","amount":50,"currency":"EUR"}`, latch.ReasonApprovalMismatch},  // another principal
				{"bot", `{"order_id":"o-2","amount":400,"currency":"EUR"}`, ""},
				{"bot", `{"order_id":"o-2","amount":400,"currency":"EUR"}`, latch.ReasonCommitted}, // a duplicate
				{"bot", `{"order_id":"o-3","amount":400,"currency":"EUR"}`, ""},
				{"bot", `{"order_id":"o-4","amount":200,"currency":"EUR"}`, latch.ReasonApprovalExhausted}, // 1000 > 900
				{"bot", `{"order_id":"o-4","amount":100,"currency":"EUR"}`, ""},
			} {
				if got, _ := f.ask(tc.agent, st.ID, "refund.issue", tc.args); got != tc.want {
					t.Errorf("%s %s presenting %s: %q, want %q", tc.agent, tc.args, st.ID, got, tc.want)
				}
			}
			if got, _ := f.ask("bot", st.ID, "refund.plain", `{"order_id":"o-5"}`); got != latch.ReasonApprovalMismatch {
				t.Errorf("another action presenting %s: %q, want approval_mismatch", st.ID, got)
			}
			cur, err := f.g.Standing(t.Context(), st.ID)
			if err != nil {
				t.Fatal(err)
			}
			if cur.Uses != 3 || cur.Spent != 900 || store.StandingState(cur, f.now) != store.StandingExhausted {
				t.Errorf("after the calls: %d uses, %d spent, %s; want 3, 900, exhausted (refused calls spend nothing)",
					cur.Uses, cur.Spent, store.StandingState(cur, f.now))
			}

			// Expiry and revocation, on a second standing approval.
			_, req2 := f.ask("bot", "", "refund.issue", `{"order_id":"p-1","amount":10,"currency":"EUR"}`)
			terms2 := store.StandingTerms{Uses: 5, For: store.Duration(30 * time.Minute), Vary: []string{"order_id"}}
			if _, err := f.g.Answer(t.Context(), &store.AnswerRequest{ID: req2, Grant: true, Approver: "alice", Standing: &terms2}); err != nil {
				t.Fatal(err)
			}
			st2 := f.standingFrom(req2)
			if got, _ := f.ask("bot", st2.ID, "refund.issue", `{"order_id":"p-2","amount":10,"currency":"EUR"}`); got != "" {
				t.Fatalf("within its bounds: %q", got)
			}
			f.now = f.now.Add(31 * time.Minute)
			if got, _ := f.ask("bot", st2.ID, "refund.issue", `{"order_id":"p-3","amount":10,"currency":"EUR"}`); got != latch.ReasonApprovalExpired {
				t.Errorf("past its expiry: %q, want approval_expired", got)
			}
			f.now = f.now.Add(-31 * time.Minute)
			if _, err := f.g.RevokeStanding(t.Context(), &store.RevokeStandingRequest{ID: st2.ID, By: "alice", Note: "enough"}); err != nil {
				t.Fatalf("revoke: %v", err)
			}
			if got, _ := f.ask("bot", st2.ID, "refund.issue", `{"order_id":"p-4","amount":10,"currency":"EUR"}`); got != latch.ReasonApprovalRevoked {
				t.Errorf("revoked: %q, want approval_revoked", got)
			}
			if _, err := f.g.RevokeStanding(t.Context(), &store.RevokeStandingRequest{ID: st2.ID, By: "alice"}); standingReason(err) != store.StandingRevoked {
				t.Errorf("revoking twice: %v, want revoked", err)
			}
			if got, _ := f.ask("bot", "sta_nosuch", "refund.issue", `{"order_id":"p-5","amount":10,"currency":"EUR"}`); got != latch.ReasonApprovalUnknown {
				t.Errorf("an unknown standing id: %q, want approval_unknown", got)
			}
			verifyChain(t, f.g)
		})
	}
}

// TestStandingGrantRules: a standing approval is never wider than the policy allows, and the
// rules of answering apply to granting one; a refused standing grant writes nothing.
func TestStandingGrantRules(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			f := newStandingFixture(t, backend)
			_, req := f.ask("bot", "", "refund.issue", `{"order_id":"o-1","amount":100,"currency":"EUR"}`)
			_, plain := f.ask("bot", "", "refund.plain", `{"order_id":"o-1"}`)
			hour := store.Duration(time.Hour)
			for _, tc := range []struct {
				name, id, approver string
				terms              store.StandingTerms
				want               string
			}{
				{"no standing entry", plain, "alice", store.StandingTerms{Uses: 1, For: hour}, store.ReasonStandingNotAllowed},
				{"more uses than max_uses", req, "alice", store.StandingTerms{Uses: 6, For: hour}, store.ReasonStandingTooWide},
				{"longer than max_for", req, "alice", store.StandingTerms{Uses: 2, For: store.Duration(2 * time.Hour)}, store.ReasonStandingTooWide},
				{"no uses", req, "alice", store.StandingTerms{For: hour}, store.ReasonInvalidStanding},
				{"max of a string", req, "alice", store.StandingTerms{Uses: 2, For: hour, Max: map[string]int64{"currency": 1}}, store.ReasonInvalidStanding},
				{"vary of an argument not passed", req, "alice", store.StandingTerms{Uses: 2, For: hour, Vary: []string{"reason"}}, store.ReasonInvalidStanding},
				{"self approval", req, "bot", store.StandingTerms{Uses: 2, For: hour}, store.ReasonSelfApproval},
			} {
				_, err := f.g.Answer(t.Context(), &store.AnswerRequest{ID: tc.id, Grant: true, Approver: tc.approver, Standing: &tc.terms})
				if got := standingReason(err); got != tc.want {
					t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
				}
			}
			// One answer either edits the request or grants a standing approval from it.
			_, err := f.g.Answer(t.Context(), &store.AnswerRequest{ID: req, Grant: true, Approver: "alice",
				Set: json.RawMessage(`{"amount":50}`), Standing: &store.StandingTerms{Uses: 2, For: hour}})
			if got := standingReason(err); got != policy.ReasonEditInvalid {
				t.Errorf("an edit with standing terms: %v, want %s", err, policy.ReasonEditInvalid)
			}
			for _, id := range []string{req, plain} {
				if a, err := f.g.Store().Approval(t.Context(), id); err != nil || a.Status != store.Pending || len(a.Answers) != 0 {
					t.Errorf("after refused standing grants, %s = %+v, %v; want pending, unanswered", id, a, err)
				}
			}
			if list, _ := f.g.Standings(t.Context(), store.StandingFilter{}); len(list) != 0 {
				t.Errorf("refused grants created %d standing approvals", len(list))
			}

			// M-of-N: every grant counted states the same terms.
			_, two := f.ask("bot", "", "refund.two", `{"order_id":"t-1"}`)
			a3 := store.StandingTerms{Uses: 3, For: hour}
			a4 := store.StandingTerms{Uses: 4, For: hour}
			if a, err := f.g.Answer(t.Context(), &store.AnswerRequest{ID: two, Grant: true, Approver: "alice", Standing: &a3}); err != nil || a.Status != store.Pending {
				t.Fatalf("first of two grants: %v, %v", a, err)
			}
			if f.standingFrom(two) != nil {
				t.Fatal("one grant of two created a standing approval")
			}
			if _, err := f.g.Answer(t.Context(), &store.AnswerRequest{ID: two, Grant: true, Approver: "bob", Standing: &a4}); standingReason(err) != store.ReasonStandingTermsDiffer {
				t.Errorf("second grant with other terms: %v, want standing_terms_differ", err)
			}
			if a, err := f.g.Answer(t.Context(), &store.AnswerRequest{ID: two, Grant: true, Approver: "bob", Standing: &a3}); err != nil || a.Status != store.Granted {
				t.Fatalf("second grant with the same terms: %v, %v", a, err)
			}
			st := f.standingFrom(two)
			if st == nil || st.Terms.Uses != 3 || len(st.GrantedBy) != 2 || st.GrantedBy[0] != "alice" || st.GrantedBy[1] != "bob" {
				t.Errorf("standing approval of two grants = %+v, want 3 uses granted by alice and bob", st)
			}

			// A plain grant after a standing one narrows the request to a single approval.
			_, three := f.ask("bot", "", "refund.two", `{"order_id":"t-2"}`)
			if _, err := f.g.Answer(t.Context(), &store.AnswerRequest{ID: three, Grant: true, Approver: "alice", Standing: &a3}); err != nil {
				t.Fatal(err)
			}
			if a, err := f.g.Answer(t.Context(), &store.AnswerRequest{ID: three, Grant: true, Approver: "carol"}); err != nil || a.Status != store.Granted {
				t.Fatalf("a plain second grant: %v, %v", a, err)
			}
			if s := f.standingFrom(three); s != nil {
				t.Errorf("a plain grant after a standing one created %+v", s)
			}
		})
	}
}

// TestStandingWithoutPresenting: a call that needs approval and presents none is admitted by
// an active standing approval of its action and principal whose bounds admit it, instead of a
// new request; once it is spent, or for a call outside its bounds, a person is asked again.
func TestStandingWithoutPresenting(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			f := newStandingFixture(t, backend)
			_, req := f.ask("bot", "", "refund.issue", `{"order_id":"o-1","amount":100,"currency":"EUR"}`)
			terms := store.StandingTerms{Uses: 2, For: store.Duration(time.Hour), Max: map[string]int64{"amount": 500}, Vary: []string{"order_id"}}
			if _, err := f.g.Answer(t.Context(), &store.AnswerRequest{ID: req, Grant: true, Approver: "alice", Standing: &terms}); err != nil {
				t.Fatal(err)
			}
			st := f.standingFrom(req)
			for i, tc := range []struct {
				agent, args string
				want        latch.Reason
			}{
				{"bot", `{"order_id":"o-2","amount":200,"currency":"EUR"}`, ""},
				{"bot", `{"order_id":"o-3","amount":900,"currency":"EUR"}`, latch.ReasonApprovalRequired}, // outside its bounds
				{"eve", `{"order_id":"o-4","amount":200,"currency":"EUR"}`, latch.ReasonApprovalRequired}, // another principal
				{"bot", `{"order_id":"o-5","amount":200,"currency":"EUR"}`, ""},
				{"bot", `{"order_id":"o-6","amount":200,"currency":"EUR"}`, latch.ReasonApprovalRequired}, // spent
			} {
				if got, _ := f.ask(tc.agent, "", "refund.issue", tc.args); got != tc.want {
					t.Errorf("call %d (%s %s) presenting nothing: %q, want %q", i, tc.agent, tc.args, got, tc.want)
				}
			}
			cur, err := f.g.Standing(t.Context(), st.ID)
			if err != nil || cur.Uses != 2 {
				t.Errorf("standing approval after the calls: %+v, %v; want 2 uses", cur, err)
			}
			n := 0
			for s, err := range f.g.Store().Receipts(t.Context(), store.ReceiptFilter{ApprovalID: st.ID}) {
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(s.Doc), `"result":"committed"`) {
					n++
				}
			}
			if n != 2 {
				t.Errorf("%d committed receipts name %s, want 2", n, st.ID)
			}
		})
	}
}

// TestStandingAndPreconditions: a request bound to the state of its target (a precondition
// read when it was stored) grants no standing approval; a call that reads its target's state is
// never admitted by one — presenting one is refused precondition_missing, and presenting none
// puts it before a person.
func TestStandingAndPreconditions(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			f := newStandingFixture(t, backend)
			state := func(context.Context, latch.PreconditionRequest) (any, error) {
				return map[string]any{"balance": 10}, nil
			}
			withState := func(order string) *latch.Call {
				c := refundCall(order, 100)
				c.Options = &latch.Options{Precondition: state}
				return c
			}
			ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "bot"})
			run := func(ctx context.Context, c *latch.Call) error {
				_, err := f.g.Execute(ctx, c, func(context.Context, json.RawMessage) (any, error) { return "x", nil })
				return err
			}
			var are *latch.ApprovalRequiredError
			if err := run(ctx, withState("s-1")); !errors.As(err, &are) {
				t.Fatalf("a call reading its target's state: %v, want approval required", err)
			}
			terms := store.StandingTerms{Uses: 3, For: store.Duration(time.Hour), Vary: []string{"order_id"}}
			if _, err := f.g.Answer(t.Context(), &store.AnswerRequest{ID: are.ApprovalID, Grant: true, Approver: "alice", Standing: &terms}); standingReason(err) != store.ReasonStandingNotAllowed {
				t.Errorf("a standing grant of a request bound to its target's state: %v, want standing_not_allowed", err)
			}
			// A standing approval granted from a request that read no state…
			_, req := f.ask("bot", "", "refund.issue", `{"order_id":"o-1","amount":100,"currency":"EUR"}`)
			if _, err := f.g.Answer(t.Context(), &store.AnswerRequest{ID: req, Grant: true, Approver: "alice", Standing: &terms}); err != nil {
				t.Fatal(err)
			}
			st := f.standingFrom(req)
			// … admits no call that reads one.
			err := run(latch.WithApproval(ctx, st.ID), withState("s-2"))
			if r := latch.RefusalOf(err); r == nil || r.Reason != latch.ReasonPreconditionMissing {
				t.Errorf("presenting it on a call reading its target's state: %v, want precondition_missing", err)
			}
			if err := run(ctx, withState("s-3")); !errors.As(err, &are) {
				t.Errorf("presenting nothing on a call reading its target's state: %v, want approval required", err)
			}
			if cur, _ := f.g.Standing(t.Context(), st.ID); cur.Uses != 0 {
				t.Errorf("the standing approval spent %d uses on calls reading their target's state", cur.Uses)
			}
		})
	}
}
