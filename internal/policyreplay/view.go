package policyreplay

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// ErrReadOnly is what every method of a replay's store view but Delegations returns: the guard a
// replay decides with has nothing to write and nothing else to read, and a call that tried would
// fail rather than touch the real store.
var ErrReadOnly = errors.New("policy replay: the replay's store view is read-only")

// view is the store a replay's guard runs on: the delegations of the real store, read once, as
// they stood at asOf; nothing else. It never holds the real store, so nothing the guard does
// can reach it.
type view struct {
	rows []*store.Delegation
	asOf time.Time
}

// readDelegations reads the store's delegations once, when the proposed policy has an authority
// section (without one the guard never asks).
func readDelegations(ctx context.Context, st store.Store, p *policy.Policy) (*view, error) {
	v := &view{}
	if p.Authority == nil {
		return v, nil
	}
	ds, ok := st.(store.DelegationStore)
	if !ok {
		return nil, fmt.Errorf("policy replay: store %T keeps no delegations, and the proposed policy has an authority section", st)
	}
	rows, err := ds.Delegations(ctx)
	if err != nil {
		return nil, fmt.Errorf("policy replay: read delegations: %w", err)
	}
	v.rows = rows
	return v, nil
}

// Delegations returns the delegations as they stood at asOf: those created by then, revoked
// only when the revocation had happened by then.
func (v *view) Delegations(context.Context) ([]*store.Delegation, error) {
	out := make([]*store.Delegation, 0, len(v.rows))
	for _, d := range v.rows {
		if d.CreatedAt.After(v.asOf) {
			continue
		}
		if !d.RevokedAt.IsZero() && d.RevokedAt.After(v.asOf) {
			c := *d
			c.RevokedAt, c.RevokedBy = time.Time{}, ""
			d = &c
		}
		out = append(out, d)
	}
	return out, nil
}

func (v *view) CreateDelegation(context.Context, *store.Delegation, []store.Event) error {
	return ErrReadOnly
}

func (v *view) RevokeDelegation(context.Context, *store.RevokeRequest) (*store.Delegation, error) {
	return nil, ErrReadOnly
}

func (v *view) LogEvents(context.Context, []store.Event) error { return ErrReadOnly }

func (v *view) Reserve(context.Context, *store.ReserveRequest) (*store.ReserveResult, error) {
	return nil, ErrReadOnly
}

func (v *view) Record(context.Context, *store.RecordRequest) (*store.RecordResult, error) {
	return nil, ErrReadOnly
}

func (v *view) ExtendLease(context.Context, *store.ExtendRequest) (*store.Effect, error) {
	return nil, ErrReadOnly
}

func (v *view) Resolve(context.Context, *store.ResolveRequest) (*store.Effect, error) {
	return nil, ErrReadOnly
}

func (v *view) CreateApproval(context.Context, *store.ApprovalRequest) (*store.ApprovalResult, error) {
	return nil, ErrReadOnly
}

func (v *view) AnswerApproval(context.Context, *store.AnswerRequest) (*store.Approval, error) {
	return nil, ErrReadOnly
}

func (v *view) Effect(context.Context, string) (*store.Effect, error) { return nil, ErrReadOnly }

func (v *view) Effects(context.Context, store.EffectFilter) ([]*store.Effect, error) {
	return nil, ErrReadOnly
}

func (v *view) Approval(context.Context, string) (*store.Approval, error) { return nil, ErrReadOnly }

func (v *view) Approvals(context.Context, store.ApprovalFilter) ([]*store.Approval, error) {
	return nil, ErrReadOnly
}

func (v *view) Receipts(context.Context, store.ReceiptFilter) iter.Seq2[receipt.Sealed, error] {
	return func(yield func(receipt.Sealed, error) bool) { yield(receipt.Sealed{}, ErrReadOnly) }
}

func (v *view) Head(context.Context) (receipt.Head, error) { return receipt.Head{}, ErrReadOnly }

func (v *view) Events(context.Context, store.EventFilter) ([]*store.Event, error) {
	return nil, ErrReadOnly
}

// Close does nothing: the view holds nothing to release.
func (v *view) Close() error { return nil }

var (
	_ store.Store           = (*view)(nil)
	_ store.DelegationStore = (*view)(nil)
)
