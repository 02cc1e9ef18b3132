package sqlite

import (
	"context"
	"errors"
	"fmt"

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
		recorded, err := t.nudges(req.ID)
		if err != nil {
			return fmt.Errorf("read nudges: %w", err)
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

// nudges returns the kinds of the reminder and escalation events of request id, in id order.
func (t *txn) nudges(id string) ([]string, error) {
	var recorded []string
	err := t.c.query(`SELECT `+eventRowColumns(t.eventRows())+` FROM events WHERE approval_id = ? AND approval_id <> '' ORDER BY id`,
		[]any{id}, func(sc scanner) error {
			row, err := scanEventRow(sc)
			if err != nil {
				return err
			}
			for _, e := range *row {
				if e.Kind == store.EventApprovalReminded || e.Kind == store.EventApprovalEscalated {
					recorded = append(recorded, e.Kind)
				}
			}
			return nil
		})
	return recorded, err
}
