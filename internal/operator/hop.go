package operator

import (
	"context"
	"errors"
	"fmt"

	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Hop states of a HopTree.
const (
	HopLive    = "live"
	HopRevoked = "revoked" // it, or a delegation above it, was revoked
	HopExpired = "expired"
)

// Hop gathers what ran under the hop id: the hop as stored, the records of its creation and
// revocation, and every call whose receipt names it as the delegation that decided it (refused
// calls within a live hop included), each with its receipts and its effect record now. An id
// neither stored as a delegation nor named by any receipt is an error wrapping
// ErrNothingRecorded.
func (o *Operator) Hop(ctx context.Context, id string) (*jsonview.HopTree, error) {
	t := &jsonview.HopTree{Hop: id, Records: []jsonview.Receipt{}, Calls: []jsonview.HopCall{}, Receipts: []jsonview.Receipt{}}
	if err := o.hopDelegation(ctx, t); err != nil {
		return nil, err
	}
	calls := map[string]int{} // action id → index in t.Calls
	for r, err := range o.Receipts(ctx, store.ReceiptFilter{}) {
		if err != nil {
			return nil, err
		}
		doc := r.Doc
		switch {
		case doc == nil:
			continue // names nothing readable; latch receipts --verify reports it
		case doc.Delegation != nil && doc.Delegation.ID == id:
			t.Records = append(t.Records, r.View)
		case doc.Authority != nil && doc.Authority.DelegationID == id:
			i, ok := calls[doc.ActionID]
			if !ok {
				i = len(t.Calls)
				calls[doc.ActionID] = i
				t.Calls = append(t.Calls, jsonview.HopCall{ActionID: doc.ActionID, Action: doc.Action,
					Principal: jsonview.Principal{Agent: jsonview.Str(doc.Principal.Agent), User: jsonview.Str(doc.Principal.User)}})
			}
			c := &t.Calls[i]
			c.Receipts = append(c.Receipts, r.View)
			c.Result, c.Reason = doc.Result, jsonview.Str(doc.DecisionReason)
			if doc.EffectKey != "" {
				c.EffectKey = jsonview.Str(doc.EffectKey)
			}
		default:
			continue
		}
		t.Receipts = append(t.Receipts, r.View)
	}
	if t.Delegation == nil && len(t.Receipts) == 0 {
		return nil, fmt.Errorf("inspect hop %s: %w", id, ErrNothingRecorded)
	}
	for i := range t.Calls {
		c := &t.Calls[i]
		if c.EffectKey == nil || c.Result == receipt.Denied {
			continue // a denied call reserved nothing: the key's record, if any, is another call's
		}
		e, err := o.cfg.Store.Effect(ctx, *c.EffectKey)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return nil, fmt.Errorf("inspect hop %s: read effect: %w", id, err)
		default:
			v := o.EffectView(e)
			c.Effect = &v
		}
	}
	return t, nil
}

// hopDelegation fills in the hop as stored and its state, when the store keeps delegations and
// holds one by t.Hop.
func (o *Operator) hopDelegation(ctx context.Context, t *jsonview.HopTree) error {
	ds, ok := o.cfg.Store.(store.DelegationStore)
	if !ok {
		return nil
	}
	all, err := ds.Delegations(ctx)
	if err != nil {
		return fmt.Errorf("inspect hop %s: read delegations: %w", t.Hop, err)
	}
	byID := make(map[string]*store.Delegation, len(all))
	for _, d := range all {
		byID[d.ID] = d
	}
	d, ok := byID[t.Hop]
	if !ok {
		return nil
	}
	v, g := jsonview.NewDelegation(d, byID)
	t.Delegation = &v
	switch {
	case v.Revoked:
		t.State = HopRevoked
	case g != nil && !g.ExpiresAt.IsZero() && o.cfg.Now().After(g.ExpiresAt):
		t.State = HopExpired
	default:
		t.State = HopLive
	}
	return nil
}
