package cli

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

//go:embed demo.yaml
var demoPolicy []byte

// demoAuthorityPolicy is examples/authority/payments.yaml (a test keeps the copy identical): the
// fifth scenario plays its delegation chain.
//
//go:embed demo_authority.yaml
var demoAuthorityPolicy []byte

// scenario is one thing latch refuses, played against a fake remote. run returns nil only when
// the refusal happened and the remote saw exactly the calls it should have; it prints its own
// narrative.
type scenario struct {
	title string
	run   func(ctx context.Context, d *demo) error
}

// scenarios is the demo, in order. A new scenario is one more entry.
func scenarios() []scenario {
	return []scenario{
		{title: "A lost reply, then a blind retry", run: lostReply},
		{title: "An approval for €2,000 presented for €5,000", run: mutatedApproval},
		{title: "Two workers, one merge", run: twoWorkers},
		{title: "An approval replayed", run: replayedApproval},
		{title: "Authority escalation", run: authorityEscalation},
	}
}

// remote is the fake system on the other side: it counts what reached it.
type remote struct {
	mu    sync.Mutex
	calls map[string]int
}

func (r *remote) call(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[kind]++
}

func (r *remote) count(kind string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[kind]
}

// demo is what a scenario plays with: a guard on the scratch store, a fresh remote, the output,
// and the scratch directory for a scenario that needs a guard of its own.
type demo struct {
	g      *latch.Guard
	remote *remote
	out    io.Writer
	mark   func(bool) string
	// authorityStore is the scratch store of the authority scenario, which runs its own guard.
	authorityStore string
}

func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, "   "+format+"\n", args...)
}

func (a *app) demoCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Watch latch refuse five things, in process, in under a second",
		Long: `Play the scenarios latch exists for, in process, with no network, against a fake
remote that counts what reached it, on a scratch SQLite store in a temporary
directory that is removed afterwards. Your policy and your store are never read.

The fifth scenario runs examples/authority/payments.yaml (embedded) on a clock fixed
at 2026-11-29T10:00:00Z, so that its grants' expiries hold whenever it is played.

Exits 0 only if every refusal happened and every remote saw exactly what it should.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runDemo(scenarios())
		},
	}
}

func (a *app) runDemo(list []scenario) error {
	start := time.Now()
	urls, cleanup, err := a.scratchStores(a.ctx, "demo", "authority")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer cleanup()
	p, err := policy.Parse("demo.yaml", demoPolicy)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	g, err := latch.Open(a.ctx, &latch.Config{Policy: p, StoreURL: urls[0], Environment: "demo"})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer g.Close()

	fmt.Fprintf(a.stdout, "latch demo: %d things latch refuses, in process, against fake remotes that count what reached them\n", len(list))
	var failed []string
	for i, sc := range list {
		fmt.Fprintf(a.stdout, "\n%d. %s\n", i+1, sc.title)
		d := &demo{g: g, remote: &remote{calls: map[string]int{}}, out: a.stdout, mark: a.mark, authorityStore: urls[1]}
		if err := sc.run(a.ctx, d); err != nil {
			failed = append(failed, fmt.Sprintf("scenario %d (%s): %v", i+1, sc.title, err))
			d.say("%s did not happen as it should: %v", a.mark(false), err)
		}
	}
	elapsed := time.Since(start).Round(time.Millisecond)
	fmt.Fprintln(a.stdout)
	summary := fmt.Sprintf("%d of %d refusals happened", len(list)-len(failed), len(list))
	fmt.Fprintf(a.stdout, "%s %s, in %v; the scratch store is removed.\n", a.mark(len(failed) == 0), summary, elapsed)
	if len(failed) > 0 {
		return errors.New("demo: " + strings.Join(failed, "; "))
	}
	return nil
}

// short is an error as the demo prints it: a refusal by its reason, without the store's detail
// (the lease's expiry, the two hashes of a mismatch) that a receipt keeps.
func short(err error) string {
	var ee *latch.EffectError
	var am *latch.ApprovalMismatchError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &ee):
		e := *ee
		e.Detail = ""
		return reason(&e)
	case errors.As(err, &am):
		e := *am
		e.Detail = ""
		return reason(&e)
	}
	return reason(err)
}

// refundArgs is the support agent's call.
type refundArgs struct {
	OrderID string `json:"order_id"`
	Amount  int64  `json:"amount"`
}

func lostReply(ctx context.Context, d *demo) error {
	refund := latch.Protect(d.g, "payments.refund", func(ctx context.Context, r refundArgs) (string, error) {
		// The provider refunds, and the reply is lost on the way back.
		d.remote.call("refund")
		return "", fmt.Errorf("POST /v1/refunds: %w", context.DeadlineExceeded)
	}, nil)
	ctx = latch.WithPrincipal(ctx, latch.Principal{Agent: "support-agent"})
	r := refundArgs{OrderID: "ord_1001", Amount: 12000}

	d.say("support-agent refunds order ord_1001 (€120.00). The provider refunds it; the reply is lost.")
	_, err1 := refund(ctx, r)
	d.say("attempt 1: %s", short(err1))
	_, err2 := refund(ctx, r)
	d.say("attempt 2, a blind retry: refused: %s", short(err2))
	n := d.remote.count("refund")
	d.say("remote refund calls: %d", n)
	switch {
	case !errors.Is(err1, latch.ErrAmbiguous):
		return fmt.Errorf("attempt 1 should be ambiguous, got %v", err1)
	case !errors.Is(err2, latch.ErrAmbiguousEffect):
		return fmt.Errorf("the retry should be refused as ambiguous, got %v", err2)
	case n != 1:
		return fmt.Errorf("remote refund calls: %d, want 1", n)
	}
	d.say("%s unknown is not failed: nothing retries it until someone checks and runs latch resolve refund:ord_1001", d.mark(true))
	return nil
}

// payoutArgs is the payout agent's call.
type payoutArgs struct {
	PayoutID string `json:"payout_id"`
	Amount   int64  `json:"amount"`
}

func (d *demo) payout() func(context.Context, payoutArgs) (string, error) {
	return latch.Protect(d.g, "payments.payout", func(ctx context.Context, p payoutArgs) (string, error) {
		d.remote.call("payout")
		return "tx_" + p.PayoutID, nil
	}, nil)
}

// requestApproval makes the call that needs a human and has approver grant it.
func (d *demo) requestApproval(ctx context.Context, call func(context.Context, payoutArgs) (string, error), p payoutArgs, approver string) (string, error) {
	_, err := call(ctx, p)
	var req *latch.ApprovalRequiredError
	if !errors.As(err, &req) {
		return "", fmt.Errorf("the payout should need approval, got %v", err)
	}
	d.say("payout-agent asks to pay out €%s (%s): the policy sends it to a human, request %s", euros(p.Amount), p.PayoutID, req.ApprovalID)
	if _, err := d.g.Approve(ctx, req.ApprovalID, approver); err != nil {
		return "", fmt.Errorf("approve: %w", err)
	}
	d.say("%s approves exactly that action, hash %s", approver, req.ActionHash)
	return req.ApprovalID, nil
}

func euros(cents int64) string {
	s := fmt.Sprintf("%d", cents/100)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return fmt.Sprintf("%s.%02d", b.String(), cents%100)
}

func mutatedApproval(ctx context.Context, d *demo) error {
	payout := d.payout()
	agent := latch.WithPrincipal(ctx, latch.Principal{Agent: "payout-agent"})
	asked := payoutArgs{PayoutID: "po_7", Amount: 200000}
	id, err := d.requestApproval(agent, payout, asked, "alice")
	if err != nil {
		return err
	}
	mutated := asked
	mutated.Amount = 500000
	_, errM := payout(latch.WithApproval(agent, id), mutated)
	d.say("the agent presents alice's approval with €%s instead: refused: %s", euros(mutated.Amount), short(errM))
	before := d.remote.count("payout")
	ap, err := d.g.Store().Approval(ctx, id)
	if err != nil {
		return err
	}
	d.say("remote payout calls so far: %d; the approval is untouched: still %s", before, ap.Status)
	_, errOK := payout(latch.WithApproval(agent, id), asked)
	d.say("the €%s call it was granted for: %s", euros(asked.Amount), short(errOK))
	n := d.remote.count("payout")
	d.say("remote payout calls: %d", n)
	var mm *latch.ApprovalMismatchError
	switch {
	case !errors.As(errM, &mm) || mm.Reason != "mismatch":
		return fmt.Errorf("the €5,000 call should be refused as a mismatch, got %v", errM)
	case before != 0 || ap.Status != store.Granted:
		return fmt.Errorf("after the mismatch: %d remote calls and approval %s, want 0 and granted", before, ap.Status)
	case errOK != nil:
		return fmt.Errorf("the approved call should commit, got %v", errOK)
	case n != 1:
		return fmt.Errorf("remote payout calls: %d, want 1", n)
	}
	d.say("%s an approval is bound to the SHA-256 of what the human saw, and matches nothing else", d.mark(true))
	return nil
}

// mergeArgs is the merge bot's call.
type mergeArgs struct {
	Repo   string `json:"repo"`
	Number int64  `json:"number"`
}

func twoWorkers(ctx context.Context, d *demo) error {
	// The winner holds the key until the other worker has been turned away, so the two really
	// overlap; the timeout only bounds a demo that went wrong.
	turnedAway := make(chan struct{})
	var once sync.Once
	merge := latch.Protect(d.g, "git.merge", func(ctx context.Context, m mergeArgs) (string, error) {
		d.remote.call("merge")
		select {
		case <-turnedAway:
		case <-time.After(2 * time.Second):
		}
		return "merged", nil
	}, nil)
	m := mergeArgs{Repo: "latchkit/latch", Number: 42}
	d.say("merge-bot-1 and merge-bot-2 both pick up the job \"merge latchkit/latch#42\", at the same time")
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wctx := latch.WithPrincipal(ctx, latch.Principal{Agent: fmt.Sprintf("merge-bot-%d", i+1)})
			_, errs[i] = merge(wctx, m)
			if errors.Is(errs[i], latch.ErrDuplicateEffect) {
				once.Do(func() { close(turnedAway) })
			}
		}()
	}
	wg.Wait()
	won, refused := 0, 0
	for i, err := range errs {
		d.say("merge-bot-%d: %s", i+1, short(err))
		switch {
		case err == nil:
			won++
		case errors.Is(err, latch.ErrDuplicateEffect):
			refused++
		}
	}
	n := d.remote.count("merge")
	d.say("remote merge calls: %d", n)
	if won != 1 || refused != 1 || n != 1 {
		return fmt.Errorf("%d won, %d refused, %d remote merges; want 1, 1, 1", won, refused, n)
	}
	d.say("%s one effect key, one winner: the key is reserved in one atomic write before anything runs", d.mark(true))
	return nil
}

func replayedApproval(ctx context.Context, d *demo) error {
	payout := d.payout()
	agent := latch.WithPrincipal(ctx, latch.Principal{Agent: "payout-agent"})
	p := payoutArgs{PayoutID: "po_8", Amount: 300000}
	id, err := d.requestApproval(agent, payout, p, "bob")
	if err != nil {
		return err
	}
	_, err1 := payout(latch.WithApproval(agent, id), p)
	d.say("the agent pays out with it: %s", short(err1))
	_, err2 := payout(latch.WithApproval(agent, id), p)
	d.say("the agent presents the same approval again: refused: %s", short(err2))
	n := d.remote.count("payout")
	d.say("remote payout calls: %d", n)
	var mm *latch.ApprovalMismatchError
	switch {
	case err1 != nil:
		return fmt.Errorf("the approved call should commit, got %v", err1)
	case !errors.As(err2, &mm) || mm.Reason != "consumed":
		return fmt.Errorf("the replay should be refused as consumed, got %v", err2)
	case n != 1:
		return fmt.Errorf("remote payout calls: %d, want 1", n)
	}
	d.say("%s an approval is single use: spent in the same write that reserved the effect", d.mark(true))
	return nil
}

// demoEpoch is the fifth scenario's clock: the grants of payments.yaml and the delegations below
// expire, so the scenario runs at a fixed instant rather than on the wall clock.
var demoEpoch = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// The delegations of the fifth scenario, as their authors would write them to a file for latch
// delegate.
const (
	demoFinanceGrant = `subject: { agent: finance-bot }
actions: [payments.refund]
constraints: { amount_lte: 100000, currency_in: [EUR, USD] }
environments: [production]
expires_at: "2026-12-15T00:00:00Z"
delegable: true
`
	demoGreedyGrant = `subject: { agent: support-bot }
actions: [payments.refund]
constraints: { amount_lte: 500000, currency_in: [EUR, USD] }
environments: [production]
expires_at: "2026-12-01T00:00:00Z"
`
	demoSupportGrant = `subject: { agent: support-bot }
actions: [payments.refund]
constraints: { amount_lte: 10000, currency_in: [EUR] }
environments: [production]
expires_at: "2026-12-01T00:00:00Z"
`
)

// paymentRefund is a refund under payments.yaml.
type paymentRefund struct {
	RefundID string `json:"refund_id"`
	OrderID  string `json:"order_id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

func authorityEscalation(ctx context.Context, d *demo) error {
	p, err := policy.Parse("payments.yaml", demoAuthorityPolicy)
	if err != nil {
		return err
	}
	start := time.Now()
	g, err := latch.Open(ctx, &latch.Config{
		Policy: p, StoreURL: d.authorityStore,
		Environment: "production", Now: func() time.Time { return demoEpoch.Add(time.Since(start)) },
	})
	if err != nil {
		return err
	}
	defer g.Close()
	refund := latch.Protect(g, "payments.refund", func(ctx context.Context, r paymentRefund) (string, error) {
		d.remote.call("refund")
		return "re_" + r.RefundID, nil
	}, nil)

	fin, err := g.Delegate(ctx, "alice-payments", []byte(demoFinanceGrant), latch.Principal{Agent: "cli", User: "alice"})
	if err != nil {
		return fmt.Errorf("alice's delegation to finance-bot should be created, got %v", err)
	}
	d.say("alice holds payments.* up to €5,000.00 and delegates refunds up to €1,000.00 to finance-bot: %s", fin.ID)

	finBot := latch.Principal{Agent: "finance-bot"}
	_, errGreedy := g.Delegate(ctx, fin.ID, []byte(demoGreedyGrant), finBot)
	d.say("finance-bot tries to delegate refunds up to €5,000.00 to support-bot, more than it holds: refused: %s", delegationRefusal(errGreedy))
	sup, err := g.Delegate(ctx, fin.ID, []byte(demoSupportGrant), finBot)
	if err != nil {
		return fmt.Errorf("finance-bot's narrower delegation should be created, got %v", err)
	}
	d.say("finance-bot delegates refunds up to €100.00, in EUR, to support-bot instead: %s", sup.ID)

	support := latch.WithPrincipal(ctx, latch.Principal{Agent: "support-bot"})
	big := paymentRefund{RefundID: "rf_2002", OrderID: "ord_2002", Amount: 50000, Currency: "EUR"}
	_, errBig := refund(support, big)
	d.say("support-bot refunds order %s (€%s), beyond its delegation: refused: %s", big.OrderID, euros(big.Amount), short(errBig))
	before := d.remote.count("refund")
	d.say("remote refund calls: %d", before)
	small := paymentRefund{RefundID: "rf_2003", OrderID: "ord_2003", Amount: 5000, Currency: "EUR"}
	_, errSmall := refund(support, small)
	d.say("support-bot refunds order %s (€%s), within it: %s", small.OrderID, euros(small.Amount), short(errSmall))
	n := d.remote.count("refund")
	d.say("remote refund calls: %d", n)

	var ae *latch.AuthorityError
	switch {
	case !errors.As(errGreedy, &ae) || ae.Reason != "authority_escalation" || ae.Dimension != "constraints.amount_lte":
		return fmt.Errorf("the wider delegation should be refused authority_escalation on constraints.amount_lte, got %v", errGreedy)
	case !errors.As(errBig, &ae) || ae.Reason != "authority_constraint":
		return fmt.Errorf("the €500.00 refund should be refused authority_constraint, got %v", errBig)
	case before != 0:
		return fmt.Errorf("remote refund calls after the refusal: %d, want 0", before)
	case errSmall != nil:
		return fmt.Errorf("the €50.00 refund should go through, got %v", errSmall)
	case n != 1:
		return fmt.Errorf("remote refund calls: %d, want 1", n)
	}
	d.say("%s a delegation can only narrow: checked when it is created, and again at every call", d.mark(true))
	return nil
}

// delegationRefusal is a refused delegation as the demo prints it: reason on dimension.
func delegationRefusal(err error) string {
	var ae *latch.AuthorityError
	if errors.As(err, &ae) {
		if ae.Dimension != "" {
			return ae.Reason + " on " + ae.Dimension
		}
		return ae.Reason
	}
	return short(err)
}
