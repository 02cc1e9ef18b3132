package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/latchkit/latch/store"
)

// suspensionsVersion is the schema version that added suspended executions.
const suspensionsVersion = 18

// errNoSuspensions refuses a suspension on a store kept at an older schema.
var errNoSuspensions = errors.New("the store's schema predates suspended executions: open it with a writer to migrate it")

const suspensionColumns = `action_id, round, effect_key, attempt, token_sha256, arguments_sha256, agent, principal_user,
	request, suspended_at, lease_expires_at, resumed_at, input_keys, input_sha256`

var _ store.Suspender = (*Store)(nil)

// Suspend suspends an executing attempt, in one transaction: the lease extended, the next round
// inserted and its event written.
func (s *Store) Suspend(ctx context.Context, req *store.SuspendRequest) (*store.SuspendResult, error) {
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("suspend: %w", err)
	}
	return s.suspendWrite(ctx, "suspend "+req.ActionID, func(t *txn) (*store.SuspendPlan, error) {
		eff, err := t.effect(req.Key)
		if err != nil {
			return nil, err
		}
		last, err := t.lastSuspension(req.ActionID)
		if err != nil {
			return nil, err
		}
		return store.PlanSuspend(req, eff, last), nil
	})
}

// Resume spends the open suspension of an action, in one transaction: the token, holder and
// arguments checked, the round spent, the lease extended and execution_resumed written. A lease
// that lapsed meanwhile is written ambiguous and the resume refused.
func (s *Store) Resume(ctx context.Context, req *store.ResumeRequest) (*store.SuspendResult, error) {
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	return s.suspendWrite(ctx, "resume "+req.ActionID, func(t *txn) (*store.SuspendPlan, error) {
		last, err := t.lastSuspension(req.ActionID)
		if err != nil || last == nil {
			return store.PlanResume(req, nil, nil), err
		}
		eff, err := t.effect(last.EffectKey)
		if err != nil {
			return nil, err
		}
		return store.PlanResume(req, last, eff), nil
	})
}

// suspendWrite runs one Suspend or Resume under the write lock taken before the reads, which
// makes read, decide and write one step: a plan whose refusal writes nothing is rolled back, one
// that writes (a lapse) is committed, then refused.
func (s *Store) suspendWrite(ctx context.Context, op string, plan func(*txn) (*store.SuspendPlan, error)) (*store.SuspendResult, error) {
	var out *store.SuspendResult
	var refusal error
	err := s.write(ctx, func(t *txn) error {
		if t.version != 0 && t.version < suspensionsVersion {
			return errNoSuspensions
		}
		p, err := plan(t)
		if err != nil {
			return err
		}
		refusal = p.Refusal
		if p.Effect == nil {
			return errRefused
		}
		if err := t.writeSuspension(p); err != nil {
			return err
		}
		now := p.Effect.Next.UpdatedAt
		events, _, err := t.apply(p.Effect, nil, p.Events, now, p.Record)
		if err != nil {
			return err
		}
		res := p.Result
		res.Events = events
		out = &res
		return nil
	})
	switch {
	case errors.Is(err, errRefused):
		return nil, refusal
	case err != nil:
		return nil, fmt.Errorf("%s: %w", op, err)
	case refusal != nil:
		return nil, refusal
	}
	return out, nil
}

// lastSuspension reads the last round of actionID, nil when it has none.
func (t *txn) lastSuspension(actionID string) (*store.Suspension, error) {
	sp, err := readRow(t, `SELECT `+suspensionColumns+` FROM suspensions WHERE action_id = ? ORDER BY round DESC LIMIT 1`,
		[]any{actionID}, scanSuspension)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read suspension of %s: %w", actionID, err)
	}
	return sp, nil
}

// writeSuspension inserts the plan's new round or spends its open one (a compare-and-set on its
// being open).
func (t *txn) writeSuspension(p *store.SuspendPlan) error {
	var b binder
	switch {
	case p.Insert != nil:
		n := p.Insert
		at, until := b.nanos(n.SuspendedAt), b.nanos(n.LeaseExpiresAt)
		if b.err != nil {
			return fmt.Errorf("write suspension: %w", b.err)
		}
		_, err := t.c.exec(`INSERT INTO suspensions (action_id, round, effect_key, attempt, token_sha256, arguments_sha256,
			agent, principal_user, request, suspended_at, lease_expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			n.ActionID, n.Round, n.EffectKey, n.Attempt, n.TokenHash, n.ArgumentsHash, n.Agent, n.User, string(n.Request), at, until)
		if err != nil {
			return fmt.Errorf("write suspension: %w", err)
		}
	case p.Spend != nil:
		n := p.Spend
		at := b.nanos(n.ResumedAt)
		if b.err != nil {
			return fmt.Errorf("write suspension: %w", b.err)
		}
		keys, err := json.Marshal(n.InputKeys)
		if err != nil {
			return fmt.Errorf("write suspension: %w", err)
		}
		rows, err := t.c.exec(`UPDATE suspensions SET resumed_at = ?, input_keys = ?, input_sha256 = ?
			WHERE action_id = ? AND round = ? AND resumed_at = 0`, at, string(keys), n.InputHash, n.ActionID, n.Round)
		return checkRows(rows, err, "spend suspension")
	}
	return nil
}

// Suspensions returns the rounds of actionID, oldest first.
func (s *Store) Suspensions(ctx context.Context, actionID string) ([]*store.Suspension, error) {
	if s.readOnly && s.version < suspensionsVersion {
		return nil, nil
	}
	out, err := collect(ctx, s.r, `SELECT `+suspensionColumns+` FROM suspensions WHERE action_id = ? ORDER BY round`,
		[]any{actionID}, scanSuspension)
	if err != nil {
		return nil, fmt.Errorf("list suspensions: %w", err)
	}
	return out, nil
}

func scanSuspension(sc scanner) (*store.Suspension, error) {
	var sp store.Suspension
	var request, keys string
	var at, until sql.NullInt64
	var resumed int64
	if err := sc.Scan(&sp.ActionID, &sp.Round, &sp.EffectKey, &sp.Attempt, &sp.TokenHash, &sp.ArgumentsHash, &sp.Agent,
		&sp.User, &request, &at, &until, &resumed, &keys, &sp.InputHash); err != nil {
		return nil, err
	}
	sp.Request = json.RawMessage(request)
	sp.SuspendedAt, sp.LeaseExpiresAt = fromNanos(at), fromNanos(until)
	if resumed != 0 {
		sp.ResumedAt = fromNanos(sql.NullInt64{Int64: resumed, Valid: true})
	}
	if err := json.Unmarshal([]byte(keys), &sp.InputKeys); err != nil {
		return nil, fmt.Errorf("suspension %s round %d: input keys: %w", sp.ActionID, sp.Round, err)
	}
	return &sp, nil
}
