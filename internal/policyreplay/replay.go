// Package policyreplay re-decides recorded calls under a proposed policy and reports every
// decision that would change: the evidence a person reads before approving a policy change.
//
// Replay reads the call receipts of a store (the last N, or those finished since a time),
// rebuilds each call's action from its receipt — action, arguments, resource, principal,
// environment, task — and decides it as a guard over the proposed policy would: the policy's
// rules and, when the policy has an authority section, the authority axis over the store's
// delegations. It does this through latch.Guard.Evaluate itself, on a guard whose store is a
// read-only view of the delegations, so a replay decides exactly as the guard does and cannot
// write: it executes nothing, reserves nothing, records nothing.
//
// Each call is decided as of the moment it started (its receipt's started_at): a grant's expiry
// is compared with that instant, and only the delegations that existed then, revoked only if
// they were revoked by then, take part. The question a replay answers is "what would the
// proposed policy have decided, then, about the calls that were actually made".
//
// A call that asked for an approval has a call receipt once it is made again with the approval;
// a request never presented again has none, so it is not replayed.
//
// A refusal that depends on a circumstance of the moment rather than on the policy — an
// expired or unidentifiable credential, a spent budget, a resource outside the caller's scope,
// an unreadable store, and any reason this version does not know — is kept as recorded: a
// policy cannot undo it, and a replay does not know the state it depended on.
package policyreplay

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// DefaultMaxChanges is how many changed calls a report lists when Options.MaxChanges is 0. The
// counts always cover every call.
const DefaultMaxChanges = 1000

// Options bounds and adjusts a replay. The zero value (or nil) replays every call receipt.
type Options struct {
	// Last, when positive, replays only the call receipts among the store's last Last
	// receipts (the records of other kinds — resolutions, approvals, delegations — count
	// towards Last but are not calls, so are not replayed).
	Last int
	// Since, when not zero, replays only the receipts finished at or after it.
	Since time.Time
	// Environment, when set, decides every call in this environment instead of the one its
	// receipt records.
	Environment string
	// Now, when not zero, decides every call as of this instant (grant expiry, delegations
	// created and revoked by then) instead of as of the moment each call started.
	Now time.Time
	// MaxChanges caps the changed calls listed in Report.Changes; 0 means DefaultMaxChanges,
	// a negative value lists none. Report.Changed and Report.Transitions count them all.
	MaxChanges int
}

// Report is what a replay found.
type Report struct {
	PolicyHash    string // the proposed policy's hash
	PolicyVersion string // the proposed policy's version, "" when it has none
	// Replayed counts the call receipts re-decided; Skipped those without a principal
	// (nothing could have decided them differently) or with a redacted argument (the receipt
	// holds a commitment to its value, not the value); Kept the refusals kept as recorded
	// because they depend on a circumstance of the moment (see the package comment).
	Replayed int
	Skipped  int
	Kept     int
	// FirstSeq and LastSeq are the seqs of the first and last receipt read, 0 when none.
	FirstSeq int64
	LastSeq  int64
	// Changed counts the calls whose decision changes; Transitions counts them per change,
	// ordered by From then To.
	Changed     int
	Transitions []Transition
	// Changes lists the changed calls in seq order, at most Options.MaxChanges of them;
	// Truncated says some were left out.
	Changes   []Change
	Truncated bool
}

// Transition is one kind of change and how many calls make it.
type Transition struct {
	From  policy.Decision
	To    policy.Decision
	Count int
}

// Key is the transition as "allow→approve".
func (t Transition) Key() string { return string(t.From) + "→" + string(t.To) }

// Change is one recorded call whose decision the proposed policy changes.
type Change struct {
	Seq         int64
	ReceiptID   string
	ActionID    string
	Action      string
	Principal   receipt.Principal
	Environment string
	Resource    string
	EffectKey   string // as recorded
	StartedAt   time.Time
	From        policy.Decision // the recorded decision
	FromReason  string
	To          policy.Decision // the proposed policy's decision
	Reason      string          // the proposed policy's reason
}

// ErrNoPolicy is returned when Replay is given no proposed policy.
var ErrNoPolicy = errors.New("policy replay: no proposed policy")

// Replay re-decides the call receipts of st that opts selects under proposed and reports the
// calls whose decision changes. It only reads st: its receipts and its delegations. An error
// means the replay could not be made (the store could not be read, a receipt could not be
// parsed); a call the proposed policy cannot decide is a deny, as the guard would refuse it.
func Replay(ctx context.Context, st store.Store, proposed *policy.Policy, opts *Options) (*Report, error) {
	if proposed == nil {
		return nil, ErrNoPolicy
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Last < 0 {
		return nil, fmt.Errorf("policy replay: last %d: must not be negative", o.Last)
	}
	if o.MaxChanges == 0 {
		o.MaxChanges = DefaultMaxChanges
	}
	view, err := readDelegations(ctx, st, proposed)
	if err != nil {
		return nil, err
	}
	clock := &clock{}
	g, err := latch.Open(ctx, &latch.Config{Policy: proposed, Store: view, Now: clock.now, Environment: o.Environment})
	if err != nil {
		return nil, fmt.Errorf("policy replay: %w", err)
	}
	defer g.Close() // closes only the view

	rep := &Report{PolicyHash: proposed.Hash, PolicyVersion: proposed.Version, Changes: []Change{}, Transitions: []Transition{}}
	counts := map[[2]policy.Decision]int{}
	for sealed, err := range st.Receipts(ctx, store.ReceiptFilter{Last: o.Last, Since: o.Since}) {
		if err != nil {
			return nil, fmt.Errorf("policy replay: read receipts: %w", err)
		}
		if rep.FirstSeq == 0 {
			rep.FirstSeq = sealed.Seq
		}
		rep.LastSeq = sealed.Seq
		rc, err := receipt.Parse(sealed.Doc)
		if err != nil {
			return nil, fmt.Errorf("policy replay: receipt %d: %w", sealed.Seq, err)
		}
		if !receipt.IsCall(rc.Kind) {
			continue
		}
		if rc.Principal.Agent == "" || receipt.HasRedacted(rc.Arguments) {
			// No principal: nothing could have decided it otherwise. A redacted argument: the
			// receipt holds a commitment, not the value, so the call cannot be re-decided.
			rep.Skipped++
			continue
		}
		rep.Replayed++
		from := policy.Decision(rc.Decision)
		if from == policy.Deny && !replayable(rc.DecisionReason) {
			rep.Kept++
			continue
		}
		at := o.Now
		if at.IsZero() {
			at = rc.StartedAt
		}
		clock.at = at
		view.asOf = at
		to, reason, err := decide(ctx, g, rc, o.Environment)
		if err != nil {
			return nil, fmt.Errorf("policy replay: receipt %d (%s): %w", rc.Seq, rc.Action, err)
		}
		if to == from {
			continue
		}
		rep.Changed++
		counts[[2]policy.Decision{from, to}]++
		if len(rep.Changes) < o.MaxChanges {
			rep.Changes = append(rep.Changes, Change{
				Seq: rc.Seq, ReceiptID: rc.ReceiptID, ActionID: rc.ActionID, Action: rc.Action, Principal: rc.Principal,
				Environment: rc.Environment, Resource: rc.Resource, EffectKey: rc.EffectKey, StartedAt: rc.StartedAt,
				From: from, FromReason: rc.DecisionReason, To: to, Reason: reason,
			})
		} else {
			rep.Truncated = true
		}
	}
	for k, n := range counts {
		rep.Transitions = append(rep.Transitions, Transition{From: k[0], To: k[1], Count: n})
	}
	sort.Slice(rep.Transitions, func(i, j int) bool {
		a, b := rep.Transitions[i], rep.Transitions[j]
		if a.From != b.From {
			return decisionRank(a.From) < decisionRank(b.From)
		}
		return decisionRank(a.To) < decisionRank(b.To)
	})
	return rep, nil
}

// decide re-decides one recorded call with the guard's own Evaluate. A call whose arguments
// cannot form the action under the proposed policy (an effect key template it cannot render) is
// a deny with that reason, as Execute would record it.
func decide(ctx context.Context, g *latch.Guard, rc *receipt.Receipt, env string) (policy.Decision, string, error) {
	if env == "" {
		env = rc.Environment
	}
	call := &latch.Call{Action: rc.Action, Arguments: rc.Arguments, Resource: rc.Resource, Environment: env}
	if rc.Task != "" {
		call.Options = &latch.Options{Task: rc.Task}
	}
	p := latch.Principal{Agent: rc.Principal.Agent, User: rc.Principal.User, Issuer: rc.Principal.Issuer}
	ev, err := g.Evaluate(latch.WithPrincipal(ctx, p), call)
	var inv *latch.InvalidArgumentError
	switch {
	case errors.As(err, &inv):
		return policy.Deny, inv.Reason, nil
	case err != nil:
		return "", "", err
	}
	return ev.Decision, ev.Reason, nil
}

// replayable says whether a recorded denial's reason is one a policy decides (its rules, its
// arguments, its templates, its budgets' shape, its authority grants), so that another policy
// may decide it otherwise. Every other denial depends on a circumstance of the moment and is
// kept — invalid_argument too: arguments that could not form an action at all (a float, not an
// object) are recorded as {}, and re-deciding {} would answer about a call nobody made.
func replayable(reason string) bool {
	if reason == policy.ReasonDecision || strings.HasPrefix(reason, "rule[") {
		return true // a bare decision, or the rule that decided
	}
	switch latch.Reason(reason) {
	case latch.ReasonDenied, latch.ReasonUnknownAction, latch.ReasonNoMatchingRule,
		latch.ReasonEffectKeyError, latch.ReasonMissingArgument, latch.ReasonInvalidArguments,
		latch.ReasonBudgetMetricMissing, latch.ReasonBudgetMetricInvalid, latch.ReasonBudgetNeedsEffectKey,
		latch.ReasonNoAuthority, latch.ReasonAuthorityEscalation, latch.ReasonAuthorityRevoked,
		latch.ReasonAuthorityExpired, latch.ReasonAuthorityConstraint:
		return true
	}
	return false
}

func decisionRank(d policy.Decision) int {
	switch d {
	case policy.Allow:
		return 0
	case policy.Approve:
		return 1
	case policy.Deny:
		return 2
	}
	return 3
}

// clock is the guard's Now: the instant the call being replayed is decided as of.
type clock struct{ at time.Time }

func (c *clock) now() time.Time { return c.at }

// View is the report in its one JSON shape (jsonview.PolicyReplay).
func (r *Report) View() jsonview.PolicyReplay {
	out := jsonview.PolicyReplay{
		PolicyHash: r.PolicyHash, PolicyVersion: jsonview.Str(r.PolicyVersion), Replayed: r.Replayed, Skipped: r.Skipped,
		Kept: r.Kept, Changed: r.Changed, Transitions: map[string]int{}, Changes: []jsonview.ReplayChange{}, Truncated: r.Truncated,
	}
	if r.FirstSeq != 0 {
		out.FirstSeq, out.LastSeq = &r.FirstSeq, &r.LastSeq
	}
	for _, t := range r.Transitions {
		out.Transitions[t.Key()] = t.Count
	}
	for _, c := range r.Changes {
		out.Changes = append(out.Changes, jsonview.ReplayChange{
			Seq: c.Seq, ReceiptID: c.ReceiptID, ActionID: c.ActionID, Action: c.Action,
			Principal:   jsonview.Principal{Agent: jsonview.Str(c.Principal.Agent), User: jsonview.Str(c.Principal.User)},
			Environment: c.Environment, Resource: jsonview.Str(c.Resource), EffectKey: jsonview.Str(c.EffectKey),
			StartedAt: jsonview.Stamp(c.StartedAt), From: string(c.From), FromReason: jsonview.Str(c.FromReason),
			To: string(c.To), Reason: jsonview.Str(c.Reason),
		})
	}
	return out
}
