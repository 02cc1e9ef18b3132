// Package operator is the one place that answers an operator's questions about a latch store:
// the approval requests by status, the effect records by state (among them the ones that need
// a person, by one definition), the receipts, the events, the counts of receipts, the chain's
// verification, a resolution, everything about one id, the budgets in force with what each
// has consumed and holds, and how much of the policy the recorded calls exercised (Coverage). It
// returns the shapes of package internal/jsonview.
//
// Every surface that shows these is an adapter over it: the CLI (latch effects, approvals,
// receipts, stats, inspect, resolve, budgets, coverage), latch serve's routes, event stream,
// budget gauge and budget alerts, the web console's Needs attention, Receipts, Budgets and
// Coverage pages, and the operator MCP server's tools. A question answered here is answered the
// same way on each of them, and a test holds them to it.
package operator

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Config configures an Operator. Store is required.
type Config struct {
	// Store is what the operator reads.
	Store store.Store
	// Policy gives the display hints that read approval arguments as a person should; nil
	// shows the raw values alone.
	Policy *policy.Policy
	// Now is the clock that decides whether a lease lapsed; nil is time.Now.
	Now func() time.Time
	// CheckpointKey is the public key of the signed checkpoints: with it, VerifyChain checks
	// every stored checkpoint against the chain; nil leaves them unchecked (and says so).
	CheckpointKey ed25519.PublicKey
	// Keeper keeps the tally Stats counts of the whole chain, so that the next count reads only
	// the receipts appended since; nil is the Store, when it keeps one (store.TallyKeeper).
	Keeper store.TallyKeeper
}

// Operator answers the operator's questions about one store. It is safe for concurrent use.
type Operator struct {
	cfg Config
	// counting admits one count of the whole chain at a time: requests that arrive while a
	// count reads the chain wait for it, then start from the tally it kept, where each would
	// otherwise read every receipt the tally does not cover (the first count of a store: all of
	// them).
	counting chan struct{}
}

// New returns an Operator.
func New(cfg *Config) (*Operator, error) {
	if cfg == nil || cfg.Store == nil {
		return nil, errors.New("operator: new: Config.Store is required")
	}
	o := &Operator{cfg: *cfg, counting: make(chan struct{}, 1)}
	if o.cfg.Now == nil {
		o.cfg.Now = time.Now
	}
	if k := o.cfg.CheckpointKey; k != nil && len(k) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("operator: new: checkpoint key is %d bytes, an Ed25519 public key is %d", len(k), ed25519.PublicKeySize)
	}
	return o, nil
}

// Store is the store the operator reads.
func (o *Operator) Store() store.Store { return o.cfg.Store }

// Policy is the policy whose display hints and redactions the operator's views read; nil when
// none was given.
func (o *Operator) Policy() *policy.Policy { return o.cfg.Policy }

// Now is the operator's clock.
func (o *Operator) Now() time.Time { return o.cfg.Now() }

// The filter words every surface takes, beside the stored states and statuses.
const (
	// All selects every record (as no filter does).
	All = "all"
	// StateNeedsPerson selects the effect records that need a person (NeedsPerson).
	StateNeedsPerson = "needs_person"
)

// EffectStates are the words an effect filter takes: a stored state, needs_person, or all.
var EffectStates = []string{string(store.Executing), string(store.Committed), string(store.Failed), string(store.Ambiguous), StateNeedsPerson, All}

// ApprovalStatuses are the words an approval filter takes: a stored status, or all.
var ApprovalStatuses = []string{string(store.Pending), string(store.Granted), string(store.Denied), string(store.Expired), string(store.Consumed), All}

// FilterError is a filter word outside its vocabulary: Name is the filter (state, status),
// Value what was given, Allowed the words it takes.
type FilterError struct {
	Name    string
	Value   string
	Allowed []string
}

func (e *FilterError) Error() string {
	return fmt.Sprintf("%s %q is not one of %s", e.Name, e.Value, strings.Join(e.Allowed, ", "))
}

// NeedsPerson reports whether e waits for a person at now: it is exactly what a person's
// resolution accepts (store.PlanResolve), so that everything listed can be resolved and
// everything that can be resolved is listed —
//
//   - ambiguous: the outcome of its attempt is unknown (whether the holder recorded it so, or
//     a contender or the sweeper did when the holder's lease lapsed);
//   - executing under a lease that lapsed: its holder never reported, and every contender is
//     refused until someone looks (reading does not change it; resolving writes it ambiguous
//     and resolved in one transaction);
//   - committed or failed with an outcome conflict: a person resolved it, then its holder
//     reported the opposite; a failed one is not retried until a person resolves it again.
func NeedsPerson(e *store.Effect, now time.Time) bool {
	if e == nil {
		return false
	}
	switch e.State {
	case store.Ambiguous:
		return true
	case store.Executing:
		return store.LeaseLapsed(e, now)
	case store.Committed, store.Failed:
		return e.Conflict != ""
	}
	return false
}

// EffectRecords are the effect records in state (a word of EffectStates; "" is all), ordered by
// key.
func (o *Operator) EffectRecords(ctx context.Context, state string) ([]*store.Effect, error) {
	list, _, err := o.effectPage(ctx, state, "", 0)
	return list, err
}

// effectFilter is the store's selection of the effects in state.
func effectFilter(state string) (store.EffectFilter, error) {
	if state != "" && !slices.Contains(EffectStates, state) {
		return store.EffectFilter{}, &FilterError{Name: "state", Value: state, Allowed: EffectStates}
	}
	switch state {
	case All:
		return store.EffectFilter{}, nil
	case StateNeedsPerson:
		// Read from the effects that can need a person, never from the whole table: the
		// settled ones are nearly every effect the store ever held.
		return store.EffectFilter{Unsettled: true}, nil
	}
	return store.EffectFilter{State: store.State(state)}, nil
}

// effectPage reads the effect records in state with keys after after, ordered by key: at most
// limit of them (0: all) and, when there are more, the key the next page starts after.
func (o *Operator) effectPage(ctx context.Context, state, after string, limit int) ([]*store.Effect, string, error) {
	f, err := effectFilter(state)
	if err != nil {
		return nil, "", err
	}
	var out []*store.Effect
	for {
		f.After = after
		if limit > 0 {
			f.Limit = limit + 1 // one more says whether there is a next page
		}
		list, err := o.cfg.Store.Effects(ctx, f)
		if err != nil {
			return nil, "", fmt.Errorf("list effects: %w", err)
		}
		slices.SortFunc(list, func(x, y *store.Effect) int { return strings.Compare(x.Key, y.Key) })
		full := limit > 0 && len(list) == f.Limit
		if len(list) > 0 {
			after = list[len(list)-1].Key
		}
		if state == StateNeedsPerson {
			// The unsettled effects the store selects include executing ones under a live
			// lease, which are dropped here; a page short of its limit reads on.
			list = needingPerson(list, o.cfg.Now())
		}
		out = append(out, list...)
		if !full || len(out) > limit {
			break
		}
	}
	if limit > 0 && len(out) > limit {
		return out[:limit], out[limit-1].Key, nil
	}
	return out, "", nil
}

// The size of a page of a list (GET /v1/effects, GET /v1/receipts, list_effects): DefaultPage
// when the request names none, at most MaxPage.
const (
	DefaultPage = 100
	MaxPage     = 1000
)

// PageSize is the size of a page a request asks for: DefaultPage when it names none (given
// false), else n, which must be 1 to MaxPage.
func PageSize(n int, given bool) (int, error) {
	switch {
	case !given:
		return DefaultPage, nil
	case n < 1 || n > MaxPage:
		return 0, fmt.Errorf("limit %d: want 1 to %d", n, MaxPage)
	}
	return n, nil
}

// EffectPage is a page of Effects: at most limit effects in state with keys after after, and the
// key the next page starts after ("" when this page is the last).
func (o *Operator) EffectPage(ctx context.Context, state, after string, limit int) ([]jsonview.Effect, string, error) {
	if limit < 1 {
		return nil, "", errors.New("list effects: a page holds at least one effect")
	}
	list, next, err := o.effectPage(ctx, state, after, limit)
	if err != nil {
		return nil, "", err
	}
	return o.effectViews(list), next, nil
}

// Effects are EffectRecords as an operator reads them.
func (o *Operator) Effects(ctx context.Context, state string) ([]jsonview.Effect, error) {
	list, err := o.EffectRecords(ctx, state)
	if err != nil {
		return nil, err
	}
	return o.effectViews(list), nil
}

// effectViews are the records of list as an operator reads them.
func (o *Operator) effectViews(list []*store.Effect) []jsonview.Effect {
	now := o.cfg.Now()
	out := make([]jsonview.Effect, len(list))
	for i, e := range list {
		out[i] = jsonview.NewEffect(e, now)
	}
	return out
}

// Effect is the effect record of key; an error wrapping store.ErrNotFound when there is none.
func (o *Operator) Effect(ctx context.Context, key string) (jsonview.Effect, error) {
	e, err := o.cfg.Store.Effect(ctx, key)
	if err != nil {
		return jsonview.Effect{}, fmt.Errorf("read effect: %w", err)
	}
	return jsonview.NewEffect(e, o.cfg.Now()), nil
}

// EffectView is e as an operator reads it now.
func (o *Operator) EffectView(e *store.Effect) jsonview.Effect {
	return jsonview.NewEffect(e, o.cfg.Now())
}

// ApprovalRecords are the approval requests with status (a word of ApprovalStatuses; "" is
// all), oldest first.
func (o *Operator) ApprovalRecords(ctx context.Context, status string) ([]*store.Approval, error) {
	if status != "" && !slices.Contains(ApprovalStatuses, status) {
		return nil, &FilterError{Name: "status", Value: status, Allowed: ApprovalStatuses}
	}
	f := store.ApprovalFilter{Status: store.ApprovalStatus(status)}
	if status == All {
		f = store.ApprovalFilter{}
	}
	list, err := o.cfg.Store.Approvals(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	return list, nil
}

// Approvals are ApprovalRecords as an operator reads them.
func (o *Operator) Approvals(ctx context.Context, status string) ([]jsonview.Approval, error) {
	list, err := o.ApprovalRecords(ctx, status)
	if err != nil {
		return nil, err
	}
	out := make([]jsonview.Approval, len(list))
	for i, a := range list {
		if out[i], err = o.ApprovalDetail(ctx, a); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Approval is the approval request id; an error wrapping store.ErrNotFound when there is none.
func (o *Operator) Approval(ctx context.Context, id string) (jsonview.Approval, error) {
	a, err := o.cfg.Store.Approval(ctx, id)
	if err != nil {
		return jsonview.Approval{}, fmt.Errorf("read approval: %w", err)
	}
	return o.ApprovalDetail(ctx, a)
}

// ApprovalView is a as an operator reads it, its arguments read through the policy's hints. Its
// reminders carry the schedule only and its edit is null: ApprovalDetail reads what was recorded.
func (o *Operator) ApprovalView(a *store.Approval) jsonview.Approval {
	return jsonview.NewApproval(a, o.cfg.Policy)
}

// ApprovalDetail is ApprovalView with what the request's events record: the reminder and
// escalation the sweeper sent (read only when the action reminds or escalates) and what
// approvers changed of its arguments (edits are made only with grants, so read only when one
// was given).
func (o *Operator) ApprovalDetail(ctx context.Context, a *store.Approval) (jsonview.Approval, error) {
	v := o.ApprovalView(a)
	granted := slices.ContainsFunc(a.Answers, func(x store.Answer) bool { return x.Grant })
	if v.Reminders == nil && !granted {
		return v, nil
	}
	evs, err := o.cfg.Store.Events(ctx, store.EventFilter{ApprovalID: a.ID})
	if err != nil {
		return v, fmt.Errorf("read approval %s: events: %w", a.ID, err)
	}
	if v.Reminders != nil {
		v.Reminders = jsonview.RemindersOf(o.cfg.Policy, a, evs)
	}
	edits, err := store.EditsOf(evs)
	if err != nil {
		return v, fmt.Errorf("read approval %s: %w", a.ID, err)
	}
	v.Edit = jsonview.NewEdit(o.cfg.Policy, a.ActionName, edits)
	return v, nil
}

// Receipt is one stored receipt as an operator reads it (View) and its document read (Doc, nil
// when the row does not read as a receipt).
type Receipt struct {
	View jsonview.Receipt
	Doc  *receipt.Receipt
}

// Receipts yields the receipts f selects, in seq order.
func (o *Operator) Receipts(ctx context.Context, f store.ReceiptFilter) func(yield func(Receipt, error) bool) {
	return func(yield func(Receipt, error) bool) {
		for r, err := range o.cfg.Store.Receipts(ctx, f) {
			if err != nil {
				yield(Receipt{}, fmt.Errorf("read receipts: %w", err))
				return
			}
			v, doc := jsonview.NewReceipt(r)
			if !yield(Receipt{View: v, Doc: doc}, nil) {
				return
			}
		}
	}
}

// ReceiptPage is the receipts after seq after, at most limit of them, and the seq to page on
// from (the last one listed, or after when none was).
func (o *Operator) ReceiptPage(ctx context.Context, after int64, limit int) ([]jsonview.Receipt, int64, error) {
	out := []jsonview.Receipt{}
	next := after
	for r, err := range o.Receipts(ctx, store.ReceiptFilter{AfterSeq: after}) {
		if err != nil {
			return nil, 0, err
		}
		out = append(out, r.View)
		next = r.View.Seq
		if len(out) == limit {
			break
		}
	}
	return out, next, nil
}

// Events are the events f selects, lowest id first.
func (o *Operator) Events(ctx context.Context, f store.EventFilter) ([]jsonview.Event, error) {
	evs, err := o.cfg.Store.Events(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	out := make([]jsonview.Event, len(evs))
	for i, e := range evs {
		out[i] = jsonview.NewEvent(o.cfg.Policy, e)
	}
	return out, nil
}

// ParseWindow reads a window of stats: a Go duration (90m, 36h) or a number of days (7d).
func ParseWindow(s string) (time.Duration, error) {
	if d, ok := policy.ParseDays(s); ok && d > 0 {
		return d, nil
	}
	return 0, fmt.Errorf("since %q: want a positive duration such as 90m, 24h or 7d", s)
}

// ParseSince reads where a window starts: an RFC 3339 time, or a window back from now
// (ParseWindow).
func ParseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		if t.Year() < 1678 || t.Year() > 2261 {
			// Stores keep times as nanoseconds since 1970 in 64 bits.
			return time.Time{}, fmt.Errorf("since %q: want a time between the years 1678 and 2261", s)
		}
		return t, nil
	}
	if d, err := ParseWindow(s); err == nil {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("since %q: want an RFC 3339 time (2026-03-01T00:00:00Z) or a duration such as 90m, 24h or 7d", s)
}

// Stats counts the receipts finished in the last window (0: every receipt) by action and
// result, and in observe mode what enforcement would have blocked. The count of every receipt
// starts from the tally kept of the chain (Config.Keeper) and reads only the receipts appended
// since, then keeps the new tally; a tally that cannot be kept (a read-only store) costs the
// next count time, never its answer.
func (o *Operator) Stats(ctx context.Context, window time.Duration) (jsonview.Stats, error) {
	if window <= 0 {
		select {
		case o.counting <- struct{}{}:
			defer func() { <-o.counting }()
		case <-ctx.Done():
			return jsonview.Stats{}, fmt.Errorf("count receipts: %w", ctx.Err())
		}
		k := o.keeper()
		t, read, err := store.CountChain(ctx, o.cfg.Store, k)
		if err != nil {
			return jsonview.Stats{}, err
		}
		if read > 0 && k != nil {
			_ = k.KeepTally(ctx, t) // a cache: not keeping it changes no answer
		}
		return jsonview.NewStats(t.Stats, time.Time{}, o.cfg.Now()), nil // until: after the count read the chain
	}
	now := o.cfg.Now()
	from := now.Add(-window)
	tally, err := receipt.Tally(o.cfg.Store.Receipts(ctx, store.ReceiptFilter{Since: from}))
	if err != nil {
		return jsonview.Stats{}, fmt.Errorf("count receipts: %w", err)
	}
	return jsonview.NewStats(tally, from, now), nil
}

// keeper is where Stats keeps its tally: Config.Keeper, or the store when it keeps one.
func (o *Operator) keeper() store.TallyKeeper {
	if o.cfg.Keeper != nil {
		return o.cfg.Keeper
	}
	k, _ := o.cfg.Store.(store.TallyKeeper)
	return k
}

// VerifyChain verifies the receipt chain against its head and the stored state against the
// chain, both read in one snapshot (store.VerifyChain: writers appending meanwhile cannot make an
// intact chain look broken), and, with a checkpoint key, every stored checkpoint and every
// anchor (an exported checkpoint kept elsewhere) against the chain.
func (o *Operator) VerifyChain(ctx context.Context, anchors []*receipt.Checkpoint) (jsonview.ChainReport, error) {
	rep, err := store.VerifyChain(ctx, o.cfg.Store)
	if err != nil {
		return jsonview.ChainReport{}, fmt.Errorf("verify chain: %w", err)
	}
	if o.cfg.CheckpointKey == nil {
		if len(anchors) > 0 {
			return jsonview.ChainReport{}, errors.New("verify chain: anchors are checked with a checkpoint public key, and none was given")
		}
		return jsonview.NewChainReport(rep, nil, nil), nil
	}
	breaks, held, err := store.VerifyCheckpoints(ctx, o.cfg.Store, o.cfg.CheckpointKey, anchors)
	if err != nil {
		return jsonview.ChainReport{}, err
	}
	cps := &jsonview.Checkpoints{Held: held}
	if cs, ok := o.cfg.Store.(store.CheckpointStore); ok && rep.Start != nil {
		stored, err := cs.Checkpoints(ctx)
		if err != nil {
			return jsonview.ChainReport{}, fmt.Errorf("verify checkpoints: %w", err)
		}
		for _, c := range stored {
			if c.Seq < rep.Start.Seq {
				cps.Below++
			}
		}
	}
	return jsonview.NewChainReport(rep, breaks, cps), nil
}

// needingPerson keeps, in place, the effects of list that need a person now (NeedsPerson).
func needingPerson(list []*store.Effect, now time.Time) []*store.Effect {
	return slices.DeleteFunc(list, func(e *store.Effect) bool { return !NeedsPerson(e, now) })
}

// Attention is what the console's attention page shows: the effects that need a person
// (NeedsPerson), ordered by key, and how long until the next live lease of an executing effect
// lapses (0: none). An effect whose lease lapses without any write (its holder died and no
// sweeper runs) needs a person from that moment, and no event says so: the page redraws then.
type Attention struct {
	NeedsPerson []*store.Effect
	NextLapse   time.Duration
}

// Attention reads what the console's attention page shows, in one read of the unsettled effects
// (store.EffectFilter Unsettled): both what needs a person and the executing effects whose
// leases are live now, which join the list when their leases lapse (no event announces that).
func (o *Operator) Attention(ctx context.Context) (*Attention, error) {
	unsettled, err := o.cfg.Store.Effects(ctx, store.EffectFilter{Unsettled: true})
	if err != nil {
		return nil, fmt.Errorf("list effects: %w", err)
	}
	slices.SortFunc(unsettled, func(x, y *store.Effect) int { return strings.Compare(x.Key, y.Key) })
	now := o.cfg.Now()
	a := &Attention{NeedsPerson: needingPerson(slices.Clone(unsettled), now)}
	for _, e := range unsettled {
		if e.State != store.Executing || !e.LeaseExpiresAt.After(now) {
			continue
		}
		if d := e.LeaseExpiresAt.Sub(now); a.NextLapse == 0 || d < a.NextLapse {
			a.NextLapse = d
		}
	}
	return a, nil
}
