package operator

import (
	"context"
	"fmt"
	"slices"

	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/store"
)

// StandingStates are the words a standing approval filter takes: a state, or all.
var StandingStates = []string{store.StandingActive, store.StandingExhausted, store.StandingExpired, store.StandingRevoked, All}

// StandingRecords are the standing approvals in state (a word of StandingStates; "" is all) at
// the operator's clock, newest first. A store that keeps none lists none.
func (o *Operator) StandingRecords(ctx context.Context, state string) ([]*store.Standing, error) {
	if state != "" && !slices.Contains(StandingStates, state) {
		return nil, &FilterError{Name: "state", Value: state, Allowed: StandingStates}
	}
	ss, ok := o.cfg.Store.(store.StandingStore)
	if !ok {
		return nil, nil
	}
	f := store.StandingFilter{State: state, Now: o.Now()}
	if state == All {
		f.State = ""
	}
	list, err := ss.Standings(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("list standing approvals: %w", err)
	}
	return list, nil
}

// Standings are StandingRecords as an operator reads them.
func (o *Operator) Standings(ctx context.Context, state string) ([]jsonview.Standing, error) {
	list, err := o.StandingRecords(ctx, state)
	if err != nil {
		return nil, err
	}
	out := make([]jsonview.Standing, len(list))
	for i, s := range list {
		out[i] = o.StandingView(s)
	}
	return out, nil
}

// Standing is the standing approval id; an error wrapping store.ErrNotFound when there is none.
func (o *Operator) Standing(ctx context.Context, id string) (jsonview.Standing, error) {
	ss, ok := o.cfg.Store.(store.StandingStore)
	if !ok {
		return jsonview.Standing{}, fmt.Errorf("read standing approval: %w", store.ErrNotFound)
	}
	s, err := ss.Standing(ctx, id)
	if err != nil {
		return jsonview.Standing{}, fmt.Errorf("read standing approval: %w", err)
	}
	return o.StandingView(s), nil
}

// StandingView is s as an operator reads it now.
func (o *Operator) StandingView(s *store.Standing) jsonview.Standing {
	return jsonview.NewStanding(s, o.cfg.Policy, o.Now())
}
