package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Every write method below is one transaction: read the rows the decider needs, ask the decider
// in package store, write what it returned with compare-and-set. Writes go effect, approval,
// events, receipt, in that order in every method; a method that may append a receipt (Reserve,
// Record) locks the chain head before all of them. That is the lock order of the package
// documentation: two transactions never wait on each other in opposite orders.

// Reserve checks and consumes the presented approval and reserves the effect key, in one
// transaction (docs/guarantees.md#atomicity). Reserves in flight together may share it (batch.go).
func (s *Store) Reserve(ctx context.Context, req *store.ReserveRequest) (*store.ReserveResult, error) {
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("reserve: %w", err)
	}
	op := "reserve " + req.EffectKey
	if req.EffectKey == "" {
		op = "reserve (approval " + req.ApprovalID + ")"
	}
	if req.RequestKey != "" || len(req.Charges) > 0 || store.IsStandingID(req.ApprovalID) {
		// A transaction of its own, not a batch: it reads and writes rows beside the effect
		// and the approval (the request key's, the budget ledger's, the standing approval's).
		return s.reserveKeyed(ctx, op, req)
	}
	w, err := s.planned(ctx, &plannedWrite{op: op, effectKey: req.EffectKey, approvalID: req.ApprovalID,
		plan: func(eff *store.Effect, apr *store.Approval) *plan {
			rp := store.PlanReserve(req, eff, apr, nil)
			return &plan{effect: rp.Effect, approval: rp.Approval, events: rp.Events, now: req.Now, receipt: rp.Receipt,
				result: func(events []store.Event, sealed *receipt.Sealed) any {
					res := rp.Result
					res.Events, res.Receipt = events, sealed
					return &res
				}}
		}})
	if err != nil {
		return nil, err
	}
	return w.result.(*store.ReserveResult), nil
}

// Record writes the end of a call — the holder's outcome, the approval it presents, its receipt
// and events — in one transaction (docs/guarantees.md#the-pipeline-of-one-call). Records in flight together may share it.
func (s *Store) Record(ctx context.Context, req *store.RecordRequest) (*store.RecordResult, error) {
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	if req.Receipt == nil {
		return nil, errors.New("record: request has no receipt")
	}
	pw := &plannedWrite{op: "record " + req.Receipt.ActionID, effectKey: req.EffectKey,
		plan: func(eff *store.Effect, _ *store.Approval) *plan {
			rp := store.PlanRecord(req, eff)
			return &plan{effect: rp.Effect, events: rp.Events, now: req.Now, receipt: rp.Receipt,
				result: func(events []store.Event, sealed *receipt.Sealed) any {
					res := rp.Result
					res.Events, res.Receipt = events, *sealed
					return &res
				}}
		}}
	if req.Once {
		pw.once = req.Receipt.ActionID
	}
	w, err := s.planned(ctx, pw)
	if err != nil {
		return nil, err
	}
	return w.result.(*store.RecordResult), nil
}

// ExtendLease moves the live lease of the holder forward; store.ErrLeaseLost when the caller no
// longer holds a live lease.
func (s *Store) ExtendLease(ctx context.Context, req *store.ExtendRequest) (*store.Effect, error) {
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("extend lease: %w", err)
	}
	w, err := s.write(ctx, "extend lease on "+req.Key, func(ctx context.Context, t *txn) error {
		eff, err := t.readEffect(ctx, req.Key)
		if err != nil {
			return err
		}
		ew, err := store.PlanExtend(req, eff)
		if err != nil {
			return refused{err}
		}
		if err := t.writeEffect(ctx, ew); err != nil {
			return err
		}
		t.w.result = &ew.Next
		return nil
	})
	if err != nil {
		return nil, err
	}
	return w.result.(*store.Effect), nil
}

// Resolve moves an ambiguous effect to committed or failed (docs/guarantees.md#resolving-an-ambiguous-effect); store.ErrNotAmbiguous
// for any other state.
func (s *Store) Resolve(ctx context.Context, req *store.ResolveRequest) (*store.Effect, error) {
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("resolve: %w", err)
	}
	w, err := s.write(ctx, "resolve "+req.Key, func(ctx context.Context, t *txn) error {
		if err := t.lockHead(ctx); err != nil { // it appends a record: the head first (the lock order)
			return err
		}
		eff, err := t.readEffect(ctx, req.Key)
		if err != nil {
			return err
		}
		ew, events, err := store.PlanResolve(req, eff)
		if err != nil {
			return refused{err}
		}
		if _, _, err := t.apply(ctx, ew, nil, events, req.Now, store.ResolutionRecord(req, ew)); err != nil {
			return err
		}
		t.w.result = &ew.Next
		return nil
	})
	if err != nil {
		return nil, err
	}
	return w.result.(*store.Effect), nil
}

// CreateApproval stores a pending approval request and its events in one transaction, unless
// its probe reservation would be refused: then the refusal is written as Reserve writes it, and
// no request (store.ApprovalRequest). It may append a receipt, so it locks the chain head first
// (the lock order), then reads the effect under the probe's key: a reservation that commits
// concurrently is either seen or ordered after the request.
func (s *Store) CreateApproval(ctx context.Context, req *store.ApprovalRequest) (*store.ApprovalResult, error) {
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("create approval: %w", err)
	}
	w, err := s.write(ctx, "create approval "+req.Approval.ID, func(ctx context.Context, t *txn) error {
		if err := t.lockHead(ctx); err != nil {
			return err
		}
		var eff *store.Effect
		var held []int64
		if p := req.Probe; p != nil && p.EffectKey != "" {
			var err error
			if held, err = t.held(ctx, p.Charges, req.Now); err != nil {
				return err
			}
			if eff, err = t.readEffect(ctx, p.EffectKey); err != nil {
				return err
			}
		}
		h, err := t.readHistory(ctx, req.Approval.ActionHash)
		if err != nil {
			return err
		}
		plan := store.PlanApproval(req, eff, h, held)
		t.lapsed = lapses(plan.Effect, req.Now)
		if err := t.writeEffect(ctx, plan.Effect); err != nil {
			return err
		}
		if plan.Insert != nil {
			if err := t.insertApproval(ctx, plan.Insert); err != nil {
				return err
			}
		}
		events, err := t.insertEvents(ctx, plan.Events, req.Now)
		if err != nil {
			return err
		}
		sealed, err := t.appendReceipt(ctx, plan.Receipt)
		if err != nil {
			return err
		}
		res := plan.Result
		res.Events = events
		if res.Refused != nil {
			refused := *res.Refused
			refused.Events, refused.Receipt = events, sealed
			res.Refused = &refused
		}
		t.w.result = &res
		return nil
	})
	if err != nil {
		return nil, err
	}
	return w.result.(*store.ApprovalResult), nil
}

// AnswerApproval grants or denies a pending request; *store.AnswerError when it cannot. A
// request found expired is written expired, and the answer is still refused.
func (s *Store) AnswerApproval(ctx context.Context, req *store.AnswerRequest) (*store.Approval, error) {
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("answer approval: %w", err)
	}
	w, err := s.write(ctx, "answer approval "+req.ID, func(ctx context.Context, t *txn) error {
		if err := t.lockHead(ctx); err != nil { // it appends a record: the head first (the lock order)
			return err
		}
		a, err := t.lockApproval(ctx, req.ID)
		if err != nil {
			return err
		}
		aw, events, refusal := store.PlanAnswer(req, a)
		if aw == nil {
			if refusal == nil {
				refusal = errors.New("answer approval " + req.ID + ": nothing to write")
			}
			return refused{refusal}
		}
		if aw.Answer != nil {
			if err := t.insertAnswer(ctx, a.ID, len(aw.Next.Answers), aw.Answer); err != nil {
				return err
			}
		}
		if aw.Standing != nil {
			if err := t.writeStanding(ctx, &store.StandingWrite{Next: *aw.Standing}); err != nil {
				return err
			}
		}
		if _, _, err := t.apply(ctx, nil, aw, events, req.Now, store.AnswerRecord(req, aw)); err != nil {
			return err
		}
		t.w.result, t.w.refusal = &aw.Next, refusal
		return nil
	})
	if err != nil {
		return nil, err
	}
	if w.refusal != nil {
		return nil, w.refusal
	}
	return w.result.(*store.Approval), nil
}
