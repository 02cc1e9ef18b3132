package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/latchkit/latch/store"
)

var _ store.Nudger = (*Store)(nil)

// NudgeApproval records a reminder or an escalation of a pending request with its event, in
// one transaction: the write lock every writer of the file takes, in any process, is held from
// the read of the nudges already recorded to the write, so each is recorded once;
// store.ErrNothingToSweep when it is not due, not pending or already recorded.
func (s *Store) NudgeApproval(ctx context.Context, req *store.NudgeRequest) (*store.Approval, []store.Event, error) {
	if err := req.Check(); err != nil {
		return nil, nil, err
	}
	var out *store.Approval
	var events []store.Event
	var refusal error
	err := s.write(ctx, func(t *txn) error {
		a, err := t.approval(req.ID)
		if err != nil {
			return err
		}
		if a != nil {
			answers, err := t.answers(req.ID)
			if err != nil {
				return err
			}
			withAnswers(a, answers)
		}
		var kinds sql.NullString
		if _, err := t.c.queryRow(`SELECT group_concat(kind) FROM events WHERE approval_id = ? AND kind IN (?, ?)`,
			[]any{req.ID, store.EventApprovalReminded, store.EventApprovalEscalated},
			func(sc scanner) error { return sc.Scan(&kinds) }); err != nil {
			return fmt.Errorf("read nudges: %w", err)
		}
		var recorded []string
		if kinds.Valid && kinds.String != "" {
			recorded = strings.Split(kinds.String, ",")
		}
		evs, err := store.PlanNudge(req, a, recorded)
		if err != nil {
			refusal = err
			return errRefused
		}
		if events, _, err = t.apply(nil, nil, evs, req.Now, nil); err != nil {
			return err
		}
		out = a
		return nil
	})
	if errors.Is(err, errRefused) {
		return nil, nil, refusal
	}
	if err != nil {
		return nil, nil, fmt.Errorf("nudge approval %s: %w", req.ID, err)
	}
	return out, events, nil
}
