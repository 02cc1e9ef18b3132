package operator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/latchkit/latch/authority"
	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// ErrNoPolicy is the error of the budget questions asked of an Operator without a policy:
// budgets are declared there.
var ErrNoPolicy = errors.New("budgets are declared in the policy, and the operator was given none")

// ErrNoGrant is the error of InspectGrant for an id that names no policy grant and no
// delegation.
var ErrNoGrant = errors.New("no such grant or delegation")

// owner is what a set of budgets belongs to: a policy grant, a delegation, or an action's own
// budgets for one principal.
type owner struct {
	budget  string // the id charges against it name
	kind    string // jsonview.BudgetOf*
	grant   string // the grant's or delegation's id
	action  string
	per     string
	who     string
	budgets []policy.Budget
}

// ledger is what the budget questions read once: the policy's grants, the stored delegations
// (their grant documents read as the guard reads them), and the ledger rows that can count at
// now.
type ledger struct {
	now     time.Time
	pol     *policy.Policy
	dels    []authority.Delegation
	stored  map[string]*store.Delegation
	charges map[string][]*store.ChargeRecord // by budget id, oldest first
	effects map[string]*store.Effect         // by effect key; nil value: no record
}

// readLedger reads the delegations and every ledger row consumed within the longest window of
// the budgets in question (an older row cannot count toward any of them).
func (o *Operator) readLedger(ctx context.Context) (*ledger, error) {
	pol := o.cfg.Policy
	if pol == nil {
		return nil, ErrNoPolicy
	}
	l := &ledger{now: o.cfg.Now(), pol: pol, stored: map[string]*store.Delegation{}, charges: map[string][]*store.ChargeRecord{},
		effects: map[string]*store.Effect{}}
	if pol.Authority != nil {
		if ds, ok := o.cfg.Store.(store.DelegationStore); ok {
			rows, err := ds.Delegations(ctx)
			if err != nil {
				return nil, fmt.Errorf("read delegations: %w", err)
			}
			for _, r := range rows {
				d := authority.Delegation{ID: r.ID, Parent: r.Parent, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, Revoked: !r.RevokedAt.IsZero()}
				if g, err := policy.ParseGrant(r.ID, r.Grant); err != nil {
					d.Err = err
				} else {
					d.Grant = *g
					d.Grant.ID = ""
				}
				l.dels = append(l.dels, d)
				l.stored[r.ID] = r
			}
		}
	}
	longest := longestWindow(pol, l.dels)
	if longest == 0 {
		return l, nil // nothing is budgeted: the ledger is not read, nor needed
	}
	bs, ok := o.cfg.Store.(store.BudgetStore)
	if !ok {
		return nil, fmt.Errorf("store %T keeps no budget ledger", o.cfg.Store)
	}
	rows, err := bs.Charges(ctx, store.ChargeFilter{Since: l.now.Add(-longest)})
	if err != nil {
		return nil, fmt.Errorf("read budget ledger: %w", err)
	}
	for _, r := range rows {
		l.charges[r.Budget] = append(l.charges[r.Budget], r)
	}
	return l, nil
}

func longestWindow(pol *policy.Policy, dels []authority.Delegation) time.Duration {
	var w time.Duration
	see := func(bs []policy.Budget) {
		for _, b := range bs {
			w = max(w, b.Window)
		}
	}
	if pol.Authority != nil {
		for _, g := range pol.Authority.Grants {
			see(g.Budgets)
		}
		for _, env := range pol.Authority.BreakGlass {
			see(env.Budgets)
		}
	}
	for _, d := range dels {
		see(d.Grant.Budgets)
	}
	for _, a := range pol.Actions {
		see(a.Budgets)
	}
	return w
}

// Budgets are the budgets in force now, each with what it has consumed and what it holds: every
// budget of a policy grant that has not expired, then of every break-glass envelope (shared by
// the grants opened in it), then of every live delegation (its chain
// checked as a call's would be: authority.Live) in creation order, then every action's own
// budget for each principal with ledger rows within its window, by action and principal. A
// policy without budgets has none, and the ledger is not read.
func (o *Operator) Budgets(ctx context.Context) ([]jsonview.Budget, error) {
	return o.budgets(ctx, true)
}

// BudgetLevels are Budgets without their held charges (Held is empty): what a gauge or an alert
// on consumption needs, read without an effect record per charge.
func (o *Operator) BudgetLevels(ctx context.Context) ([]jsonview.Budget, error) {
	return o.budgets(ctx, false)
}

func (o *Operator) budgets(ctx context.Context, withHeld bool) ([]jsonview.Budget, error) {
	l, err := o.readLedger(ctx)
	if err != nil {
		return nil, err
	}
	out := []jsonview.Budget{}
	auth := l.pol.Authority
	if auth != nil {
		for _, g := range auth.Grants {
			if len(g.Budgets) == 0 || authority.Live(auth, l.dels, g.ID, l.now) != nil {
				continue
			}
			views, err := o.views(ctx, l, grantOwner(g.ID, jsonview.BudgetOfGrant, g.Budgets), withHeld)
			if err != nil {
				return nil, err
			}
			out = append(out, views...)
		}
		for _, env := range auth.BreakGlass {
			if len(env.Budgets) == 0 {
				continue
			}
			views, err := o.views(ctx, l, grantOwner(env.ID, jsonview.BudgetOfEnvelope, env.Budgets), withHeld)
			if err != nil {
				return nil, err
			}
			out = append(out, views...)
		}
		for _, d := range l.dels {
			if d.Err != nil || len(d.Grant.Budgets) == 0 || authority.Live(auth, l.dels, d.ID, l.now) != nil {
				continue
			}
			views, err := o.views(ctx, l, grantOwner(d.ID, jsonview.BudgetOfDelegation, d.Grant.Budgets), withHeld)
			if err != nil {
				return nil, err
			}
			out = append(out, views...)
		}
	}
	for _, ow := range l.actionOwners() {
		views, err := o.views(ctx, l, ow, withHeld)
		if err != nil {
			return nil, err
		}
		out = append(out, views...)
	}
	return out, nil
}

func grantOwner(id, kind string, bs []policy.Budget) owner {
	return owner{budget: id, kind: kind, grant: id, budgets: bs}
}

// actionOwners are the action budgets kept for each principal with ledger rows: one owner per
// (action, per, who), by action name, per and who.
func (l *ledger) actionOwners() []owner {
	var out []owner
	for _, name := range slices.Sorted(maps.Keys(l.pol.Actions)) {
		a := l.pol.Actions[name]
		byWho := map[[2]string][]policy.Budget{} // (per, who) → the budgets with rows
		for _, b := range a.Budgets {
			prefix := store.ActionBudget(name, b.Per, "")
			for id, rows := range l.charges {
				who, ok := strings.CutPrefix(id, prefix)
				if !ok || !slices.ContainsFunc(rows, func(r *store.ChargeRecord) bool { return r.Metric == b.Metric }) {
					continue
				}
				k := [2]string{b.Per, who}
				byWho[k] = append(byWho[k], b)
			}
		}
		keys := slices.SortedFunc(maps.Keys(byWho), func(x, y [2]string) int { return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1])) })
		for _, k := range keys {
			out = append(out, owner{budget: store.ActionBudget(name, k[0], k[1]), kind: jsonview.BudgetOfAction, action: name, per: k[0], who: k[1], budgets: byWho[k]})
		}
	}
	return out
}

// views are ow's budgets as an operator reads them at l.now; withHeld lists each held charge
// and why (reading its effect), else only their sum.
func (o *Operator) views(ctx context.Context, l *ledger, ow owner, withHeld bool) ([]jsonview.Budget, error) {
	out := make([]jsonview.Budget, 0, len(ow.budgets))
	for _, b := range ow.budgets {
		held := Held(l.charges[ow.budget], b.Metric, b.Window, l.now)
		v := jsonview.Budget{Budget: ow.budget, Kind: ow.kind, Grant: jsonview.Str(ow.grant), Action: jsonview.Str(ow.action),
			Per: jsonview.Str(ow.per), Who: jsonview.Str(ow.who), Metric: b.Metric, Limit: b.Limit,
			Window: policy.FormatISODuration(b.Window), WindowSeconds: int64(b.Window / time.Second), Held: make([]jsonview.Held, 0, len(held))}
		for _, r := range held {
			v.Consumed += r.Amount
			if !withHeld {
				continue
			}
			e, err := l.effect(ctx, o.cfg.Store, r.EffectKey)
			if err != nil {
				return nil, err
			}
			v.Held = append(v.Held, heldView(r, e, l.now))
		}
		v.Remaining = max(v.Limit-v.Consumed, 0)
		v.Ratio = Ratio(v.Consumed, v.Limit)
		out = append(out, v)
	}
	return out, nil
}

// Held are the charges of rows against metric that count at now within window: unreleased
// and consumed in (now − window, now], the span a reservation's own check sums. Their amounts
// are the budget's consumption.
func Held(rows []*store.ChargeRecord, metric string, window time.Duration, now time.Time) []*store.ChargeRecord {
	from := now.Add(-window)
	var out []*store.ChargeRecord
	for _, r := range rows {
		if r.Metric == metric && r.ReleasedAt.IsZero() && r.ConsumedAt.After(from) && !r.ConsumedAt.After(now) {
			out = append(out, r)
		}
	}
	return out
}

// Ratio is how much of limit consumed uses: consumed / limit, and 1 for a limit of 0 (a budget
// that admits nothing is exhausted).
func Ratio(consumed, limit int64) float64 {
	if limit <= 0 {
		return 1
	}
	return float64(consumed) / float64(limit)
}

// effect is the effect record of key, read once per question; nil when there is none.
func (l *ledger) effect(ctx context.Context, st store.Store, key string) (*store.Effect, error) {
	if e, ok := l.effects[key]; ok {
		return e, nil
	}
	e, err := st.Effect(ctx, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		e = nil
	case err != nil:
		return nil, fmt.Errorf("read effect of a budget charge: %w", err)
	}
	l.effects[key] = e
	return e, nil
}

// heldView is the charge r as an operator reads it, with why it is held: its effect e's state at
// now (e nil: the record is gone).
func heldView(r *store.ChargeRecord, e *store.Effect, now time.Time) jsonview.Held {
	h := jsonview.Held{EffectKey: r.EffectKey, Attempt: r.Attempt, ActionID: jsonview.Str(r.ActionID), Amount: r.Amount,
		ConsumedAt: jsonview.Stamp(r.ConsumedAt)}
	if e == nil {
		h.Why = "its effect record is gone (pruned): held until the charge leaves the window"
		return h
	}
	h.State = jsonview.Str(string(e.State))
	h.NeedsPerson = NeedsPerson(e, now)
	switch {
	case e.State == store.Ambiguous:
		h.Why = "its effect is ambiguous: held until a person resolves it (released only if resolved failed)"
	case e.State == store.Executing && h.NeedsPerson:
		h.Why = "its effect's lease lapsed with no outcome: held until a person resolves it (released only if resolved failed)"
	case e.State == store.Executing:
		h.Why = "its effect is executing: held until its outcome is known (released if it did not happen)"
	case e.State == store.Committed:
		h.Why = "its effect committed: held until the charge leaves the window"
	default:
		h.Why = "its effect is " + string(e.State) + " (attempt " + fmt.Sprint(e.Attempt) + "): held until the charge leaves the window"
	}
	return h
}

// InspectGrant is what an operator reads of the grant id (a policy grant or a delegation):
// whether it can decide a call now, and each of its budgets with what it has consumed and what
// it holds — shown for a grant that is no longer live too, as its ledger rows stay. An id that
// names neither is an error wrapping ErrNoGrant.
func (o *Operator) InspectGrant(ctx context.Context, id string) (jsonview.GrantInspection, error) {
	l, err := o.readLedger(ctx)
	if err != nil {
		return jsonview.GrantInspection{}, err
	}
	out := jsonview.GrantInspection{GrantID: id, Actions: []string{}, Budgets: []jsonview.Budget{}}
	var g *policy.Grant
	if a := l.pol.Authority; a != nil {
		for _, pg := range a.Grants {
			if pg.ID == id {
				g, out.Kind = pg, jsonview.BudgetOfGrant
			}
		}
		if env := a.Envelope(id); env != nil && g == nil {
			g, out.Kind = &env.Grant, jsonview.BudgetOfEnvelope
		}
	}
	if d := l.stored[id]; d != nil && g == nil {
		out.Kind, out.Parent = jsonview.BudgetOfDelegation, jsonview.Str(d.Parent)
		for i := range l.dels {
			if l.dels[i].ID == id && l.dels[i].Err == nil {
				g = &l.dels[i].Grant
			}
		}
	}
	if out.Kind == "" {
		return jsonview.GrantInspection{}, fmt.Errorf("inspect grant %s: %w", id, ErrNoGrant)
	}
	if out.Kind == jsonview.BudgetOfEnvelope {
		out.NotLive = jsonview.Str("a break-glass envelope decides no call on its own: the grants a person opens in it do (latch break-glass)")
	} else if err := authority.Live(l.pol.Authority, l.dels, id, l.now); err != nil {
		out.NotLive = jsonview.Str(err.Error()) // the reason word, the dimension, and why
	} else {
		out.Live = true
	}
	if g == nil {
		return out, nil // an unreadable delegation: NotLive says why
	}
	out.Subject = jsonview.Principal{Agent: jsonview.Str(g.Subject.Agent), User: jsonview.Str(g.Subject.User)}
	out.Actions = append(out.Actions, g.Actions...)
	out.ExpiresAt = jsonview.Stamp(g.ExpiresAt)
	if len(g.Budgets) > 0 {
		if out.Budgets, err = o.views(ctx, l, grantOwner(id, out.Kind, g.Budgets), true); err != nil {
			return jsonview.GrantInspection{}, err
		}
	}
	return out, nil
}

// WatchBudgets reads BudgetLevels now and then every interval until ctx ends, and hands each
// read to f (with the error of a read that failed): latch serve's gauge of consumption and its
// threshold alerts. It returns when ctx ends.
func (o *Operator) WatchBudgets(ctx context.Context, every time.Duration, f func([]jsonview.Budget, error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		list, err := o.BudgetLevels(ctx)
		if ctx.Err() != nil {
			return
		}
		f(list, err)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
