package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/latchkit/latch/internal/safetext"
)

// Charge is one budget charge a reservation makes (docs/budgets.md): Amount of Metric against
// the budget named Budget, whose Limit holds over a rolling Window. The store checks it inside
// the reservation's own transaction — the unreleased charges of (Budget, Metric) consumed within
// (Now − Window, Now], plus Amount, may not exceed Limit — and writes it in that transaction, so
// no check-then-act window exists across processes or hosts.
//
// A charge is held while its effect is executing, committed or ambiguous, and released (a
// compare-and-set on its release time, never a decrement) exactly when its effect becomes
// failed: the executor's NotExecuted, a resolution to failed, a reconcile hook's not_executed.
// A renewal of a failed effect charges again under its new attempt.
type Charge struct {
	// Budget is the budget's id, the same for every charge against it: a grant's id (a policy
	// grant, a delegation's dlg_ id) for a grant's budget; for an action's own budget,
	// ActionBudget(action, per, who).
	Budget string
	Metric string // "count", or the name of the integer argument summed
	Amount int64  // ≥ 0
	Limit  int64  // ≥ 0
	Window time.Duration
}

// ActionBudget is the budget id of an action's own budget kept per principal: per is "agent",
// "user" or "principal", who the agent, the user, or "agent/user".
func ActionBudget(action, per, who string) string {
	return "action:" + action + ":" + per + ":" + who
}

// ChargeRecord is one row of the budget ledger.
type ChargeRecord struct {
	Budget     string
	Metric     string
	Amount     int64
	Limit      int64
	Window     time.Duration
	EffectKey  string
	Attempt    int
	ActionID   string
	ConsumedAt time.Time
	ReleasedAt time.Time // zero while the charge is held
}

// ChargeFilter selects ledger rows: those of Budget (every budget when ""), Metric (every metric
// when ""), consumed at or after Since (all when zero).
type ChargeFilter struct {
	Budget string
	Metric string
	Since  time.Time
	Limit  int // 0 = no limit
}

// BudgetStore is implemented by backends that keep a budget ledger. A guard whose policy declares
// a budget needs it: without it, every budgeted call is refused.
type BudgetStore interface {
	// Charges returns ledger rows, oldest first.
	Charges(ctx context.Context, f ChargeFilter) ([]*ChargeRecord, error)
}

// ReasonBudgetExhausted is the Refusal reason of a reservation refused by a budget charge: the
// charge would take its budget's held amount past its limit within its window.
const ReasonBudgetExhausted = "budget_exhausted"

// ErrChargesNeedKey refuses a reservation (or an approval request's probe) that carries budget
// charges but no effect key: a charge is held and released with the effect it was made for, and
// without a key there is none. The pipeline refuses such calls before the store; reaching the
// store with one is a programming error. The error matches ErrInvalidInput too. Nothing is
// written.
var ErrChargesNeedKey = errors.New("budget charges need an effect key")

// checkCharges refuses charges a ledger cannot hold: a charge without a budget or a metric, a
// negative amount or limit, a window that is not positive, or one (budget, metric) charged twice
// with different amounts (two budgets over one metric of one grant, an hour's and a day's, are
// two checks of the one amount, kept as one row). The error matches ErrInvalidInput, or
// ErrChargesNeedKey for charges without an effect key.
func checkCharges(key string, cs []Charge) error {
	if len(cs) == 0 {
		return nil
	}
	if key == "" {
		return fmt.Errorf("%w (%w): %d charge(s) on a reservation without an effect key", ErrChargesNeedKey, ErrInvalidInput, len(cs))
	}
	amounts := make(map[[2]string]int64, len(cs))
	for i := range cs {
		c := &cs[i]
		field := fmt.Sprintf("charge %d", i)
		switch {
		case c.Budget == "":
			return &InputError{Field: field + " budget", Reason: "is empty"}
		case c.Metric == "":
			return &InputError{Field: field + " metric", Value: c.Budget, Reason: "is empty"}
		case c.Amount < 0:
			return &InputError{Field: field + " amount", Value: strconv.FormatInt(c.Amount, 10), Reason: "is negative"}
		case c.Limit < 0:
			return &InputError{Field: field + " limit", Value: strconv.FormatInt(c.Limit, 10), Reason: "is negative"}
		case c.Window <= 0:
			return &InputError{Field: field + " window", Value: c.Window.String(), Reason: "is not positive"}
		}
		if err := checkTexts(field+" budget", c.Budget, field+" metric", c.Metric); err != nil {
			return err
		}
		k := [2]string{c.Budget, c.Metric}
		if a, ok := amounts[k]; ok && a != c.Amount {
			return &InputError{Field: field + " amount", Value: strconv.FormatInt(c.Amount, 10),
				Reason: fmt.Sprintf("budget %s metric %s is charged %d by an earlier charge of the same reservation", safetext.Quote(c.Budget), safetext.Quote(c.Metric), a)}
		}
		amounts[k] = c.Amount
	}
	return nil
}

// HeldSince is the start of c's window at now, exclusive: the charges of its (Budget, Metric)
// consumed after it, at or before now, and not released are what c's limit holds. A backend
// reads that sum for each charge of a reservation (Held) before it plans it.
func (c *Charge) HeldSince(now time.Time) time.Time { return now.Add(-c.Window) }

// PlanCharges decides the charges of a reservation whose effect would be reserved as attempt:
// held[i] is the unreleased amount of req.Charges[i]'s (Budget, Metric) consumed in
// (Now − Window, Now], as the backend read it in the reservation's transaction. The first charge,
// in order, that would take its held amount past its limit refuses the reservation
// (ReasonBudgetExhausted); else the ledger rows to insert are returned, one per distinct
// (Budget, Metric) — the first charge's limit and window are the row's. The refusal's detail
// names the budget, the metric and the window, and never an amount held or left: a caller that
// could read them could probe the budget.
func PlanCharges(req *ReserveRequest, held []int64, attempt int) (*Refusal, []ChargeRecord) {
	if len(held) != len(req.Charges) {
		// A backend that read too few sums must not admit a charge it did not check.
		c := req.Charges[0]
		return &Refusal{Reason: ReasonBudgetExhausted, Charge: &c,
			Detail: fmt.Sprintf("budget charges of effect %s: %d held amounts read for %d charges", safetext.Quote(req.EffectKey), len(held), len(req.Charges))}, nil
	}
	for i := range req.Charges {
		c := req.Charges[i]
		if c.Amount > c.Limit-held[i] {
			return &Refusal{Reason: ReasonBudgetExhausted, Charge: &c, Detail: ExhaustedDetail(&c)}, nil
		}
	}
	rows := make([]ChargeRecord, 0, len(req.Charges))
	seen := make(map[[2]string]bool, len(req.Charges))
	for _, c := range req.Charges {
		k := [2]string{c.Budget, c.Metric}
		if seen[k] {
			continue
		}
		seen[k] = true
		rows = append(rows, ChargeRecord{Budget: c.Budget, Metric: c.Metric, Amount: c.Amount, Limit: c.Limit, Window: c.Window,
			EffectKey: req.EffectKey, Attempt: attempt, ActionID: req.ActionID, ConsumedAt: req.Now})
	}
	return nil, rows
}

// ExhaustedDetail is the detail of a budget_exhausted refusal: the budget, the metric and the
// window, never an amount.
func ExhaustedDetail(c *Charge) string {
	return fmt.Sprintf("budget %s exhausted: metric %s would exceed its limit within the rolling window %s",
		safetext.Quote(c.Budget), safetext.Quote(c.Metric), FormatWindow(c.Window))
}

// ChargeChange says what an effect write does to the charges of the attempt it writes: -1 it
// releases them (the attempt becomes failed), +1 it holds them again (a failed attempt resolved
// committed by a person, after its holder reported committed), 0 nothing. A backend applies it
// in the effect write's own transaction, to the rows of the written record's key and attempt
// only: a release is a compare-and-set on released_at IS NULL, never a decrement.
func ChargeChange(w *EffectWrite) int {
	if w == nil {
		return 0
	}
	wasFailed := w.Prev != nil && w.Prev.State == Failed && w.Prev.Attempt == w.Next.Attempt
	switch {
	case w.Next.State == Failed && !wasFailed:
		return -1
	case w.Next.State != Failed && wasFailed:
		return +1
	}
	return 0
}

// FormatWindow writes a window as an ISO 8601 duration, as receipts record it: whole days as
// "P30D", anything else in hours, minutes and seconds ("PT1H30M", "PT0.5S").
func FormatWindow(d time.Duration) string {
	if d <= 0 {
		return "PT0S"
	}
	const day = 24 * time.Hour
	if d%day == 0 {
		return "P" + strconv.FormatInt(int64(d/day), 10) + "D"
	}
	var b strings.Builder
	b.WriteString("P")
	if days := d / day; days > 0 {
		b.WriteString(strconv.FormatInt(int64(days), 10) + "D")
		d -= days * day
	}
	b.WriteString("T")
	if h := d / time.Hour; h > 0 {
		b.WriteString(strconv.FormatInt(int64(h), 10) + "H")
		d -= h * time.Hour
	}
	if m := d / time.Minute; m > 0 {
		b.WriteString(strconv.FormatInt(int64(m), 10) + "M")
		d -= m * time.Minute
	}
	if d > 0 {
		b.WriteString(strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "S")
	}
	return b.String()
}

// ParseWindow reads an ISO 8601 duration of weeks, days, hours, minutes and seconds ("P1W",
// "P30D", "PT24H", "P1DT12H", "PT0.5S"), as FormatWindow and the policy write them. Years and
// months, whose length varies, are refused.
func ParseWindow(s string) (time.Duration, error) {
	bad := func(why string) (time.Duration, error) {
		return 0, fmt.Errorf("window %s: %s", strconv.Quote(s), why)
	}
	rest, ok := strings.CutPrefix(s, "P")
	if !ok || rest == "" || rest == "T" {
		return bad("is not an ISO 8601 duration (P…)")
	}
	var total time.Duration
	inTime := false
	units := "WD"
	for rest != "" {
		if rest[0] == 'T' {
			if inTime {
				return bad("has two T")
			}
			inTime, units, rest = true, "HMS", rest[1:]
			if rest == "" {
				return bad("ends after T")
			}
			continue
		}
		i := strings.IndexFunc(rest, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
		if i <= 0 {
			return bad("lacks a number before a unit")
		}
		num := rest[:i]
		u := rest[i]
		j := strings.IndexByte(units, u)
		if j < 0 {
			return bad(fmt.Sprintf("has unit %q where %s is expected", u, units))
		}
		units = units[j+1:] // each unit once, in order
		scale := map[byte]time.Duration{'W': 7 * 24 * time.Hour, 'D': 24 * time.Hour, 'H': time.Hour, 'M': time.Minute, 'S': time.Second}[u]
		var part time.Duration
		if n, err := strconv.ParseInt(num, 10, 64); err == nil && n <= int64(math.MaxInt64/scale) {
			part = time.Duration(n) * scale
		} else if f, err := strconv.ParseFloat(num, 64); err == nil && f*float64(scale) < math.MaxInt64 {
			part = time.Duration(f * float64(scale))
		} else {
			return bad("has a malformed or too large number")
		}
		if total > math.MaxInt64-part {
			return bad("is longer than the store can hold")
		}
		total += part
		rest = rest[i+1:]
	}
	if total <= 0 {
		return bad("is not positive")
	}
	return total, nil
}

// CheckChargeFilter refuses a filter whose budget or metric cannot be kept, or whose limit is
// negative (ErrInvalidInput).
func CheckChargeFilter(f *ChargeFilter) error {
	if f.Limit < 0 {
		return &InputError{Field: "limit", Value: strconv.Itoa(f.Limit), Reason: "is negative"}
	}
	return checkTexts("budget", f.Budget, "metric", f.Metric)
}
