package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latchkit/latch/store"
)

var _ store.BudgetStore = (*Store)(nil)

// ledgerVersion is the schema that added the budget ledger (migration 14).
const ledgerVersion = 14

// The budget ledger's statements; {s} is the schema.
const (
	// heldQuery is the amount a charge's (budget, metric) holds in its window: unreleased rows
	// consumed after the window's start, at or before now. The index holds every column it
	// reads.
	heldQuery = `SELECT COALESCE(SUM(amount), 0)::bigint FROM {s}.budget_charges
		WHERE budget = $1 AND metric = $2 AND consumed_at > $3 AND consumed_at <= $4 AND released_at IS NULL`
	insertChargeQuery = `INSERT INTO {s}.budget_charges (effect_key, attempt, budget, metric, amount, budget_limit, window_ns,
		action_id, consumed_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
	// releaseQuery is a compare-and-set on released_at IS NULL: of two releases of one charge,
	// one sets it.
	releaseQuery = `UPDATE {s}.budget_charges SET released_at = $3 WHERE effect_key = $1 AND attempt = $2 AND released_at IS NULL`
	holdQuery    = `UPDATE {s}.budget_charges SET released_at = NULL WHERE effect_key = $1 AND attempt = $2 AND released_at IS NOT NULL`
	// lockBudgets takes the transaction-scoped advisory locks of the (budget, metric) pairs a
	// reservation charges, in the order given (ascending: two reservations never wait on each
	// other in opposite orders).
	lockBudgetsQuery = `SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) WITH ORDINALITY AS u(k, i) ORDER BY i`
)

func (s *Store) ledgerSQL(q string) string { return strings.ReplaceAll(q, "{s}", s.quoted()) }

// budgetLocks are the advisory lock keys of the (budget, metric) pairs charges charge, distinct
// and ascending. A key is a hash of the schema, the budget and the metric: two pairs that hash
// alike only share a lock.
func (s *Store) budgetLocks(charges []store.Charge) []int64 {
	keys := make([]int64, 0, len(charges))
	for _, c := range charges {
		h := fnv.New64a()
		h.Write([]byte("latch budget\x00" + s.schema + "\x00" + c.Budget + "\x00" + c.Metric))
		keys = append(keys, int64(h.Sum64()))
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// held reads, for each charge, the amount its (budget, metric) holds in its window at now
// (store.PlanCharges). It first takes the advisory lock of each pair: a concurrent reservation
// charging the same pair, on another effect key, waits until this transaction ends and then
// reads what it wrote (READ COMMITTED reads each statement afresh), so no two reservations
// decide from the same sum. The lock follows the chain head's in the lock order.
func (t *txn) held(ctx context.Context, charges []store.Charge, now time.Time) ([]int64, error) {
	if len(charges) == 0 {
		return nil, nil
	}
	if t.s.version < ledgerVersion {
		return nil, fmt.Errorf("the store's schema predates the budget ledger: open it with a writer to migrate it")
	}
	if _, err := t.Exec(ctx, lockBudgetsQuery, t.s.budgetLocks(charges)); err != nil {
		return nil, fmt.Errorf("lock budgets: %w", err)
	}
	at, err := nanos(now)
	if err != nil {
		return nil, err
	}
	q := t.s.ledgerSQL(heldQuery)
	out := make([]int64, len(charges))
	for i := range charges {
		c := &charges[i]
		since, err := nanos(c.HeldSince(now))
		if err != nil {
			return nil, fmt.Errorf("budget %s: %w", c.Budget, err)
		}
		if err := t.QueryRow(ctx, q, c.Budget, c.Metric, since.Int64, at.Int64).Scan(&out[i]); err != nil {
			return nil, fmt.Errorf("read budget %s metric %s: %w", c.Budget, c.Metric, err)
		}
	}
	return out, t.checkPending(ctx)
}

// insertCharges inserts the ledger rows a reservation planned. The primary key backs the plan
// up: a second charge of one attempt's (budget, metric) fails instead of doubling it.
func (t *txn) insertCharges(ctx context.Context, rows []store.ChargeRecord) error {
	q := t.s.ledgerSQL(insertChargeQuery)
	for i := range rows {
		r := &rows[i]
		at, err := nanos(r.ConsumedAt)
		if err != nil {
			return fmt.Errorf("charge %s: %w", r.Budget, err)
		}
		if _, err := t.Exec(ctx, q, r.EffectKey, int64(r.Attempt), r.Budget, r.Metric, r.Amount, r.Limit, int64(r.Window),
			r.ActionID, at.Int64); err != nil {
			return fmt.Errorf("charge %s %s of effect %s: %w", r.Budget, r.Metric, r.EffectKey, err)
		}
	}
	return nil
}

// chargeStmt is the statement that releases, or holds again, the charges of the attempt an
// effect write writes (store.ChargeChange); "" when it changes none.
func (s *Store) chargeStmt(w *store.EffectWrite) (string, []any, error) {
	change := store.ChargeChange(w)
	if change == 0 || s.version < ledgerVersion {
		return "", nil, nil
	}
	n := &w.Next
	if change > 0 {
		return s.ledgerSQL(holdQuery), []any{n.Key, int64(n.Attempt)}, nil
	}
	at, err := nanos(n.UpdatedAt)
	if err != nil {
		return "", nil, fmt.Errorf("release charges of effect %s: %w", n.Key, err)
	}
	return s.ledgerSQL(releaseQuery), []any{n.Key, int64(n.Attempt), at.Int64}, nil
}

// applyCharges runs chargeStmt in the effect write's transaction.
func (t *txn) applyCharges(ctx context.Context, w *store.EffectWrite) error {
	q, args, err := t.s.chargeStmt(w)
	if err != nil || q == "" {
		return err
	}
	if _, err := t.Exec(ctx, q, args...); err != nil {
		return fmt.Errorf("charges of effect %s: %w", w.Next.Key, err)
	}
	return nil
}

// Charges returns the ledger rows f selects, oldest first (store.BudgetStore).
func (s *Store) Charges(ctx context.Context, f store.ChargeFilter) ([]*store.ChargeRecord, error) {
	if err := store.CheckChargeFilter(&f); err != nil {
		return nil, fmt.Errorf("charges: %w", err)
	}
	if s.version < ledgerVersion {
		return nil, nil // a reader of a schema without the ledger sees none
	}
	since := int64(-1 << 63)
	if !f.Since.IsZero() {
		n, err := nanos(f.Since)
		if err != nil {
			return nil, fmt.Errorf("charges: since: %w", err)
		}
		since = n.Int64
	}
	q := s.ledgerSQL(`SELECT budget, metric, amount, budget_limit, window_ns, effect_key, attempt, action_id, consumed_at, released_at
		FROM {s}.budget_charges WHERE ($1 = '' OR budget = $1) AND ($2 = '' OR metric = $2) AND consumed_at >= $3
		ORDER BY consumed_at, effect_key, attempt, budget, metric`)
	args := []any{f.Budget, f.Metric, since}
	if f.Limit > 0 {
		q += ` LIMIT $4`
		args = append(args, f.Limit)
	}
	return list(ctx, s, "charges", q, args, scanCharge)
}

func scanCharge(row pgx.Row) (*store.ChargeRecord, error) {
	var c store.ChargeRecord
	var attempt, window int64
	var consumed, released stamp
	if err := row.Scan(&c.Budget, &c.Metric, &c.Amount, &c.Limit, &window, &c.EffectKey, &attempt, &c.ActionID,
		&consumed, &released); err != nil {
		return nil, err
	}
	c.Attempt, c.Window = int(attempt), time.Duration(window)
	c.ConsumedAt, c.ReleasedAt = fromNanos(consumed), fromNanos(released)
	return &c, nil
}
