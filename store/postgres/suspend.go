package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latchkit/latch/store"
)

// suspensionsVersion is the schema version that added suspended executions.
const suspensionsVersion = 17

// errNoSuspensions refuses a suspension on a store kept at an older schema.
var errNoSuspensions = errors.New("the store's schema predates suspended executions: open it with a writer to migrate it")

const suspensionColumns = `action_id, round, effect_key, attempt, token_sha256, arguments_sha256, agent, principal_user,
	request, suspended_at, lease_expires_at, resumed_at, input_keys, input_sha256`

var _ store.Suspender = (*Store)(nil)

// Suspend suspends an executing attempt, in one transaction: the lease extended, the next round
// inserted (a second suspension racing for the same round inserts nothing and is decided again
// from what the first wrote) and its event written.
func (s *Store) Suspend(ctx context.Context, req *store.SuspendRequest) (*store.SuspendResult, error) {
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("suspend: %w", err)
	}
	if s.version < suspensionsVersion {
		return nil, fmt.Errorf("suspend: %w", errNoSuspensions)
	}
	return s.suspendWrite(ctx, "suspend "+req.ActionID, req.Now, func(ctx context.Context, t *txn) (*store.SuspendPlan, error) {
		eff, err := t.readEffect(ctx, req.Key)
		if err != nil {
			return nil, err
		}
		last, err := t.lastSuspension(ctx, req.ActionID)
		if err != nil {
			return nil, err
		}
		return store.PlanSuspend(req, eff, last), nil
	})
}

// Resume spends the open suspension of an action, in one transaction: the token, holder and
// arguments checked, the round spent (a compare-and-set on its being open), the lease extended
// and execution_resumed written. A lease that lapsed meanwhile is written ambiguous and the
// resume refused.
func (s *Store) Resume(ctx context.Context, req *store.ResumeRequest) (*store.SuspendResult, error) {
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	if s.version < suspensionsVersion {
		return nil, fmt.Errorf("resume: %w", errNoSuspensions)
	}
	return s.suspendWrite(ctx, "resume "+req.ActionID, req.Now, func(ctx context.Context, t *txn) (*store.SuspendPlan, error) {
		last, err := t.lastSuspension(ctx, req.ActionID)
		if err != nil || last == nil {
			return store.PlanResume(req, nil, nil), err
		}
		eff, err := t.readEffect(ctx, last.EffectKey)
		if err != nil {
			return nil, err
		}
		return store.PlanResume(req, last, eff), nil
	})
}

// suspendWrite runs one Suspend or Resume: read and plan, then write the plan; a plan whose
// refusal writes nothing is rolled back, one that writes (a lapse) is committed, then refused.
func (s *Store) suspendWrite(ctx context.Context, op string, now time.Time, plan func(context.Context, *txn) (*store.SuspendPlan, error)) (*store.SuspendResult, error) {
	w, err := s.write(ctx, op, func(ctx context.Context, t *txn) error {
		if err := t.lockHead(ctx); err != nil { // a lapse appends a record: the head first (the lock order)
			return err
		}
		p, err := plan(ctx, t)
		if err != nil {
			return err
		}
		if p.Effect == nil {
			return refused{p.Refusal}
		}
		if err := t.writeSuspension(ctx, p); err != nil {
			return err
		}
		events, _, err := t.apply(ctx, p.Effect, nil, p.Events, now, p.Record)
		if err != nil {
			return err
		}
		res := p.Result
		res.Events = events
		t.w.result, t.w.refusal = &res, p.Refusal
		return nil
	})
	if err != nil {
		return nil, err
	}
	if w.refusal != nil {
		return nil, w.refusal
	}
	return w.result.(*store.SuspendResult), nil
}

// lastSuspension reads the last round of actionID, nil when it has none.
func (t *txn) lastSuspension(ctx context.Context, actionID string) (*store.Suspension, error) {
	sp, err := scanSuspension(t.QueryRow(ctx, `SELECT `+suspensionColumns+` FROM `+t.s.tbl("suspensions")+`
		WHERE action_id = $1 ORDER BY round DESC LIMIT 1`, actionID))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, t.checkPending(ctx)
	case err != nil:
		return nil, fmt.Errorf("read suspension of %s: %w", actionID, err)
	}
	if err := t.checkPending(ctx); err != nil {
		return nil, err
	}
	return sp, nil
}

// writeSuspension inserts the plan's new round or spends its open one; no row written is
// errConflict: another transaction wrote first, and the next try decides from what it wrote.
func (t *txn) writeSuspension(ctx context.Context, p *store.SuspendPlan) error {
	var q string
	var args []any
	var seen presence
	switch {
	case p.Insert != nil:
		n := p.Insert
		at, err1 := nanos(n.SuspendedAt)
		until, err2 := nanos(n.LeaseExpiresAt)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("write suspension: %w", err)
		}
		q = `INSERT INTO ` + t.s.tbl("suspensions") + ` (action_id, round, effect_key, attempt, token_sha256,
			arguments_sha256, agent, principal_user, request, suspended_at, lease_expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT DO NOTHING`
		args = []any{n.ActionID, n.Round, n.EffectKey, n.Attempt, n.TokenHash, n.ArgumentsHash, n.Agent, n.User,
			string(n.Request), at, until}
		seen = presence{`SELECT count(*) FROM ` + t.s.tbl("suspensions") + ` WHERE action_id = $1 AND round = $2 AND token_sha256 = $3`,
			[]any{n.ActionID, n.Round, n.TokenHash}}
	case p.Spend != nil:
		n := p.Spend
		at, err := nanos(n.ResumedAt)
		if err != nil {
			return fmt.Errorf("write suspension: %w", err)
		}
		keys, err := json.Marshal(n.InputKeys)
		if err != nil {
			return fmt.Errorf("write suspension: %w", err)
		}
		q = `UPDATE ` + t.s.tbl("suspensions") + ` SET resumed_at = $3, input_keys = $4, input_sha256 = $5
			WHERE action_id = $1 AND round = $2 AND resumed_at = 0`
		args = []any{n.ActionID, n.Round, at.Int64, string(keys), n.InputHash}
		seen = presence{`SELECT count(*) FROM ` + t.s.tbl("suspensions") + ` WHERE action_id = $1 AND round = $2 AND resumed_at = $3`,
			[]any{n.ActionID, n.Round, at.Int64}}
	default:
		return nil // a lapse: the effect only
	}
	tag, err := t.Exec(ctx, q, args...)
	switch {
	case err != nil:
		return fmt.Errorf("write suspension: %w", err)
	case tag.RowsAffected() != 1:
		if err := t.checkPending(ctx); err != nil {
			return err
		}
		return errConflict
	}
	t.w.inserted = append(t.w.inserted, seen)
	return nil
}

// Suspensions returns the rounds of actionID, oldest first.
func (s *Store) Suspensions(ctx context.Context, actionID string) ([]*store.Suspension, error) {
	if s.version < suspensionsVersion {
		return nil, nil
	}
	return list(ctx, s, "suspensions", `SELECT `+suspensionColumns+` FROM `+s.tbl("suspensions")+`
		WHERE action_id = $1 ORDER BY round`, []any{actionID}, scanSuspension)
}

func scanSuspension(row pgx.Row) (*store.Suspension, error) {
	var sp store.Suspension
	var request, keys string
	var at, until stamp
	var resumed int64
	if err := row.Scan(&sp.ActionID, &sp.Round, &sp.EffectKey, &sp.Attempt, &sp.TokenHash, &sp.ArgumentsHash, &sp.Agent,
		&sp.User, &request, &at, &until, &resumed, &keys, &sp.InputHash); err != nil {
		return nil, err
	}
	sp.Request = json.RawMessage(request)
	sp.SuspendedAt, sp.LeaseExpiresAt = fromNanos(at), fromNanos(until)
	if resumed != 0 {
		sp.ResumedAt = fromNanos(stamp{Int64: resumed, Valid: true})
	}
	if err := json.Unmarshal([]byte(keys), &sp.InputKeys); err != nil {
		return nil, fmt.Errorf("suspension %s round %d: input keys: %w", sp.ActionID, sp.Round, err)
	}
	return &sp, nil
}
