package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Every write method is one BEGIN IMMEDIATE transaction: read the rows the decider needs, call
// it, write what it returned, append its events and receipt, commit. The rules live in store's
// deciders; this file only moves rows.

// Reserve checks and consumes the presented approval and reserves the effect key, in one
// transaction (docs/guarantees.md#atomicity).
func (s *Store) Reserve(ctx context.Context, req *store.ReserveRequest) (*store.ReserveResult, error) {
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("reserve: %w", err)
	}
	if req == nil {
		return nil, errors.New("reserve: nil request")
	}
	var res *store.ReserveResult
	var refusal error
	err := s.write(ctx, func(t *txn) error {
		refusal = nil // a batch may run this twice (writer.run): the last run answers
		var eff *store.Effect
		var apr *store.Approval
		var rk *store.RequestKey
		var err error
		if req.RequestKey != "" {
			if rk, err = t.requestKey(req.RequestKey); err != nil {
				return err
			}
		}
		if req.EffectKey != "" {
			if eff, err = t.effect(req.EffectKey); err != nil {
				return err
			}
		}
		var st *store.Standing
		switch {
		case store.IsStandingID(req.ApprovalID):
			if st, err = t.standing(req.ApprovalID); err != nil {
				return err
			}
		case req.ApprovalID != "":
			if apr, err = t.approval(req.ApprovalID); err != nil {
				return err
			}
		}
		held, err := t.held(req.Charges, req.Now)
		if err != nil {
			return err
		}
		plan, err := store.PlanKeyedReserve(req, rk, eff, apr, st, held)
		if err != nil {
			refusal = err
			return errRefused
		}
		events, sealed, err := t.apply(plan.Effect, plan.Approval, plan.Events, req.Now, plan.Receipt)
		if err != nil {
			return err
		}
		if err := t.insertCharges(plan.Charges); err != nil {
			return err
		}
		if err := t.applyRequestKey(plan.RequestKey); err != nil {
			return err
		}
		if err := t.applyStanding(plan.Standing); err != nil {
			return err
		}
		plan.Result.Events, plan.Result.Receipt = events, sealed
		res = &plan.Result
		return nil
	})
	if errors.Is(err, errRefused) {
		return nil, fmt.Errorf("reserve %s: %w", req.EffectKey, refusal)
	}
	if err != nil {
		// The operation is named only here: building its name costs an allocation a call.
		op := "reserve"
		switch {
		case req.EffectKey != "":
			op += " " + req.EffectKey
		case req.ApprovalID != "":
			op += " approval " + req.ApprovalID
		}
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return res, nil
}

// Record writes the holder's outcome (when the request names a key), the receipt and the events
// in one transaction (docs/guarantees.md#atomicity).
func (s *Store) Record(ctx context.Context, req *store.RecordRequest) (*store.RecordResult, error) {
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	if req == nil || req.Receipt == nil {
		return nil, errors.New("record: no receipt")
	}
	var res *store.RecordResult
	err := s.write(ctx, func(t *txn) error {
		if req.Once {
			q := selectRecorded
			if t.receiptLinks() {
				q = selectRecordedLinked
			}
			found, err := t.c.queryRowArgs(q, []arg{text(req.Receipt.ActionID)}, func(scanner) error { return nil })
			switch {
			case err != nil:
				return err
			case found:
				return errRefused
			}
		}
		var eff *store.Effect
		var err error
		if req.EffectKey != "" {
			if eff, err = t.effect(req.EffectKey); err != nil {
				return err
			}
		}
		plan := store.PlanRecord(req, eff)
		events, sealed, err := t.apply(plan.Effect, nil, plan.Events, req.Now, plan.Receipt)
		if err != nil {
			return err
		}
		plan.Result.Events, plan.Result.Receipt = events, *sealed
		res = &plan.Result
		return nil
	})
	if err != nil {
		op := "record " + req.Receipt.ActionID
		if req.EffectKey != "" {
			op = "record " + req.EffectKey
		}
		if errors.Is(err, errRefused) {
			err = store.ErrRecorded
		}
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return res, nil
}

// ExtendLease moves the holder's live lease forward; store.ErrLeaseLost when the caller does not
// hold a live lease.
func (s *Store) ExtendLease(ctx context.Context, req *store.ExtendRequest) (*store.Effect, error) {
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("extend lease: %w", err)
	}
	if req == nil {
		return nil, errors.New("extend lease: nil request")
	}
	var out *store.Effect
	var refusal error
	err := s.write(ctx, func(t *txn) error {
		eff, err := t.effect(req.Key)
		if err != nil {
			return err
		}
		w, err := store.PlanExtend(req, eff)
		if err != nil {
			refusal = err
			return errRefused
		}
		if err := t.applyEffect(w); err != nil {
			return err
		}
		out = &w.Next
		return nil
	})
	if errors.Is(err, errRefused) {
		return nil, refusal
	}
	if err != nil {
		return nil, fmt.Errorf("extend lease on %s: %w", req.Key, err)
	}
	return out, nil
}

// errRefused aborts a transaction whose decider refused before anything was written: it is
// rolled back and the decider's error returned as it is.
var errRefused = errors.New("refused")

// Resolve moves an ambiguous effect to committed or failed (docs/guarantees.md#resolving-an-ambiguous-effect); store.ErrNotAmbiguous or
// store.ErrNotFound otherwise, with nothing changed.
func (s *Store) Resolve(ctx context.Context, req *store.ResolveRequest) (*store.Effect, error) {
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("resolve: %w", err)
	}
	if req == nil {
		return nil, errors.New("resolve: nil request")
	}
	var out *store.Effect
	var refusal error
	err := s.write(ctx, func(t *txn) error {
		eff, err := t.effect(req.Key)
		if err != nil {
			return err
		}
		w, events, err := store.PlanResolve(req, eff)
		if err != nil {
			refusal = err
			return errRefused
		}
		if _, _, err := t.apply(w, nil, events, req.Now, store.ResolutionRecord(req, w)); err != nil {
			return err
		}
		out = &w.Next
		return nil
	})
	if errors.Is(err, errRefused) {
		return nil, refusal
	}
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", req.Key, err)
	}
	return out, nil
}

// CreateApproval stores a pending approval request and its events in one transaction, unless
// its probe reservation would be refused: then the refusal is written as Reserve writes it, and
// no request (store.ApprovalRequest).
func (s *Store) CreateApproval(ctx context.Context, req *store.ApprovalRequest) (*store.ApprovalResult, error) {
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("create approval: %w", err)
	}
	var res *store.ApprovalResult
	err := s.write(ctx, func(t *txn) error {
		var eff *store.Effect
		var held []int64
		if p := req.Probe; p != nil && p.EffectKey != "" {
			var err error
			if eff, err = t.effect(p.EffectKey); err != nil {
				return err
			}
			if held, err = t.held(p.Charges, req.Now); err != nil {
				return err
			}
		}
		h, err := t.history(req.Approval.ActionHash)
		if err != nil {
			return err
		}
		plan := store.PlanApproval(req, eff, h, held)
		if plan.Insert != nil {
			if err := t.insertApproval(plan.Insert); err != nil {
				return err
			}
		}
		events, sealed, err := t.apply(plan.Effect, nil, plan.Events, req.Now, plan.Receipt)
		if err != nil {
			return err
		}
		plan.Result.Events = events
		if plan.Result.Refused != nil {
			plan.Result.Refused.Events, plan.Result.Refused.Receipt = events, sealed
		}
		res = &plan.Result
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("create approval %s: %w", req.Approval.ID, err)
	}
	return res, nil
}

// insertApproval inserts a new approval request.
func (t *txn) insertApproval(a *store.Approval) error {
	var b binder
	args := []any{a.ID, string(store.Pending), a.ActionHash, b.json(a.Action), a.ActionName, a.Agent, a.User,
		a.PolicyHash, b.time(a.CreatedAt), b.time(a.ExpiresAt), a.Approver, b.time(a.AnsweredAt), a.ConsumedBy,
		b.time(a.ConsumedAt), a.Note, a.PreviousDenied, a.PreviousDeniedBy, a.PreconditionHash, b.time(a.PreconditionAt)}
	if b.err != nil {
		return b.err
	}
	// A schema before preconditionVersion lacks the last two columns, one before deniedVersion
	// the last four, one before notesVersion the last five. A request stored in an older schema
	// keeps no fingerprint, and is presented as one that captured none.
	const precond = ",\n\tprecondition_hash, precondition_at"
	cols, n := approvalColumns, len(args)
	switch {
	case t.legacy:
		cols, n = strings.TrimSuffix(strings.TrimSuffix(approvalColumns, precond), ", note, previous_denied, previous_denied_by"), n-5
	case t.version != 0 && t.version < deniedVersion:
		cols, n = strings.TrimSuffix(strings.TrimSuffix(approvalColumns, precond), ", previous_denied, previous_denied_by"), n-4
	case t.version != 0 && t.version < preconditionVersion:
		cols, n = strings.TrimSuffix(approvalColumns, precond), n-2
	}
	marks := strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
	args = args[:n]
	_, err := t.c.exec(`INSERT INTO approvals (`+cols+`) VALUES (`+marks+`)`, args...)
	return err
}

// AnswerApproval grants or denies a pending request; *store.AnswerError when it cannot. An
// expired request is written expired, and the answer refused, in the same transaction.
func (s *Store) AnswerApproval(ctx context.Context, req *store.AnswerRequest) (*store.Approval, error) {
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("answer approval: %w", err)
	}
	if req == nil {
		return nil, errors.New("answer approval: nil request")
	}
	var out *store.Approval
	var refusal error
	err := s.write(ctx, func(t *txn) error {
		a, err := t.approval(req.ID)
		if err != nil {
			return err
		}
		if a != nil {
			answers, err := t.answers(a.ID)
			if err != nil {
				return err
			}
			withAnswers(a, answers)
		}
		w, events, planErr := store.PlanAnswer(req, a)
		if w == nil {
			refusal = planErr
			return errRefused
		}
		if w.Answer != nil {
			if err := t.insertAnswer(a.ID, len(w.Next.Answers), w.Answer); err != nil {
				return err
			}
		}
		if w.Standing != nil {
			if err := t.applyStanding(&store.StandingWrite{Next: *w.Standing}); err != nil {
				return err
			}
		}
		if _, _, err := t.apply(nil, w, events, req.Now, store.AnswerRecord(req, w)); err != nil {
			return err
		}
		out = &w.Next
		refusal = planErr // an expired request: written expired, and the answer refused
		return nil
	})
	switch {
	case errors.Is(err, errRefused):
		return nil, refusal
	case err != nil:
		return nil, fmt.Errorf("answer approval %s: %w", req.ID, err)
	case refusal != nil:
		return nil, refusal
	}
	return out, nil
}

// apply writes what a decider planned, in the order every write method writes: the effect, the
// approval (either may be nil), the events (a zero time becomes now), the receipt (nil: none).
// It returns the events as written and the receipt as sealed.
func (t *txn) apply(effect *store.EffectWrite, approval *store.ApprovalWrite, events []store.Event, now time.Time,
	rc *receipt.Receipt) ([]store.Event, *receipt.Sealed, error) {
	if effect != nil {
		if err := t.checkExecutingNamed(effect, events); err != nil {
			return nil, nil, err
		}
		if err := t.applyEffect(effect); err != nil {
			return nil, nil, err
		}
	}
	if approval != nil {
		if err := t.applyApproval(approval); err != nil {
			return nil, nil, err
		}
	}
	if rc == nil {
		written, err := t.insertEvents(events, now, nil)
		return written, nil, err
	}
	// The receipt is sealed first, so that the events' row can carry its seq (schema 22).
	sealed, err := t.sealReceipt(rc)
	if err != nil {
		return nil, nil, err
	}
	written, err := t.insertEvents(events, now, t.linkFor(rc, sealed.Seq))
	if err != nil {
		return nil, nil, err
	}
	if err := t.storeReceipt(rc, sealed); err != nil {
		return nil, nil, err
	}
	return written, &sealed, nil
}
