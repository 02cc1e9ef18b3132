package postgres

import (
	"context"
	"fmt"

	"github.com/latchkit/latch/store"
)

var _ store.Nudger = (*Store)(nil)

// NudgeApproval records a reminder or an escalation of a pending request with its event, in
// one transaction: it locks the request's row first (FOR UPDATE), so that of two sweepers the
// second reads, in its next statement (READ COMMITTED), the nudge the first committed, and
// records nothing; store.ErrNothingToSweep when it is not due, not pending or already recorded.
// It appends no receipt, so it takes no chain head lock.
func (s *Store) NudgeApproval(ctx context.Context, req *store.NudgeRequest) (*store.Approval, []store.Event, error) {
	if err := req.Check(); err != nil {
		return nil, nil, err
	}
	w, err := s.write(ctx, "nudge approval "+req.ID, func(ctx context.Context, t *txn) error {
		if _, err := t.Exec(ctx, `SELECT 1 FROM `+s.quoted()+`.approvals WHERE approval_id = $1 FOR UPDATE`, req.ID); err != nil {
			return fmt.Errorf("lock approval %s: %w", req.ID, err)
		}
		a, err := t.lockApproval(ctx, req.ID)
		if err != nil {
			return err
		}
		rows, err := t.Query(ctx, `SELECT kind FROM `+s.quoted()+`.events WHERE approval_id = $1 AND kind IN ($2, $3)`,
			req.ID, store.EventApprovalReminded, store.EventApprovalEscalated)
		if err != nil {
			return fmt.Errorf("read nudges of %s: %w", req.ID, err)
		}
		var recorded []string
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				rows.Close()
				return fmt.Errorf("read nudges of %s: %w", req.ID, err)
			}
			recorded = append(recorded, k)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read nudges of %s: %w", req.ID, err)
		}
		if err := t.checkPending(ctx); err != nil {
			return err
		}
		evs, err := store.PlanNudge(req, a, recorded)
		if err != nil {
			return refused{err}
		}
		written, _, err := t.apply(ctx, nil, nil, evs, req.Now, nil)
		if err != nil {
			return err
		}
		t.w.result = &swept{approval: a, events: written}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	r := w.result.(*swept)
	return r.approval, r.events, nil
}
