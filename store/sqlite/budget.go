package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/latchkit/latch/store"
)

var _ store.BudgetStore = (*Store)(nil)

// ledgerVersion is the schema that added the budget ledger (migration 15).
const ledgerVersion = 15

// errNoLedger refuses budget charges on a store kept at an older schema.
var errNoLedger = errors.New("the store's schema predates the budget ledger: open it with a writer to migrate it")

// keepsLedger reports whether the transaction's schema has the budget ledger.
func (t *txn) keepsLedger() bool { return t.version == 0 || t.version >= ledgerVersion }

// heldSQL is the amount a charge's (budget, metric) holds in its window: unreleased rows consumed
// after the window's start, at or before now. It reads the index alone.
const heldSQL = `SELECT COALESCE(SUM(amount), 0) FROM budget_charges
	WHERE budget = ? AND metric = ? AND consumed_at > ? AND consumed_at <= ? AND released_at IS NULL`

// held reads, for each charge, the amount its (budget, metric) holds in its window at now
// (store.PlanCharges). Under the write lock nothing else charges meanwhile.
func (t *txn) held(charges []store.Charge, now time.Time) ([]int64, error) {
	if len(charges) == 0 {
		return nil, nil
	}
	if !t.keepsLedger() {
		return nil, errNoLedger
	}
	out := make([]int64, len(charges))
	for i := range charges {
		c := &charges[i]
		var b binder
		since, at := b.nanos(c.HeldSince(now)), b.nanos(now)
		if b.err != nil {
			return nil, fmt.Errorf("budget %s: %w", c.Budget, b.err)
		}
		_, err := t.c.queryRowArgs(heldSQL, []arg{text(c.Budget), text(c.Metric), integer(since), integer(at)}, func(sc scanner) error {
			return sc.Scan(&out[i])
		})
		if err != nil {
			return nil, fmt.Errorf("read budget %s metric %s: %w", c.Budget, c.Metric, err)
		}
	}
	return out, nil
}

// insertCharges inserts the ledger rows a reservation planned. The primary key backs the plan
// up: a second charge of one attempt's (budget, metric) fails instead of doubling it.
func (t *txn) insertCharges(rows []store.ChargeRecord) error {
	for i := range rows {
		r := &rows[i]
		var b binder
		at := b.nanos(r.ConsumedAt)
		if b.err != nil {
			return fmt.Errorf("charge %s: %w", r.Budget, b.err)
		}
		if _, err := t.c.execArgs(`INSERT INTO budget_charges (effect_key, attempt, budget, metric, amount, budget_limit, window_ns,
			action_id, consumed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			text(r.EffectKey), integer(int64(r.Attempt)), text(r.Budget), text(r.Metric), integer(r.Amount), integer(r.Limit),
			integer(int64(r.Window)), text(r.ActionID), integer(at)); err != nil {
			return fmt.Errorf("charge %s %s of effect %s: %w", r.Budget, r.Metric, r.EffectKey, err)
		}
	}
	return nil
}

// applyCharges releases, or holds again, the charges of the attempt an effect write writes
// (store.ChargeChange), in the effect write's transaction. A release is a compare-and-set on
// released_at IS NULL: of two releases of one charge, one sets it.
func (t *txn) applyCharges(w *store.EffectWrite) error {
	change := store.ChargeChange(w)
	if change == 0 || !t.keepsLedger() {
		return nil
	}
	n := &w.Next
	if change < 0 {
		var b binder
		at := b.nanos(n.UpdatedAt)
		if b.err != nil {
			return fmt.Errorf("release charges of effect %s: %w", n.Key, b.err)
		}
		_, err := t.c.execArgs(`UPDATE budget_charges SET released_at = ? WHERE effect_key = ? AND attempt = ? AND released_at IS NULL`,
			integer(at), text(n.Key), integer(int64(n.Attempt)))
		if err != nil {
			return fmt.Errorf("release charges of effect %s: %w", n.Key, err)
		}
		return nil
	}
	_, err := t.c.execArgs(`UPDATE budget_charges SET released_at = NULL WHERE effect_key = ? AND attempt = ? AND released_at IS NOT NULL`,
		text(n.Key), integer(int64(n.Attempt)))
	if err != nil {
		return fmt.Errorf("hold charges of effect %s again: %w", n.Key, err)
	}
	return nil
}

// Charges returns the ledger rows f selects, oldest first (store.BudgetStore).
func (s *Store) Charges(ctx context.Context, f store.ChargeFilter) ([]*store.ChargeRecord, error) {
	if err := store.CheckChargeFilter(&f); err != nil {
		return nil, fmt.Errorf("charges: %w", err)
	}
	if s.version != 0 && s.version < ledgerVersion {
		return nil, nil // a reader of a schema without the ledger sees none
	}
	var where []string
	var args []any
	if f.Budget != "" {
		where, args = append(where, "budget = ?"), append(args, f.Budget)
	}
	if f.Metric != "" {
		where, args = append(where, "metric = ?"), append(args, f.Metric)
	}
	if !f.Since.IsZero() {
		var b binder
		since := b.nanos(f.Since)
		if b.err != nil {
			return nil, fmt.Errorf("charges: since: %w", b.err)
		}
		where, args = append(where, "consumed_at >= ?"), append(args, since)
	}
	q := `SELECT budget, metric, amount, budget_limit, window_ns, effect_key, attempt, action_id, consumed_at, released_at
		FROM budget_charges`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY consumed_at, effect_key, attempt, budget, metric`
	if f.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, f.Limit)
	}
	out, err := collect(ctx, s.r, q, args, scanCharge)
	if err != nil {
		return nil, fmt.Errorf("charges: %w", err)
	}
	return out, nil
}

func scanCharge(sc scanner) (*store.ChargeRecord, error) {
	var c store.ChargeRecord
	var window int64
	var consumed, released sql.NullInt64
	if err := sc.Scan(&c.Budget, &c.Metric, &c.Amount, &c.Limit, &window, &c.EffectKey, &c.Attempt, &c.ActionID,
		&consumed, &released); err != nil {
		return nil, err
	}
	c.Window = time.Duration(window)
	c.ConsumedAt, c.ReleasedAt = fromNanos(consumed), fromNanos(released)
	return &c, nil
}
